#!/usr/bin/env bash
# Configures build-gpu on the GPU machine (as it is: no installs; sm_90) the one way the tool,
# bench and graph scripts share (tools, bench and tests on: a second configuration of the same
# directory would reconfigure it at every switch), and builds the targets given.
#   scripts/gpu-build.sh LOGDIR TARGET...   -> LOGDIR/configure.log, LOGDIR/build.log
# On failure prints the logs' tails and exits non-zero.
set -uo pipefail
logs=$1
shift
mkdir -p "$logs"
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DWEFT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DWEFT_BUILD_TOOLS=ON -DWEFT_BUILD_BENCH=ON -DWEFT_BUILD_TESTS=ON > "$logs/configure.log" 2>&1 &&
  cmake --build build-gpu -j "$(nproc)" --target "$@" > "$logs/build.log" 2>&1 ||
  { tail -40 "$logs/configure.log" "$logs/build.log"; exit 1; }
