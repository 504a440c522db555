#!/usr/bin/env bash
# One device call (one H200) for branch gpu-verify-14 after "the constructor waits for its
# lanes" (decision 016, "Still open"; that change was reverted after this run), and the
# full-size gpu-apps suite on the same tree.
#   here:   lab/scripts/gpu-ab.sh prepare b9cc6c9   # the pool before the wait
#           lab/scripts/gpu-ab.sh prepare c0c65b0   # main's pool, without the fan-out task
#           (carry "ab" to the device)
#   device: WEFT_COMMIT=<hash> bash lab/scripts/lanes-start-session.sh
# Steps: builds the weft tool and the device tests, and lab/probes/one_per_sm_probe.cu and
# same_body_probe.cu against both old pools and the tree, all at once; then, with the machine
# quiet: the one-per-SM probe (old, new, old, new; 50 trials of each mode), the device test
# GpuPool.ABatchOfOneTaskPerSmRunsOnePerSm 100 times, the same-body probe (its wide graph's
# "N SMs" line shows the fan-out task), and `weft bench gpu-apps --samples 3` (full sizes)
# until the call's time runs out. Output: $OUT/probes.txt, $OUT/gpu-apps.{json,md,svg,log} and
# $OUT/session.tar.gz (the build and probe logs).
set -uo pipefail
source lab/scripts/session-lib.sh
start_session
t0=$(date +%s)
for c in b9cc6c9 c0c65b0; do
  [ -d "ab/$c/include" ] || { echo "run 'lab/scripts/gpu-ab.sh prepare $c' here first" >&2; exit 2; }
done
nv=(nvcc -O2 -std=c++20 -gencode=arch=compute_90,code=sm_90)
pool_sources() { ls "$1"/src/gpu/*.cu "$1"/src/gpu/*.cpp | grep -v _unavailable; }
build_probe() {  # probe, pool root (ab/<commit> or .), binary
  "${nv[@]}" -I"$2/include" -Iinclude -I"$2/src" -Ilab/probes "lab/probes/$1.cu" \
    $(pool_sources "$2") -o "$work/$3" > "$work/$3.log" 2>&1
}
build_probe one_per_sm_probe ab/b9cc6c9 one-old &
build_probe one_per_sm_probe . one-new &
build_probe same_body_probe ab/c0c65b0 body-old &
build_probe same_body_probe . body-new &
scripts/gpu-build.sh "$work/build" weft_gpu_device_tests weft_cli > "$work/build.txt" 2>&1
echo "build rc=$? at $(($(date +%s) - t0)) s" | tee "$out/probes.txt"
wait
{
  for b in one-old one-new body-old body-new; do
    [ -x "$work/$b" ] || { echo "probe $b did not build:"; tail -5 "$work/$b.log"; }
  done
  echo "== one-per-SM probe (old: b9cc6c9, before the wait; new: the tree)"
  for r in 1 2; do
    for side in old new; do
      echo "=== $side $r"
      timeout 60 "$work/one-$side" 50
    done
  done
  echo "== the device test, 100 times"
  timeout 90 build-gpu/tests/weft_gpu_device_tests --gtest_filter='GpuPool.ABatchOfOneTaskPerSm*' \
    --gtest_repeat=100 > "$work/one-test.log" 2>&1
  echo "one-per-SM: $(grep -c '\[       OK \]' "$work/one-test.log") of 100 passed"
  grep -E 'round [0-9]+:' "$work/one-test.log" | cut -c1-60 | sort | uniq -c
  echo "== same-body probe: main (c0c65b0), then the tree"
  for s in old new; do
    echo "=== $s"
    timeout 40 "$work/body-$s" 10 2>&1 | sed 's/  (GPU 0.*//'
  done
  echo "probes done at $(($(date +%s) - t0)) s"
} 2>&1 | tee -a "$out/probes.txt"
left=$((575 - ($(date +%s) - t0)))
echo "gpu-apps: $left s left" | tee -a "$out/probes.txt"
WEFT_MACHINE=$(scripts/machine-name.sh) timeout "$left" build-gpu/tools/weft/weft bench gpu-apps --samples 3 --json "$out/gpu-apps.json" \
  > "$out/gpu-apps.log" 2>&1
echo "gpu-apps rc=$? at $(($(date +%s) - t0)) s" | tee -a "$out/probes.txt"
