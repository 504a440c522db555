#!/usr/bin/env bash
# One device call (one H200): where a GPU-filling batch's time goes through the pool
# (lab/probes/batch_trace_probe.cu, 300 reps), then K-means by phases with their spread
# (lab/probes/kmeans_phases_probe.cu, 21 rounds) at n = 4096, 8192, 10240 and 100 000, then
# `weft bench gpu-apps --only kmeans` ($OUT/session.tar.gz holds its files under bench/).
#   device: WEFT_COMMIT=<hash> bash lab/scripts/batch-trace-session.sh
set -uo pipefail
source lab/scripts/session-lib.sh
start_session
t0=$(date +%s)
scripts/gpu-build.sh "$work" weft_gpu_apps weft_cli || exit 1
libs="build-gpu/apps/libweft_gpu_apps.a build-gpu/src/libweft.a"
nvcc -std=c++20 -O3 -gencode=arch=compute_90,code=sm_90 -maxrregcount=168 -Iinclude -Iapps/gpu \
  lab/probes/batch_trace_probe.cu $libs -lhwloc -o "$work/batch_trace" \
  > "$work/probe-build-batch.log" 2>&1 &
nvcc -std=c++20 -O3 -gencode=arch=compute_90,code=sm_90 -Iinclude -Iapps/gpu \
  lab/probes/kmeans_phases_probe.cu $libs -lcublas -lhwloc -o "$work/kmeans_phases" \
  > "$work/probe-build-kmeans.log" 2>&1
wait
for f in "$work"/probe-build-*.log; do tail -5 "$f"; done
echo "built at $(($(date +%s) - t0)) s"
timeout 60 "$work/batch_trace" 300
for n in 4096 8192 10240 100000; do timeout 60 "$work/kmeans_phases" $n 11 21; done
echo "done at $(($(date +%s) - t0)) s"
mkdir -p "$work/bench"
WEFT_MACHINE=$(scripts/machine-name.sh) timeout $((580 - ($(date +%s) - t0))) \
  build-gpu/tools/weft/weft bench gpu-apps --only kmeans --json "$work/bench/gpu-apps.json" \
  > "$work/bench/gpu-apps.log" 2>&1
echo "== bench --only kmeans (rc $?, at $(($(date +%s) - t0)) s)"
grep -E '^\[bench\] kmeans' "$work/bench/gpu-apps.log"
