#!/usr/bin/env bash
# One device call (one H200) for the applications' bodies on a copy of their payload (decision
# 038) and the tiled Cholesky in blocks of tiles (decision 039), both landed since (they were
# lab/probes/payload_copy_bodies.patch and cholesky_blocks.patch when this ran): gpu-check
# (every GPU test, memcheck, racecheck, synccheck), then the batch probe (its "DgemmTile batch
# end to end" line is the apps' own tile) and the variable-size batch by ring depth and push
# order (lab/probes/vbatched_probe.cu).
#   device: WEFT_COMMIT=<hash> bash lab/scripts/payload-copy-validate-session.sh
#   then, on the still warm machine (its build is reused):
#     WEFT_COMMIT=<hash> WEFT_BENCH_ARGS="--only batched_gemm --only spmv_bs \
#       --only cholesky" scripts/gpu-apps.sh
# $OUT/session.tar.gz holds gpu-check.md and the probes' build logs.
set -uo pipefail
source lab/scripts/session-lib.sh
start_session
t0=$(date +%s)
grep -q "const Payload p = payload;" apps/gpu/gemm_tile.hpp ||
  { echo "the apps' bodies do not read a copy of their payload"; exit 1; }
grep -q "struct PotrfBlock" apps/gpu/cholesky_tiles.hpp ||
  echo "(no Cholesky blocks in this tree: their test and metric are absent)"
OUT=$work scripts/gpu-check.sh
echo "gpu-check done at $(($(date +%s) - t0)) s"
scripts/gpu-build.sh "$work" weft_gpu_apps weft_cli || exit 1
libs="build-gpu/apps/libweft_gpu_apps.a build-gpu/src/libweft.a"
nvcc -std=c++20 -O3 -gencode=arch=compute_90,code=sm_90 -maxrregcount=168 -Iinclude -Iapps/gpu \
  lab/probes/batch_trace_probe.cu $libs -lhwloc -o "$work/bt" > "$work/build-probe.log" 2>&1 &
nvcc -std=c++20 -O3 -gencode=arch=compute_90,code=sm_90 -Iinclude -Iapps/gpu \
  lab/probes/vbatched_probe.cu $libs -lopenblas -lhwloc -o "$work/vbatched" \
  > "$work/build-vbatched.log" 2>&1
wait
for f in "$work"/build-probe.log "$work"/build-vbatched.log; do tail -5 "$f"; done
timeout 60 "$work/bt" 300 two | grep -v "round ended"
timeout 90 "$work/vbatched" 30
echo "done at $(($(date +%s) - t0)) s"
