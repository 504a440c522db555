set -u
cd scripts/probes
n="nvcc -O2 -std=c++20 -gencode=arch=compute_90,code=sm_90 -DWEFT_POOL_TRACE"
b=$(mktemp -d)
$n -I../../ab/c6f4ef0/include -I../../include latency_trace.cu ../../ab/c6f4ef0/src/gpu/device_blocks.cu ../../ab/c6f4ef0/src/gpu/host_blocks.cpp -o $b/old &
$n -I../../include latency_trace.cu ../../src/gpu/device_blocks.cu ../../src/gpu/host_blocks.cpp -o $b/new &
$n -DWEFT_RECORD_HEAD_RELAXED -I../../include latency_trace.cu ../../src/gpu/device_blocks.cu ../../src/gpu/host_blocks.cpp -o $b/relaxed &
wait
for r in 1 2; do for v in old new relaxed; do echo "=== $v (round $r)"; timeout 60 $b/$v; done; done
