#!/usr/bin/env bash
# One device call (one H200): the Cholesky POTRF and TRSM tile bodies in panels of 16 columns
# (lab/probes/cholesky_panels.patch on a copy of the header; docs/decisions/041-*.md)
# against the application's sliding window, each timed alone and checked
# (lab/probes/cholesky_tiles_probe.cu), then the application's GPU tests with compute-sanitizer
# memcheck, racecheck and synccheck on the Cholesky ones, the trace of whole factorizations
# (lab/probes/cholesky_trace_probe.cu), and the stream, graph and split tests with the
# sanitizers on the CUDA stream tests. The panels ran as the application's bodies at 14c7db2
# and ef0ca57; from a later tree the GPU tests and the trace run the application's own.
# ONLY_CHOLESKY=1 leaves out the stream, graph and split tests.
#   device: WEFT_COMMIT=<hash> [ONLY_CHOLESKY=1] bash lab/scripts/cholesky-panels-session.sh
set -uo pipefail
source lab/scripts/session-lib.sh
start_session
t0=$(date +%s)
probe() {  # probe NAME INCLUDES...: the tile probe built against the header the includes find
  local name=$1
  shift
  nvcc -std=c++20 -O3 -gencode=arch=compute_90,code=sm_90 -Xptxas -v -Iinclude "$@" \
    lab/probes/cholesky_tiles_probe.cu -o "$work/$name" > "$work/$name.log" 2>&1 ||
    tail -20 "$work/$name.log"
}
panels=$work/panels
mkdir -p "$panels" && cp apps/gpu/cholesky_tiles.hpp "$panels/" &&
  (cd "$panels" && patch -p1 -s) < lab/probes/cholesky_panels.patch || exit 1
probe tiles_apps -Iapps/gpu &
probe tiles_panels -I"$panels" -Iapps/gpu &
validation=(weft_stream_tests weft_stream_gpu_tests weft_stream_mpi_tests
  weft_stream_mpi_fault_tests weft_stream_gpu_mpi_tests weft_graph_tests weft_graph_gpu_tests
  weft_split_tests)
[ "${ONLY_CHOLESKY:-0}" = 1 ] && validation=()
scripts/gpu-build.sh "$work" weft_gpu_apps weft_gpu_apps_device_tests "${validation[@]}" || exit 1
wait
echo "built at $(($(date +%s) - t0)) s"
for name in tiles_apps tiles_panels; do
  echo "== $name"
  timeout 60 "$work/$name" 2>&1 | tee "$work/$name.txt"
done
echo "== device tests (at $(($(date +%s) - t0)) s)"
timeout 200 build-gpu/tests/weft_gpu_apps_device_tests --gtest_brief=1 2>&1 | tail -6
nvcc -std=c++20 -O3 -gencode=arch=compute_90,code=sm_90 -maxrregcount=168 -Iinclude -Iapps/gpu \
  -Ilab/probes lab/probes/cholesky_trace_probe.cu build-gpu/apps/libweft_gpu_apps.a \
  build-gpu/src/libweft.a -lopenblas -lhwloc -o "$work/cholesky_trace" \
  > "$work/build-trace.log" 2>&1 || tail -20 "$work/build-trace.log"
echo "== trace (at $(($(date +%s) - t0)) s)"
timeout 120 "$work/cholesky_trace" 3 1024:1 2048:1 4096:2 | tee "$work/trace.txt"
sanitize build-gpu/tests/weft_gpu_apps_device_tests 'CholeskyOnGpu.*' 150
[ "${ONLY_CHOLESKY:-0}" = 1 ] && { echo "done at $(($(date +%s) - t0)) s"; exit 0; }
echo "== streams (at $(($(date +%s) - t0)) s)"
(cd build-gpu && timeout 300 ctest -L stream 2>&1 | tail -4)
sanitize build-gpu/tests/weft_stream_gpu_tests '*' 100
echo "== graph (at $(($(date +%s) - t0)) s)"
timeout 200 build-gpu/tests/weft_graph_gpu_tests --gtest_brief=1 2>&1 | tail -3
timeout 200 build-gpu/tests/weft_graph_tests --gtest_brief=1 2>&1 | tail -3
echo "== split (at $(($(date +%s) - t0)) s)"
timeout 200 build-gpu/tests/weft_split_tests --gtest_brief=1 2>&1 | tail -3
echo "done at $(($(date +%s) - t0)) s"
