#!/usr/bin/env bash
# One device call (one H200): the tiled Cholesky in blocks of 2 x 2 tiles on a pool of one
# block a SM with 256 task threads whose update blocks are one 128 x 128 product
# (lab/probes/cholesky_big_probe.cu, decision 040), against the apps' pool shape; then
# compute-sanitizer memcheck on the big pool at a small size.
#   device: WEFT_COMMIT=<hash> bash lab/scripts/cholesky-big-session.sh [REPS]
set -uo pipefail
source lab/scripts/session-lib.sh
start_session
t0=$(date +%s)
reps=${1:-3}
scripts/gpu-build.sh "$work" weft_gpu_apps || exit 1
nvcc -std=c++20 -O3 -gencode=arch=compute_90,code=sm_90 -maxrregcount=168 -Xptxas -v -Iinclude \
  -Iapps/gpu -Ilab/probes lab/probes/cholesky_big_probe.cu build-gpu/apps/libweft_gpu_apps.a \
  build-gpu/src/libweft.a -lopenblas -lhwloc -o "$work/cholesky_big" \
  > "$work/build-probe.log" 2>&1 || { tail -20 "$work/build-probe.log"; exit 1; }
grep -A2 "UpdateBlockBig" "$work/build-probe.log" | grep -E "spill|Used" | head -4
echo "built at $(($(date +%s) - t0)) s"
timeout 200 "$work/cholesky_big" "$reps" 2048:2:big 4096:2:big 8192:2:big \
  | tee "$work/big.txt"
echo "ran (rc ${PIPESTATUS[0]}) at $(($(date +%s) - t0)) s"
timeout 60 compute-sanitizer --tool memcheck "$work/cholesky_big" 1 512:2:big 2>&1 |
  grep -E "^n = |residual|ERROR SUMMARY"
echo "done at $(($(date +%s) - t0)) s"
