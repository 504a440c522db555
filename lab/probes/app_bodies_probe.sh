#!/usr/bin/env bash
# Builds and runs app_bodies_probe.cu on the GPU machine (repository root), linking it as
# weft_gpu_apps_device_tests is linked (that target's link line, its test object and GoogleTest's
# main swapped for the probe's object). Prints the probe's tables.
set -euo pipefail
logs=$(mktemp -d)
scripts/gpu-build.sh "$logs" weft_gpu_apps_device_tests
cd build-gpu/tests
nvcc -O3 -std=c++20 -gencode=arch=compute_90,code=sm_90 -I../../include -I../../apps/gpu \
  -c ../../lab/probes/app_bodies_probe.cu -o app_bodies_probe.o
link=$(sed -e 's#CMakeFiles/weft_gpu_apps_device_tests.dir/apps/gpu_apps_device_test.cu.o#app_bodies_probe.o#' \
  -e 's#-o weft_gpu_apps_device_tests#-o app_bodies_probe#' -e 's#[^ ]*libgtest_main.a##' \
  CMakeFiles/weft_gpu_apps_device_tests.dir/link.txt)
eval "$link"
timeout 240 ./app_bodies_probe
