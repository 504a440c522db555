#!/usr/bin/env bash
# One device call (one H200): where the tiled Cholesky's graph spends its time
# (lab/probes/cholesky_trace_probe.cu; decision 039's open question): tiles at n = 1024 and
# 2048, blocks of 2 at 4096 and 8192, tiles at 8192 for the difference the blocks made, and
# the three graph shapes (32, 64 and 128 tasks a side) with empty bodies (the graph's own cost
# per task);
# then compute-sanitizer memcheck on the probe at a small size (its stamps' writes).
# Decision 040's pool of 256 task threads with 128 x 128 update blocks (the :big sizes):
#   TRACE_SIZES="2048:2:big 4096:2:big 8192:2:big" MEMCHECK_SIZES="512:2:big"
#   device: WEFT_COMMIT=<hash> [TRACE_SIZES="N:BLOCK[:empty][:big] ..."] \
#           [MEMCHECK_SIZES="..."] bash lab/scripts/cholesky-trace-session.sh [REPS]
set -uo pipefail
source lab/scripts/session-lib.sh
start_session
t0=$(date +%s)
reps=${1:-3}
scripts/gpu-build.sh "$work" weft_gpu_apps || exit 1
nvcc -std=c++20 -O3 -gencode=arch=compute_90,code=sm_90 -maxrregcount=168 -Xptxas -v \
  -Iinclude -Iapps/gpu -Ilab/probes lab/probes/cholesky_trace_probe.cu build-gpu/apps/libweft_gpu_apps.a \
  build-gpu/src/libweft.a -lopenblas -lhwloc -o "$work/cholesky_trace" \
  > "$work/build-probe.log" 2>&1 || { tail -20 "$work/build-probe.log"; exit 1; }
grep -A2 "UpdateBlockBig" "$work/build-probe.log" | grep -E "spill|Used" | head -4
echo "built at $(($(date +%s) - t0)) s"
sizes=${TRACE_SIZES:-1024:1 2048:1 4096:2 8192:2 8192:1 2048:1:empty 8192:1:empty 8192:2:empty}
# shellcheck disable=SC2086  # one argument per size
timeout 150 "$work/cholesky_trace" "$reps" $sizes | tee "$work/trace.txt"
echo "traced (rc ${PIPESTATUS[0]}) at $(($(date +%s) - t0)) s"
# shellcheck disable=SC2086
timeout 120 compute-sanitizer --tool memcheck "$work/cholesky_trace" 1 \
  ${MEMCHECK_SIZES:-512:1 512:2} 2>&1 | tail -4
echo "done at $(($(date +%s) - t0)) s"
