#!/usr/bin/env bash
# One device call (one H200) for a block that keeps a successor it completed
# (docs/decisions/042-graph-blocks-keep-a-successor.md), in about 330 s: the pool's graph tests
# and the applications' Cholesky tests on the GPU, the Cholesky trace (host time and the chain's
# waits) at n = 1024 and 2048, then compute-sanitizer racecheck, memcheck and synccheck on the
# pool's graph tests. Every step has its own time limit and prints as it goes.
#   device (main has the keep with the report deferred; e4b0362 the keep alone):
#     WEFT_COMMIT=<hash> bash lab/scripts/graph-keep-session.sh
# The step's phases: WEFT_COMMIT=<hash> bash lab/probes/graph_trace_probe.sh 1024 2048
set -uo pipefail
source lab/scripts/session-lib.sh
start_session
t0=$(date +%s)
at() { echo "== $1 (at $(($(date +%s) - t0)) s)"; }
nvcc -std=c++20 -O3 -gencode=arch=compute_90,code=sm_90 -maxrregcount=168 -Iinclude -Iapps/gpu \
  -Ilab/probes -c lab/probes/cholesky_trace_probe.cu -o "$work/cholesky_trace.o" \
  > "$work/build-trace.log" 2>&1 &
scripts/gpu-build.sh "$work" weft_gpu_device_tests weft_gpu_apps_device_tests || exit 1
wait
nvcc -gencode=arch=compute_90,code=sm_90 "$work/cholesky_trace.o" build-gpu/apps/libweft_gpu_apps.a \
  build-gpu/src/libweft.a -lopenblas -lhwloc -o "$work/cholesky_trace" >> "$work/build-trace.log" 2>&1 ||
  tail -20 "$work/build-trace.log"
at built
graphs='GpuPool.*Graph*'
timeout 60 build-gpu/tests/weft_gpu_device_tests --gtest_brief=1 --gtest_filter="$graphs" 2>&1 |
  grep -vE "^Running main"
at "apps' Cholesky"
timeout 40 build-gpu/tests/weft_gpu_apps_device_tests --gtest_brief=1 \
  --gtest_filter='CholeskyOnGpu.*' 2>&1 | grep -vE "^Running main"
at trace
timeout 40 "$work/cholesky_trace" 3 1024:1 2048:1 > "$work/trace.txt" 2>&1
grep -E "^n =|host [0-9]|critical|potrf |trsm |waits" "$work/trace.txt"
for tool in racecheck memcheck synccheck; do
  at "$tool"
  timeout 35 compute-sanitizer --tool "$tool" --error-exitcode 3 \
    build-gpu/tests/weft_gpu_device_tests --gtest_brief=1 \
    --gtest_filter='GpuPool.TaskGraphsRun*:GpuPool.AFailedGraph*:GpuPool.GraphsRunAcross*' 2>&1 |
    tail -3
done
at done
