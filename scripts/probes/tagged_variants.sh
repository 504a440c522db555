#!/usr/bin/env bash
# For the tagged-record pool, which lives on branch tagged-records (not adopted: docs/gpu.md,
# "Tagged records"): check that branch out first; on main both sides are the state-word pool.
# The latency trace of the tagged-record pool (the tree) against c6f4ef0's state-word pool
# (scripts/gpu-ab.sh prepare c6f4ef0 first, and carry "ab"), alternated twice on one machine
# instance; extra nvcc flags for the tree's build (e.g. -DSOMETHING) go in $NEW_FLAGS.
# Run on the GPU machine from the repository root: bash scripts/probes/tagged_variants.sh
set -u
cd "$(dirname "$0")"
n="nvcc -O2 -std=c++20 -gencode=arch=compute_90,code=sm_90 -DWEFT_POOL_TRACE"
b=$(mktemp -d)
$n -I../../ab/c6f4ef0/include -I../../include latency_trace.cu ../../ab/c6f4ef0/src/gpu/device_blocks.cu \
  ../../ab/c6f4ef0/src/gpu/host_blocks.cpp -o "$b/old" &
$n ${NEW_FLAGS:-} -I../../include latency_trace.cu ../../src/gpu/device_blocks.cu ../../src/gpu/host_blocks.cpp \
  -o "$b/new" &
wait
for r in 1 2; do for v in old new; do echo "=== $v (round $r)"; timeout 60 "$b/$v"; done; done
