#!/usr/bin/env bash
# One device call (one H200), about 170 s from cold: the task bodies with BlockContext::shared()
# derived again from the kernel's dynamic shared memory (decision 046), so that out-of-line
# bodies use shared-memory loads and stores instead of generic ones.
#   1. the applications' library and GPU tests built, the Cholesky and batched GEMM tests run;
#   2. the Cholesky trace (cholesky_trace_probe.cu) of tiles at n = 1024 and 2048 and blocks
#      of 2 at 8192 on CholeskyPool's shape, against decision 045's trace of the tree before.
#   device: WEFT_COMMIT=<hash> bash lab/scripts/shared-as-shared-session.sh
set -uo pipefail
source lab/scripts/session-lib.sh
start_session
t0=$(date +%s)
at() { echo "== $1 (at $(($(date +%s) - t0)) s)"; }
timeout 120 scripts/gpu-build.sh "$work" weft_gpu_apps weft_gpu_apps_device_tests || exit 1
at built
timeout 40 build-gpu/tests/weft_gpu_apps_device_tests --gtest_brief=1 \
  --gtest_filter='CholeskyOnGpu.*:*Batched*:*Gemm*' 2>&1 | grep -vE "^Running main"
at "trace"
nvcc -std=c++20 -O3 -gencode=arch=compute_90,code=sm_90 -maxrregcount=168 -Iinclude \
  -Iapps/gpu -Ilab/probes lab/probes/cholesky_trace_probe.cu build-gpu/apps/libweft_gpu_apps.a \
  build-gpu/src/libweft.a -lopenblas -lhwloc -o "$work/cholesky_trace" \
  > "$work/probe-build.log" 2>&1 || { tail -20 "$work/probe-build.log"; exit 1; }
timeout 60 "$work/cholesky_trace" 3 1024:1:big 2048:1:big 8192:2:big > "$work/trace.txt" 2>&1
grep -E "^n =|host [0-9]|potrf |trsm |syrk |gemm |update|critical" "$work/trace.txt"
at done
