#!/usr/bin/env bash
# One device call (one H200) for TNN's tile writes (GemmTileBody's c_through_shared, decision
# 035): the batched GEMM's and TNN's device tests, the heaps probe with the bench's 11 workers
# (the host half alone, and tnn_on_pool's loop over a stand-in pool), `weft bench gpu-apps
# --only tnn`, then compute-sanitizer memcheck, racecheck and synccheck on the tests of the new
# write path, as far as the call's time allows.
#   device: WEFT_COMMIT=<hash> bash lab/scripts/tnn-session.sh
# Prints the tests', probe's and sanitizers' tails and the bench's TNN rows;
# $OUT/session.tar.gz holds the bench's JSON, table, charts and log.
set -uo pipefail
source lab/scripts/session-lib.sh
start_session
t0=$(date +%s)
scripts/gpu-build.sh "$work" weft_gpu_apps_device_tests weft_cli || exit 1
echo "built at $(($(date +%s) - t0)) s"
timeout 120 build-gpu/tests/weft_gpu_apps_device_tests --gtest_brief=1 \
  --gtest_filter='BatchedGemmOnGpu*:TnnOnGpu*' 2>&1 | tail -4
g++ -std=c++20 -O3 -DNDEBUG -Iinclude -Iapps/gpu lab/probes/tnn_heaps_probe.cpp apps/gpu/tnn.cpp \
  build-gpu/src/libweft.a -lopenblas -lhwloc -lpthread -o "$work/tnn_heaps" &&
  timeout 60 "$work/tnn_heaps" 8192 256 11
WEFT_MACHINE=$(scripts/machine-name.sh) timeout 200 build-gpu/tools/weft/weft bench gpu-apps \
  --only tnn --json "$work/tnn.json" > "$work/tnn.log" 2>&1
echo "== bench (rc $?, at $(($(date +%s) - t0)) s)"
grep -E '^\[bench\] tnn' "$work/tnn.log"
# A device call ends at 600 s: the sanitizers get what is left, 100 s each at most.
if (($(date +%s) - t0 < 280)); then
  sanitize build-gpu/tests/weft_gpu_apps_device_tests \
    'BatchedGemmOnGpu.CThroughSharedMemoryWritesTheSameC:TnnOnGpu*' 100
else
  echo "== sanitizers skipped: out of time (run them alone)"
fi
