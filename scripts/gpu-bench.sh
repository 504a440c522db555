#!/usr/bin/env bash
# Builds the weft tool for sm_90 on the GPU machine (as it is: no installs) and runs
# `weft bench gpu-pool`, writing bench results to $OUT/gpu-pool.json and .md. The tree sent to
# that machine has no .git: pass the commit as WEFT_COMMIT=<hash> in the command.
set -euo pipefail
out=${OUT:-gpu-bench-out}
mkdir -p "$out"
machine=${WEFT_MACHINE:-$(scripts/machine-name.sh)}
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DWEFT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DWEFT_BUILD_TOOLS=ON -DWEFT_BUILD_BENCH=ON -DWEFT_BUILD_TESTS=ON \
  > "$out/bench-configure.log" 2>&1
cmake --build build-gpu -j "$(nproc)" --target weft_cli > "$out/bench-build.log" 2>&1
WEFT_MACHINE=$machine build-gpu/tools/weft/weft bench gpu-pool ${WEFT_BENCH_ARGS:-} \
  --json "$out/gpu-pool.json" 2>&1 | tee "$out/gpu-pool.log"
