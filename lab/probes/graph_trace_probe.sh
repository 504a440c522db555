#!/usr/bin/env bash
# Builds and runs graph_trace_probe.cu on the GPU machine (repository root): applies
# graph_trace.patch (the kernel's stamps of each graph task), builds weft_gpu_apps_device_tests
# and links the probe as app_bodies_probe.sh does, runs it, and takes the patch out again.
#   [EXTRA_PATCH=lab/probes/X.patch] bash lab/probes/graph_trace_probe.sh [n ...]
set -uo pipefail
patch_file=$(realpath "$(dirname "$0")")/graph_trace.patch
patch -p1 < "$patch_file" || exit 1
root=$(pwd)
trap 'cd "$root" && patch -R -p1 < "$patch_file"' EXIT
# EXTRA_PATCH: a change to time, applied on top of the stamps (and taken out with them).
if [ -n "${EXTRA_PATCH:-}" ]; then
  extra=$(realpath "$EXTRA_PATCH")
  patch -p1 < "$extra" || exit 1
  trap 'cd "$root" && patch -R -p1 < "$extra" && patch -R -p1 < "$patch_file"' EXIT
fi
logs=$(mktemp -d)
scripts/gpu-build.sh "$logs" weft_gpu_apps_device_tests || exit 1
cd build-gpu/tests || exit 1
nvcc -O3 -std=c++20 -gencode=arch=compute_90,code=sm_90 -I../../include -I../../apps/gpu \
  -c ../../lab/probes/graph_trace_probe.cu -o graph_trace_probe.o || exit 1
link=$(sed -e 's#CMakeFiles/weft_gpu_apps_device_tests.dir/apps/gpu_apps_device_test.cu.o#graph_trace_probe.o#' \
  -e 's#-o weft_gpu_apps_device_tests#-o graph_trace_probe#' -e 's#[^ ]*libgtest_main.a##' \
  CMakeFiles/weft_gpu_apps_device_tests.dir/link.txt)
eval "$link" || exit 1
timeout 200 ./graph_trace_probe "$@"
