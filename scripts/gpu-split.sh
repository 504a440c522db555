#!/usr/bin/env bash
# The adaptive splitter on the GPU machine (docs/split.md), in one call: its tests with the
# applications' GPU parts on device 0, compute-sanitizer memcheck, racecheck and synccheck on
# those parts, then `weft bench split` ($OUT/split.json, .md, .svg and .log; pass
# WEFT_COMMIT=<hash>, and WEFT_BENCH_ARGS=--quick for the smoke sizes). With WEFT_SPLIT_AB=1,
# also the memory-bound applications with the seed's overwrite (--window 1) and with equal core
# shares ($OUT/split-window1.json, $OUT/split-equal.json and their tables): the A/B of
# docs/decisions/031-split-smoothing-and-alone.md.
set -uo pipefail
out=${OUT:-split-out}
mkdir -p "$out"
logs=$(mktemp -d)
scripts/gpu-build.sh "$logs" weft_split_tests weft_cli || exit 1
rc=0
timeout 300 build-gpu/tests/weft_split_tests --gtest_brief=1 2>&1 | tail -20 || rc=1
for tool in memcheck racecheck synccheck; do
  # racecheck runs the LU's kernels far slower than the other tools (decision 034): it takes
  # the one LU test that factors once with look-ahead and once without, not all of them.
  lu_tests='SplitHplLu*'
  [ "$tool" = racecheck ] && lu_tests='SplitHplLu.LookAheadGivesTheSameFactors'
  echo "== compute-sanitizer $tool: the applications' GPU parts"
  timeout 300 compute-sanitizer --tool "$tool" --error-exitcode 3 \
    build-gpu/tests/weft_split_tests --gtest_brief=1 --gtest_filter="SplitApps*:$lu_tests" 2>&1 |
    tail -6 || rc=1
done
OUT=$out scripts/gpu-suite.sh split split-out || rc=1
if [ -n "${WEFT_SPLIT_AB:-}" ]; then
  machine=${WEFT_MACHINE:-$(scripts/machine-name.sh)}
  for variant in "window1 --window 1" "equal --equal-core-shares"; do
    set -- $variant
    name=$1
    shift
    WEFT_MACHINE=$machine build-gpu/tools/weft/weft bench split --only triad_host \
      --only spmv_host "$@" --json "$out/split-$name.json" 2>&1 | grep -E '^\[split\]' || rc=1
    rm -f "$out/split-$name.svg"  # the device tool brings back eight files at most
  done
fi
exit $rc
