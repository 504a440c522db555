#!/usr/bin/env bash
# The graph layer on the GPU machine (device tool), as it is (no installs), for sm_90.
#   bash scripts/gpu-graph.sh check   build; the factor kernels' GPU tests, the graph tests, the
#                                     CPU executor's tests and stress (x3), the
#                                     weft tool's graph commands on the GPU, compute-sanitizer
#                                     memcheck/racecheck/synccheck on the GPU tests; then
#                                     scripts/gpu-check.sh (the pool; skipped with
#                                     WEFT_SKIP_POOL_CHECK=1). -> $OUT/graph-check.md
#   bash scripts/gpu-graph.sh bench   weft bench graph (32m and 320m floats) -> $OUT/graph.json,
#                                     graph.md, graph.log, graph-nodes.csv (every node of every
#                                     run: --node-log), and factor5_320m's traces (pptm, d_map)
# Pass the commit: WEFT_COMMIT=<hash> (the tree sent to the GPU machine has no .git).
# The bench takes 15 samples per contender (WEFT_BENCH_ARGS replaces that): with 7, identical
# mappings measured up to 9% apart on a noisy machine instance
# (lab/results/h100/graph-e79e9a6.log).
# The device tool returns at most 8 files from $OUT: bench writes 8, check 1 (plus the pool
# check's); a call that runs bench and anything else loses files.
set -uo pipefail
mode=${1:-check}
out=${OUT:-gpu-graph-out}
mkdir -p "$out"
export WEFT_MACHINE=${WEFT_MACHINE:-$(scripts/machine-name.sh)}
build=build-gpu
logs=$(mktemp -d)
configure_and_build() {
  scripts/gpu-build.sh "$logs" weft_cli weft_graph_tests weft_graph_gpu_tests weft_cpu_tests \
    weft_cpu_stress
}

if [ "$mode" = bench ]; then
  configure_and_build || exit 1
  traces=$(mktemp -d)
  $build/tools/weft/weft bench graph ${WEFT_BENCH_ARGS:---samples 15} --machine "$WEFT_MACHINE" \
    --json "$out/graph.json" --trace-dir "$traces" --node-log "$out/graph-nodes.csv" 2>&1 |
    tee "$out/graph.log"
  rc=${PIPESTATUS[0]}
  for p in pptm d_map; do
    cp "$traces/factor5_320m_$p.svg" "$traces/factor5_320m_$p.trace.json" "$out/" 2>/dev/null
  done
  exit "$rc"
fi

summary=()
failures=0
step() {  # name, command...
  local name=$1; shift
  local t0=$(date +%s)
  "$@" > "$logs/$name.log" 2>&1
  local rc=$?
  summary+=("$(printf '%-30s rc=%-3s %4ss' "$name" "$rc" "$(( $(date +%s) - t0 ))")")
  [ "$rc" -eq 0 ] || failures=$((failures + 1))
  echo "== $name (rc=$rc)"
  tail -n 30 "$logs/$name.log"
  return $rc
}
{
  printf '# scripts/gpu-graph.sh check on %s, %s, tree of commit %s\n\n```\n' "$WEFT_MACHINE" \
    "$(date -u +%F)" "${WEFT_COMMIT:-unknown}"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  step build configure_and_build
  step graph_gpu_tests timeout 300 $build/tests/weft_graph_gpu_tests
  step graph_tests timeout 300 $build/tests/weft_graph_tests --gtest_brief=1
  # The CPU executor on this machine's cores and compiler (its sleeps are futex waits; GCC 13's
  # libstdc++ lost a wake-up here once, in the pool's host backend).
  step cpu_tests_x3 timeout 300 $build/tests/weft_cpu_tests --gtest_brief=1 --gtest_repeat=3
  step cpu_stress_x3 timeout 400 $build/tests/weft_cpu_stress --gtest_brief=1 --gtest_repeat=3 \
    --gtest_shuffle
  step tool_graph_run timeout 200 $build/tools/weft/weft graph run --app factor5 --size 4m \
    --policy d_map --device cuda
  step tool_demo_quick timeout 300 $build/tools/weft/weft demo --quick
  # The calibration store on this machine (SQLite's library without its header: the API is
  # declared by weft, see src/graph/mapping/sqlite3_declarations.hpp).
  step tool_calibrate_and_models bash -c "$build/tools/weft/weft calibrate --sizes 1m 4m \
    --device cuda --db $logs/models.db --machine $WEFT_MACHINE && \
    $build/tools/weft/weft models --db $logs/models.db --machine $WEFT_MACHINE"
  for tool in memcheck racecheck synccheck; do
    step "sanitizer_$tool" timeout 300 compute-sanitizer --tool "$tool" --error-exitcode 3 \
      $build/tests/weft_graph_gpu_tests --gtest_filter='*EachOperator*'
  done
  printf '\n== gpu-graph summary ==\n'
  printf '%s\n' "${summary[@]}"
  printf '```\n'
} > "$out/graph-check.md" 2>&1
sed -n '/== gpu-graph summary ==/,$p' "$out/graph-check.md"
pool_rc=0
if [ -z "${WEFT_SKIP_POOL_CHECK:-}" ]; then  # set when the pool's code did not change
  timeout 330 bash scripts/gpu-check.sh
  pool_rc=$?
fi
echo "gpu-check (the pool) rc=$pool_rc"
[ "$failures" -eq 0 ] && [ "$pool_rc" -eq 0 ]
