#!/usr/bin/env bash
# Task streams on the GPU machine (docs/streams.md), in one call: the stream tests (the CUDA
# paths, and the two-process run under mpirun), compute-sanitizer memcheck, racecheck and
# synccheck on the CUDA tests, then `weft bench streams` ($OUT/streams.json, .md, .svg and
# .log; pass WEFT_COMMIT=<hash>, and WEFT_BENCH_ARGS=--quick for the smoke sizes).
set -uo pipefail
out=${OUT:-streams-out}
mkdir -p "$out"
logs=$(mktemp -d)
scripts/gpu-build.sh "$logs" weft_stream_tests weft_stream_gpu_tests weft_stream_mpi_tests \
  weft_stream_mpi_fault_tests weft_stream_gpu_mpi_tests weft_stream_apps_tests weft_cli ||
  exit 1
rc=0
echo "== stream tests (host device, CUDA, two processes)"
(cd build-gpu && timeout 300 ctest -L stream --output-on-failure 2>&1 | tail -15) || rc=1
timeout 300 build-gpu/tests/weft_stream_gpu_tests --gtest_brief=1 2>&1 | tail -8 || rc=1
for tool in memcheck racecheck synccheck; do
  echo "== compute-sanitizer $tool: task streams on CUDA" | tee -a "$out/sanitizer.log"
  timeout 300 compute-sanitizer --tool "$tool" --error-exitcode 3 \
    build-gpu/tests/weft_stream_gpu_tests --gtest_brief=1 >> "$out/sanitizer.log" 2>&1 || rc=1
  tail -4 "$out/sanitizer.log"
done
OUT=$out scripts/gpu-suite.sh streams streams-out || rc=1
exit $rc
