#!/usr/bin/env bash
# One device call (one H200), after check-apps-split-session.sh:
#   1. GpuPool.ABatchOfOneTaskPerSmRunsOnePerSm 20 times, its failures printed in full;
#   2. the split's memory-bound applications with and without --take-tail, alternated, two
#      rounds;
#   3. the mixed SpMV + Black-Scholes job with its pool's ring depth 1, 2, 4 and 8 (the tree's
#      spmv_bs_pool_options patched on the GPU machine only; decision 018's candidate "unequal
#      rings"), each `weft bench gpu-apps --only spmv_bs --samples 5`.
# Everything goes into $OUT/session.tar.gz.   bash lab/scripts/spmv-ring-split-session.sh
set -uo pipefail
out=${OUT:-session-out}
mkdir -p "$out"
work=$(mktemp -d)
pack() { tar czf "$out/session.tar.gz" -C "$work" . ; }
trap pack EXIT
scripts/gpu-build.sh "$work/build-logs" weft_cli weft_gpu_device_tests || exit 1
timeout 120 build-gpu/tests/weft_gpu_device_tests --gtest_filter='GpuPool.ABatchOfOneTaskPerSm*' \
  --gtest_repeat=20 > "$work/one-per-sm.log" 2>&1
grep -E -A6 'Failure|FAILED' "$work/one-per-sm.log" | head -40
grep -c '\[       OK \]' "$work/one-per-sm.log"
weft=build-gpu/tools/weft/weft
for r in 1 2; do
  for variant in plain tail; do
    # Since the tail is taken by default, the plain arm says --no-take-tail (at 6e19e37, where
    # these runs were made, no flag was the plain arm and --no-take-tail did not exist).
    args=(--no-take-tail)
    [ "$variant" = tail ] && args=(--take-tail)
    run=split-$variant-$r
    mkdir -p "$work/$run"
    timeout 150 $weft bench split --only triad_host --only spmv_host \
      --db "$work/$run/tables.db" "${args[@]}" --json "$work/$run/split.json" \
      > "$work/$run.log" 2>&1
    echo "== $run"; grep -E '^\| (triad|percore|spmv)' "$work/$run/split.md" | grep -v ' | share | \| regions \|' | head -24
  done
done
cp apps/gpu/spmv_bs.cpp "$work/spmv_bs.cpp.orig"
for depth in 1 2 4 8; do
  cp "$work/spmv_bs.cpp.orig" apps/gpu/spmv_bs.cpp
  # After the line that sets the depth, where the tree has one, so that this depth holds.
  anchor='  o.program = spmv_bs_program();'
  grep -q '  o.ring_depth = 1;' apps/gpu/spmv_bs.cpp && anchor='  o.ring_depth = 1;'
  sed -i "s|^$anchor\$|$anchor\n  o.ring_depth = $depth;|" apps/gpu/spmv_bs.cpp
  grep -q "ring_depth = $depth" apps/gpu/spmv_bs.cpp || { echo "patch failed"; exit 1; }
  scripts/gpu-build.sh "$work/build-logs-$depth" weft_cli || exit 1
  mkdir -p "$work/spmv-depth-$depth"
  timeout 120 $weft bench gpu-apps --only spmv_bs --samples 5 \
    --json "$work/spmv-depth-$depth/gpu-apps.json" > "$work/spmv-depth-$depth.log" 2>&1
  echo "== ring depth $depth"; grep -E '^\[bench\] spmv' "$work/spmv-depth-$depth.log"
done
cp "$work/spmv_bs.cpp.orig" apps/gpu/spmv_bs.cpp
