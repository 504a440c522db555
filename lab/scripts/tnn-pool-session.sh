#!/usr/bin/env bash
# One device call (one H200): where TNN's time goes at large n (lab/probes/tnn_pool_probe.cpp:
# the pool's loop with sides that do nothing, only read the tile, or feed the heaps one task a
# side, against tnn_on_pool and the heaps alone) at n = 32768, d = 256, with the bench's 11
# heap workers; TNN's device tests; `weft bench gpu-apps --only tnn`.
#   device: WEFT_COMMIT=<hash> bash lab/scripts/tnn-pool-session.sh
set -uo pipefail
source lab/scripts/session-lib.sh
start_session
t0=$(date +%s)
scripts/gpu-build.sh "$work" weft_gpu_apps weft_gpu_apps_device_tests weft_cli || exit 1
g++ -std=c++20 -O3 -DNDEBUG -Iinclude -Iapps/gpu -I/usr/local/cuda/include \
  lab/probes/tnn_pool_probe.cpp build-gpu/apps/libweft_gpu_apps.a build-gpu/src/libweft.a \
  -L/usr/local/cuda/lib64 -lcudart -lcublas -lhwloc -lpthread -o "$work/tnn_pool" || exit 1
echo "built at $(($(date +%s) - t0)) s"
timeout 120 build-gpu/tests/weft_gpu_apps_device_tests --gtest_brief=1 \
  --gtest_filter='TnnOnGpu*' 2>&1 | tail -3
timeout 120 "$work/tnn_pool" 32768 256 11
echo "== probe done at $(($(date +%s) - t0)) s"
WEFT_MACHINE=$(scripts/machine-name.sh) timeout 200 build-gpu/tools/weft/weft bench gpu-apps \
  --only tnn --json "$work/tnn.json" > "$work/tnn.log" 2>&1
echo "== bench (rc $?, at $(($(date +%s) - t0)) s)"
grep -E '^\[bench\] tnn' "$work/tnn.log"
