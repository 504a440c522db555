#!/usr/bin/env bash
# One device call (one H200): K-means with its centroid sums taken on CPU workers, for weft and
# its peers alike (decision 037): the device tests of K-means and TNN, then
# `weft bench gpu-apps --only kmeans`.
#   device: WEFT_COMMIT=<hash> bash lab/scripts/kmeans-sums-session.sh
set -uo pipefail
source lab/scripts/session-lib.sh
start_session
t0=$(date +%s)
scripts/gpu-build.sh "$work" weft_gpu_apps_device_tests weft_cli || exit 1
echo "built at $(($(date +%s) - t0)) s"
timeout 60 build-gpu/tests/weft_gpu_apps_device_tests --gtest_brief=1 \
  --gtest_filter='KmeansOnGpu*:TnnOnGpu*' 2>&1 | tail -3
WEFT_MACHINE=$(scripts/machine-name.sh) timeout 220 build-gpu/tools/weft/weft bench gpu-apps \
  --only kmeans --json "$work/kmeans.json" > "$work/kmeans.log" 2>&1
echo "== bench (rc $?, at $(($(date +%s) - t0)) s)"
grep -E '^\[bench\] kmeans' "$work/kmeans.log"
