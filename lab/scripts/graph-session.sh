#!/usr/bin/env bash
# One device call for the task-graph work (decision 017, "After step 3"): the device tests and
# memcheck on the graph tests, the host-side phases of a Cholesky-shaped graph on the GPU
# machine's host, the per-task trace, and the bench variant with the graph driver as weft.
# On the GPU machine, from the repository root (writes into $OUT, or ./graph-session-out):
#   bash lab/scripts/graph-session.sh
set -uo pipefail
out=${OUT:-graph-session-out}
mkdir -p "$out"
# At most 8 files come back from a device call: logs and binaries go to /tmp.
scripts/gpu-build.sh /tmp/graph-session-build weft_gpu_device_tests weft > /dev/null || exit 1
t=build-gpu/tests/weft_gpu_device_tests
timeout 200 "$t" > "$out/device-tests.txt" 2>&1
echo "device tests rc=$?" | tee -a "$out/summary.txt"
filter='*Graph*:*Mailbox*:-*TaskGraphsRunEach*:*EveryBlockBusy*:*FreeBlock*:*Overtakes*'
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 "$t" --gtest_filter="$filter" \
  > "$out/memcheck.txt" 2>&1
echo "memcheck rc=$?" | tee -a "$out/summary.txt"
g++ -O2 -std=c++20 -Iinclude -Iapps/gpu -Isrc lab/probes/graph_push_probe.cpp apps/gpu/cholesky.cpp \
  build-gpu/src/libweft.a -lhwloc -lopenblas -llapacke -lpthread -L/usr/local/cuda/lib64 -lcudart \
  -o /tmp/graph_push_probe && timeout 120 /tmp/graph_push_probe 1024 2048 4096 \
  > "$out/push-phases.txt" 2>&1
echo "push phases rc=$?" | tee -a "$out/summary.txt"
timeout 200 bash lab/probes/graph_trace_probe.sh 1024 2048 4096 > "$out/trace.txt" 2>&1
echo "trace rc=$?" | tee -a "$out/summary.txt"
OUT=/tmp/graph-session-bench timeout 250 bash lab/scripts/cholesky-graph-bench.sh \
  > "$out/bench.txt" 2>&1
echo "bench rc=$?" | tee -a "$out/summary.txt"
cp /tmp/graph-session-bench/cholesky-graph.md "$out/" 2>/dev/null
