#!/usr/bin/env bash
# One device call (one H200): where TNN's time goes at large n (lab/probes/tnn_pool_probe.cpp:
# the pool's loop with sides that do nothing, only read the tile, or feed the heaps, against
# the heaps alone), at n = 8192 and 32768, d = 256, with the bench's 11 heap workers.
#   device: WEFT_COMMIT=<hash> bash lab/scripts/tnn-pool-session.sh
set -uo pipefail
source lab/scripts/session-lib.sh
start_session
t0=$(date +%s)
scripts/gpu-build.sh "$work" weft_gpu_apps || exit 1
g++ -std=c++20 -O3 -DNDEBUG -Iinclude -Iapps/gpu -I/usr/local/cuda/include \
  lab/probes/tnn_pool_probe.cpp build-gpu/apps/libweft_gpu_apps.a build-gpu/src/libweft.a \
  -L/usr/local/cuda/lib64 -lcudart -lcublas -lhwloc -lpthread -o "$work/tnn_pool" || exit 1
echo "built at $(($(date +%s) - t0)) s"
for n in 8192 32768; do
  timeout 150 "$work/tnn_pool" "$n" 256 11
done
