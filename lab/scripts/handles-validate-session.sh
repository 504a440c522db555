#!/usr/bin/env bash
# One device call (one H200) after the input-check changes of the streams, graph and stores:
# the stream tests (host device, CUDA, two processes under mpirun) and compute-sanitizer
# memcheck, racecheck and synccheck on the CUDA stream tests; the graph's GPU tests and graph
# tests, with memcheck on the GPU ones; the split tests.
#   device: WEFT_COMMIT=<hash> bash lab/scripts/handles-validate-session.sh
set -uo pipefail
source lab/scripts/session-lib.sh
start_session
t0=$(date +%s)
scripts/gpu-build.sh "$work" weft_stream_tests weft_stream_gpu_tests weft_stream_mpi_tests \
  weft_stream_mpi_fault_tests weft_stream_gpu_mpi_tests weft_graph_tests weft_graph_gpu_tests \
  weft_split_tests || exit 1
echo "built at $(($(date +%s) - t0)) s"
(cd build-gpu && timeout 300 ctest -L stream 2>&1 | tail -6)
timeout 300 build-gpu/tests/weft_stream_gpu_tests --gtest_brief=1 2>&1 | tail -4
sanitize build-gpu/tests/weft_stream_gpu_tests '*' 200
echo "== graph (at $(($(date +%s) - t0)) s)"
timeout 300 build-gpu/tests/weft_graph_gpu_tests --gtest_brief=1 2>&1 | tail -4
timeout 300 build-gpu/tests/weft_graph_tests --gtest_brief=1 2>&1 | tail -4
timeout 200 compute-sanitizer --tool memcheck --error-exitcode 3 \
  build-gpu/tests/weft_graph_gpu_tests --gtest_brief=1 2>&1 | tail -3
echo "== split (at $(($(date +%s) - t0)) s)"
timeout 300 build-gpu/tests/weft_split_tests --gtest_brief=1 2>&1 | tail -4
echo "done at $(($(date +%s) - t0)) s"
