#!/usr/bin/env bash
# One device call (one H200) for the applications' bodies on a copy of their payload
# (lab/probes/payload_copy_bodies.patch, decision 038): gpu-check (every GPU test, memcheck,
# racecheck, synccheck), then the batch probe (its "DgemmTile batch end to end" line is the
# apps' own tile), the variable-size batch by ring depth and push order
# (lab/probes/vbatched_probe.cu), then `weft bench gpu-apps --only batched_gemm --only spmv_bs`.
#   here:   git apply lab/probes/payload_copy_bodies.patch
#   device: WEFT_COMMIT=<hash>+payload-copy bash lab/scripts/payload-copy-validate-session.sh
# $OUT/session.tar.gz holds gpu-check.md and the bench's files under bench/.
set -uo pipefail
source lab/scripts/session-lib.sh
start_session
t0=$(date +%s)
grep -q "const Payload p = payload;" apps/gpu/gemm_tile.hpp ||
  { echo "the patch is not applied (git apply lab/probes/payload_copy_bodies.patch)"; exit 1; }
OUT=$work scripts/gpu-check.sh
echo "gpu-check done at $(($(date +%s) - t0)) s"
scripts/gpu-build.sh "$work" weft_gpu_apps weft_cli || exit 1
nvcc -std=c++20 -O3 -gencode=arch=compute_90,code=sm_90 -maxrregcount=168 -Iinclude -Iapps/gpu \
  lab/probes/batch_trace_probe.cu build-gpu/apps/libweft_gpu_apps.a build-gpu/src/libweft.a \
  -lhwloc -o "$work/bt" > "$work/build-probe.log" 2>&1 || tail -20 "$work/build-probe.log"
timeout 60 "$work/bt" 300 two | grep -v "round ended"
nvcc -std=c++20 -O3 -gencode=arch=compute_90,code=sm_90 -Iinclude -Iapps/gpu \
  lab/probes/vbatched_probe.cu build-gpu/apps/libweft_gpu_apps.a build-gpu/src/libweft.a \
  -lopenblas -lhwloc -o "$work/vbatched" > "$work/build-vbatched.log" 2>&1 ||
  tail -20 "$work/build-vbatched.log"
timeout 90 "$work/vbatched" 30
mkdir -p "$work/bench"
WEFT_MACHINE=$(scripts/machine-name.sh) timeout $((590 - ($(date +%s) - t0))) \
  build-gpu/tools/weft/weft bench gpu-apps --only batched_gemm --only spmv_bs \
  --json "$work/bench/gpu-apps.json" > "$work/bench/gpu-apps.log" 2>&1
echo "== bench (rc $?, at $(($(date +%s) - t0)) s)"
grep -E '^\[bench\] [a-z_0-9]+ *\.' "$work/bench/gpu-apps.log"
