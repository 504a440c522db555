#!/usr/bin/env bash
# For the tagged-record pool, which lives on branch tagged-records (not adopted: docs/gpu.md,
# "Tagged records"): check that branch out first; on main both sides are the state-word pool.
# busy_probe --short of c6f4ef0 (ab/, scripts/gpu-ab.sh prepare c6f4ef0) against the tagged-record tree, with its busy back-off capped at 1 us and without the extension pass (probe macros of device.cuh). Run on the GPU machine from the repository root.
set -u
cd scripts/probes
n="nvcc -O2 -std=c++20 -gencode=arch=compute_90,code=sm_90"
b=$(mktemp -d)
$n -I../../ab/c6f4ef0/include -I../../include busy_probe.cu ../../ab/c6f4ef0/src/gpu/device_blocks.cu ../../ab/c6f4ef0/src/gpu/host_blocks.cpp -o $b/old &
$n -I../../include busy_probe.cu ../../src/gpu/device_blocks.cu ../../src/gpu/host_blocks.cpp -o $b/new &
$n -DWEFT_PROBE_BUSY_BACKOFF_NS=1024 -I../../include busy_probe.cu ../../src/gpu/device_blocks.cu ../../src/gpu/host_blocks.cpp -o $b/backoff1024 &
$n -DWEFT_PROBE_NO_EXTENSION -I../../include busy_probe.cu ../../src/gpu/device_blocks.cu ../../src/gpu/host_blocks.cpp -o $b/noext &
wait
for v in old new backoff1024 noext; do echo "=== $v"; timeout 60 $b/$v --short; done
