#!/usr/bin/env bash
# One device call (one H200) for branch gpu-verify-14: main (c0c65b0) with mailbox-last-rank and
# graph-fan-out-root merged (decisions 016 "Still open" and 017, the fan-out paragraph).
#   here:   lab/scripts/gpu-ab.sh prepare-tree 4fc46d5   # the placement test before its fix
#           lab/scripts/gpu-ab.sh prepare c0c65b0        # main's pool, for the same-body probe
#           (carry "ab" to the device)
#   device: WEFT_COMMIT=<hash> bash lab/scripts/verify-13-session.sh
# Steps: scripts/gpu-check.sh on the tree (every GPU test, memcheck, racecheck, synccheck);
# the placement test on 4fc46d5's tree (expected to fail: the mailbox's block on any SM) and
# on this tree, 20 times; the one-per-SM test 100 times; the graph tests twice and synccheck
# on them; the same-body probe of main and of this tree, whose "N SMs" for the graph of 132
# roots shows the fan-out task. Output: $OUT/gpu-check.md and $OUT/verify.txt.
set -uo pipefail
out=${OUT:-verify-out}
mkdir -p "$out"
logs=$(mktemp -d)
before=ab/tree-4fc46d5
[ -d "$before" ] && [ -d ab/c0c65b0 ] || { echo "run the two prepare steps here first" >&2; exit 2; }
( cd "$before" && cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DWEFT_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DWEFT_BUILD_TESTS=ON > "$logs/before-configure.log" 2>&1 &&
  cmake --build build-gpu -j 6 --target weft_gpu_device_tests > "$logs/before-build.log" 2>&1 ) &
before_pid=$!
export SAME_BODY_BIN=$logs/probe
(bash lab/scripts/same-body-bisect.sh 0 c0c65b0 > "$logs/probe-build.log" 2>&1) &
probe_pid=$!
OUT=$out timeout 420 bash scripts/gpu-check.sh
wait $before_pid $probe_pid
t=build-gpu/tests/weft_gpu_device_tests
{
  echo "== before the fix (4fc46d5): the placement test, 5 launches"
  timeout 60 "$before/build-gpu/tests/weft_gpu_device_tests" --gtest_filter='*AlignedRun*' 2>&1 |
    grep -E 'span SMs|has rings|OK \]|FAILED \]' | head -6
  echo "== this tree: placement x20, one-per-SM x100"
  timeout 60 $t --gtest_filter='*AlignedRun*' --gtest_repeat=20 > "$logs/aligned.log" 2>&1
  echo "placement: $(grep -c '\[       OK \]' "$logs/aligned.log") of 20 passed"
  grep -E -A6 'Failure' "$logs/aligned.log" | head -10
  timeout 60 $t --gtest_filter='GpuPool.ABatchOfOneTaskPerSm*' --gtest_repeat=100 > "$logs/one.log" 2>&1
  echo "one-per-SM: $(grep -c '\[       OK \]' "$logs/one.log") of 100 passed"
  grep -E -A6 'Failure' "$logs/one.log" | head -10
  echo "== graph tests twice, then synccheck on them"
  for r in 1 2; do
    timeout 60 $t --gtest_filter='*Graph*:*Shapes*' --gtest_brief=1 2>&1 | tail -2
  done
  timeout 90 compute-sanitizer --tool synccheck --error-exitcode 3 $t \
    '--gtest_filter=*Graph*:*Shapes*:-*FreeBlock*:*EveryBlockBusy*:*Overtakes*' 2>&1 | tail -2
  echo "== same-body probe: main (c0c65b0), then this tree"
  for s in c0c65b0 tree; do
    echo "=== $s"
    timeout 40 "$SAME_BODY_BIN/$s" 20 2>&1 | sed 's/  (GPU 0.*//'
  done
} 2>&1 | tee "$out/verify.txt"
