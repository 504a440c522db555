#!/usr/bin/env bash
# One device call (one H200) for branch mailbox-last-rank (decision 016, "Still open"):
#   1. the new placement test on the tree of its own commit, before the fix (expected to fail
#      when the mailbox's block is not on the last SM: most launches);
#   2. scripts/gpu-check.sh on the working tree (the fix): every GPU test and the sanitizers;
#   3. the one-per-SM and placement tests 100 and 20 times on the fix.
# Here first: lab/scripts/gpu-ab.sh prepare-tree 4fc46d5   (carry "ab" to the device)
#   WEFT_COMMIT=<hash> bash lab/scripts/mailbox-rank-session.sh 4fc46d5
set -uo pipefail
before=$1
out=${OUT:-session-out}
mkdir -p "$out"
logs=$(mktemp -d)
tree=ab/tree-$before
( cd "$tree" && cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DWEFT_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DWEFT_BUILD_TESTS=ON > "$logs/before-configure.log" 2>&1 &&
  cmake --build build-gpu -j 8 --target weft_gpu_device_tests > "$logs/before-build.log" 2>&1 ) &
before_pid=$!
OUT=$out bash scripts/gpu-check.sh
wait $before_pid || tail -20 "$logs/before-build.log"
echo "== before the fix ($before): the placement test, 5 launches"
timeout 60 "$tree/build-gpu/tests/weft_gpu_device_tests" --gtest_filter='*AlignedRun*' 2>&1 |
  grep -E 'span SMs|has rings|OK|FAILED' | head -8
echo "== the fix: one-per-SM x100, placement x20"
t=build-gpu/tests/weft_gpu_device_tests
timeout 60 $t --gtest_filter='GpuPool.ABatchOfOneTaskPerSm*' --gtest_repeat=100 > "$logs/one.log" 2>&1
echo "one-per-SM: $(grep -c '\[       OK \]' "$logs/one.log") of 100 passed"
grep -E -A6 'Failure' "$logs/one.log" | head -12
timeout 120 $t --gtest_filter='*AlignedRun*' --gtest_repeat=20 > "$logs/aligned.log" 2>&1
echo "placement: $(grep -c '\[       OK \]' "$logs/aligned.log") of 20 passed"
grep -E -A6 'Failure' "$logs/aligned.log" | head -12
