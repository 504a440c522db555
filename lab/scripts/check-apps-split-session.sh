#!/usr/bin/env bash
# One device call (one H200) for the changes not yet run on a GPU at the start of 2026-11-28's
# second session, in this order:
#   1. scripts/gpu-check.sh: device, fault, host and apps tests; memcheck, racecheck, synccheck;
#   2. `weft bench gpu-apps --only spmv_bs` (the job on its own pool, decision 018's fourth round);
#   3. the split's memory-bound applications with and without --take-tail, alternated, two
#      rounds (session-lib.sh's split_tail_ab; at 6e19e37 this step named the per-core case
#      as an application, which the bench refused: spmv-ring-split-session.sh ran it);
#   4. lab/probes/cholesky_tiles_probe.cu in its carveout mode (decision 018, third round).
# Everything goes into $OUT/session.tar.gz (the device tool brings back eight files at most),
# with gpu-check.md beside it.   WEFT_COMMIT=<hash> bash lab/scripts/check-apps-split-session.sh
set -uo pipefail
source lab/scripts/session-lib.sh
start_session
OUT=$work bash scripts/gpu-check.sh
cp "$work/gpu-check.md" "$out/"
scripts/gpu-build.sh "$work/build-logs" weft_cli || exit 1
weft=build-gpu/tools/weft/weft
mkdir -p "$work/spmv"
timeout 120 $weft bench gpu-apps --only spmv_bs --samples 5 --json "$work/spmv/gpu-apps.json" \
  > "$work/spmv.log" 2>&1
grep -E '^\[bench\]|spmv' "$work/spmv.log" | tail -20
split_tail_ab "$weft" 2 triad_host spmv_host
nvcc -O3 -std=c++20 -gencode=arch=compute_90,code=sm_90 -Iinclude -Iapps/gpu -Ilab/probes \
  lab/probes/cholesky_tiles_probe.cu -o "$work/ctp" && timeout 120 "$work/ctp" carveout 66048 -1 58 72 100 \
  | tee "$work/carveout.txt"
