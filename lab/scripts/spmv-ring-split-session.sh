#!/usr/bin/env bash
# One device call (one H200), after check-apps-split-session.sh:
#   1. GpuPool.ABatchOfOneTaskPerSmRunsOnePerSm 20 times, its failures printed in full;
#   2. the split's memory-bound applications with and without --take-tail, alternated, two
#      rounds;
#   3. the mixed SpMV + Black-Scholes job with its pool's ring depth 1, 2, 4 and 8 (the tree's
#      spmv_bs_pool_options patched on the GPU machine only; decision 018's candidate "unequal
#      rings"), each `weft bench gpu-apps --only spmv_bs --samples 5`.
# Everything goes into $OUT/session.tar.gz.   bash lab/scripts/spmv-ring-split-session.sh
set -uo pipefail
source lab/scripts/session-lib.sh
start_session
scripts/gpu-build.sh "$work/build-logs" weft_cli weft_gpu_device_tests || exit 1
timeout 120 build-gpu/tests/weft_gpu_device_tests --gtest_filter='GpuPool.ABatchOfOneTaskPerSm*' \
  --gtest_repeat=20 > "$work/one-per-sm.log" 2>&1
grep -E -A6 'Failure|FAILED' "$work/one-per-sm.log" | head -40
grep -c '\[       OK \]' "$work/one-per-sm.log"
weft=build-gpu/tools/weft/weft
split_tail_ab "$weft" 2 triad_host spmv_host
cp apps/gpu/spmv_bs.cpp "$work/spmv_bs.cpp.orig"
for depth in 1 2 4 8; do
  cp "$work/spmv_bs.cpp.orig" apps/gpu/spmv_bs.cpp
  set_spmv_ring_depth "o.ring_depth = $depth;" || exit 1
  scripts/gpu-build.sh "$work/build-logs-$depth" weft_cli || exit 1
  mkdir -p "$work/spmv-depth-$depth"
  timeout 120 $weft bench gpu-apps --only spmv_bs --samples 5 \
    --json "$work/spmv-depth-$depth/gpu-apps.json" > "$work/spmv-depth-$depth.log" 2>&1
  echo "== ring depth $depth"; grep -E '^\[bench\] spmv' "$work/spmv-depth-$depth.log"
done
cp "$work/spmv_bs.cpp.orig" apps/gpu/spmv_bs.cpp
