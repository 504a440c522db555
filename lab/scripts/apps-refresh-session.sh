#!/usr/bin/env bash
# One device call (one H200), near its 600 s: K-means by phases (lab/probes/kmeans_phases_probe.cu,
# n = 100 000, 11 sum workers: decision 037's open question), then the full
# `weft bench gpu-apps`, whose TNN and K-means rows predate decisions 036 and 037.
#   device: WEFT_COMMIT=<hash> bash lab/scripts/apps-refresh-session.sh
# $OUT/session.tar.gz holds the bench's JSON, tables, charts and log (copy them into
# bench/results/<machine>/ when the run is good). Should the bench be cut short, run
# scripts/gpu-apps.sh at once on the same, still warm, machine: its build is then incremental.
set -uo pipefail
source lab/scripts/session-lib.sh
start_session
t0=$(date +%s)
scripts/gpu-build.sh "$work" weft_gpu_apps weft_cli || exit 1
nvcc -std=c++20 -O3 -gencode=arch=compute_90,code=sm_90 -Iinclude -Iapps/gpu \
  lab/probes/kmeans_phases_probe.cu build-gpu/apps/libweft_gpu_apps.a build-gpu/src/libweft.a \
  -lcublas -lhwloc -o "$work/kmeans_phases" > "$work/probe-build.log" 2>&1 ||
  tail -20 "$work/probe-build.log"
echo "built at $(($(date +%s) - t0)) s"
timeout 40 "$work/kmeans_phases" 100000 11
mkdir -p "$work/bench"
WEFT_MACHINE=$(scripts/machine-name.sh) timeout $((560 - ($(date +%s) - t0))) \
  build-gpu/tools/weft/weft bench gpu-apps --json "$work/bench/gpu-apps.json" \
  > "$work/bench/gpu-apps.log" 2>&1
echo "== bench (rc $?, at $(($(date +%s) - t0)) s)"
grep -E '^\[bench\] [a-z_0-9]+ +\.' "$work/bench/gpu-apps.log"
