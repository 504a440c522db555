#!/usr/bin/env bash
# Mutant check for StreamGpu.AMessageOfARegionsDeviceBytesFollowsTheAsyncCopyIn, on the GPU
# machine after scripts/gpu-streams.sh has built build-gpu: drops the wait a device message
# makes for its stream's region copies, rebuilds the GPU stream tests, and expects the test to
# fail; then restores the source. Prints "mutant caught" or "MUTANT SURVIVED".
set -uo pipefail
file=src/stream/stream_core.cpp
cp "$file" /tmp/stream_core.cpp.orig
sed -i 's/if (region_copy_) queue_->wait(std::exchange(region_copy_, nullptr));/region_copy_.reset();/' "$file"
if cmp -s "$file" /tmp/stream_core.cpp.orig; then echo "mutant not applied"; exit 2; fi
cmake --build build-gpu -j "$(nproc)" --target weft_stream_gpu_tests > /tmp/mutant-build.log 2>&1 ||
  { tail -20 /tmp/mutant-build.log; cp /tmp/stream_core.cpp.orig "$file"; exit 2; }
caught=0
for i in 1 2 3; do
  build-gpu/tests/weft_stream_gpu_tests --gtest_brief=1 \
    --gtest_filter='*FollowsTheAsyncCopyIn' > /tmp/mutant-run.log 2>&1 || { caught=1; break; }
done
cp /tmp/stream_core.cpp.orig "$file"
if [ "$caught" = 1 ]; then echo "mutant caught"; else echo "MUTANT SURVIVED"; fi
