#!/usr/bin/env bash
# Everything the GPU machine (device tool) must run for a change to GPU code, in one call:
# configure and build for sm_90 as the machine is (no installs), run the GPU tests and the host
# tests, then compute-sanitizer memcheck, racecheck and synccheck on the GPU tests.
# The console output goes to $OUT/gpu-check.md (or ./gpu-check-out), headed by the machine and
# the commit (WEFT_COMMIT=<hash>: the tree sent to the GPU machine has no .git); per-step logs
# stay on the machine (the device tool brings back only a few files). The last lines are a
# summary table.
set -uo pipefail
out=${OUT:-gpu-check-out}
mkdir -p "$out"
if [ -z "${WEFT_GPU_CHECK_INNER:-}" ]; then
  machine=${WEFT_MACHINE:-$(scripts/machine-name.sh)}
  console=$(mktemp)
  WEFT_GPU_CHECK_INNER=1 bash "$0" "$@" > "$console" 2>&1
  rc=$?
  {
    printf '# scripts/gpu-check.sh on %s, %s, tree of commit %s\n\n' "$machine" "$(date -u +%F)" \
      "${WEFT_COMMIT:-unknown}"
    printf 'Console output of the run (the per-step logs stay on the device; the summary is at the end).\n\n'
    printf '```\n'
    cat "$console"
    printf '```\n'
  } > "$out/gpu-check.md"
  sed -n '/== gpu-check summary ==/,$p' "$console"
  exit $rc
fi
out=$(mktemp -d)  # the per-step logs
build=build-gpu
jobs=$(nproc)
summary=()
failures=0
step() {  # name, command...
  local name=$1; shift
  local t0=$(date +%s)
  "$@" > "$out/$name.log" 2>&1
  local rc=$?
  summary+=("$(printf '%-28s rc=%-3s %4ss' "$name" "$rc" "$(( $(date +%s) - t0 ))")")
  [ "$rc" -eq 0 ] || failures=$((failures + 1))
  tail -n 25 "$out/$name.log"
  return $rc
}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$out/gpus.txt" 2>&1
cat "$out/gpus.txt"
# The configuration of scripts/gpu-build.sh (tools and bench on, though only the tests are built
# here), so that the tool and bench scripts run after this one in the same call reuse the build
# instead of reconfiguring it.
step configure cmake -S . -B $build -DCMAKE_BUILD_TYPE=Release -DWEFT_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DWEFT_BUILD_TOOLS=ON -DWEFT_BUILD_BENCH=ON \
  -DWEFT_BUILD_TESTS=ON || exit 1
step build cmake --build $build -j "$jobs" --target weft_gpu_device_tests weft_gpu_fault_tests \
  weft_gpu_host_tests example_gpu_pool_device weft_gpu_apps_device_tests || exit 1
# Each run has a time limit, so that a hang is reported as one (rc 124) instead of eating the
# whole device call.
step gpu_tests timeout 240 $build/tests/weft_gpu_device_tests
step fault_tests timeout 120 $build/tests/weft_gpu_fault_tests
step host_tests timeout 240 $build/tests/weft_gpu_host_tests --gtest_brief=1
step device_example timeout 60 stdbuf -oL $build/apps/example_gpu_pool_device  # docs/gpu.md
step apps_tests timeout 240 $build/tests/weft_gpu_apps_device_tests
# Under the sanitizers the million-task test would take too long, and the watchdog,
# idle-traffic and three graph-placement tests (which block takes a ready task, how long a
# pushed or urgent task waits beside a graph) assert timings a sanitizer stretches; the one-task-per-SM test asserts SM
# ids, which change when a tool preempts blocks and resumes them elsewhere; the others cover
# the kernel (its deep-idle path included: under a sanitizer every block idles long enough to
# enter it).
filter='--gtest_filter=-*Million*:*Watchdog*:*IdlePool*:*OnePerSm*:*FreeBlock*:*EveryBlockBusy*:*Overtakes*'
for tool in memcheck racecheck synccheck; do
  step "sanitizer_$tool" timeout 400 compute-sanitizer --tool "$tool" --error-exitcode 3 \
    $build/tests/weft_gpu_device_tests "$filter"
  step "apps_$tool" timeout 300 compute-sanitizer --tool "$tool" --error-exitcode 3 \
    $build/tests/weft_gpu_apps_device_tests
done
printf '\n== gpu-check summary ==\n'
printf '%s\n' "${summary[@]}"
[ "$failures" -eq 0 ]  # the exit status: 1 when any step failed
