#!/usr/bin/env bash
# One device call (one H200) for a block that keeps a successor it completed
# (docs/decisions/042-graph-blocks-keep-a-successor.md): the pool's device tests, with
# compute-sanitizer memcheck, racecheck and synccheck on its graph tests; the applications'
# GPU tests, with the three on the Cholesky ones; the Cholesky trace (host time, chain) at
# n = 1024 .. 8192; then graph_trace_probe.sh, whose stamps split a dependent step into its
# phases (it builds with its patch applied, and takes it out again).
#   device: WEFT_COMMIT=<hash> bash lab/scripts/graph-keep-session.sh
set -uo pipefail
source lab/scripts/session-lib.sh
start_session
t0=$(date +%s)
scripts/gpu-build.sh "$work" weft_gpu_device_tests weft_gpu_apps weft_gpu_apps_device_tests ||
  exit 1
echo "built at $(($(date +%s) - t0)) s"
timeout 200 build-gpu/tests/weft_gpu_device_tests --gtest_brief=1 2>&1 | tail -5
sanitize build-gpu/tests/weft_gpu_device_tests '*Graph*' 120
echo "== apps (at $(($(date +%s) - t0)) s)"
timeout 200 build-gpu/tests/weft_gpu_apps_device_tests --gtest_brief=1 2>&1 | tail -4
sanitize build-gpu/tests/weft_gpu_apps_device_tests 'CholeskyOnGpu.*' 120
nvcc -std=c++20 -O3 -gencode=arch=compute_90,code=sm_90 -maxrregcount=168 -Iinclude -Iapps/gpu \
  -Ilab/probes lab/probes/cholesky_trace_probe.cu build-gpu/apps/libweft_gpu_apps.a \
  build-gpu/src/libweft.a -lopenblas -lhwloc -o "$work/cholesky_trace" \
  > "$work/build-trace.log" 2>&1 || tail -20 "$work/build-trace.log"
echo "== trace (at $(($(date +%s) - t0)) s)"
timeout 150 "$work/cholesky_trace" 3 1024:1 2048:1 4096:2 8192:2 > "$work/trace.txt" 2>&1
grep -E "^n =|host [0-9]|critical|potrf |trsm " "$work/trace.txt"
echo "== step phases (at $(($(date +%s) - t0)) s)"
timeout 200 bash lab/probes/graph_trace_probe.sh 1024 2048 > "$work/graph-trace.txt" 2>&1
grep -vE "^patching" "$work/graph-trace.txt" | grep -E "^n =|critical|queue|wall"
echo "done at $(($(date +%s) - t0)) s"
