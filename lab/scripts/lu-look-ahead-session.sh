#!/usr/bin/env bash
# One device call (one H200) for the LU's look-ahead (HplLu::set_look_ahead, docs/split.md):
# the split tests with the LU's GPU parts on device 0, compute-sanitizer memcheck, racecheck
# and synccheck on the LU tests (the look-ahead's stream beside the update's), then
# `weft bench split --only hpl_lu` with --no-lu-look-ahead and --lu-look-ahead, alternated, ROUNDS rounds
# (default 2), each run with tables of its own, 3 samples.
#   device: WEFT_COMMIT=<hash> bash lab/scripts/lu-look-ahead-session.sh [ROUNDS]
# Prints the tests' and sanitizers' tails and each run's comparison rows; $OUT/session.tar.gz
# holds every run's JSON, table, chart and log.
set -uo pipefail
source lab/scripts/session-lib.sh
start_session
rounds=${1:-2}
t0=$(date +%s)
scripts/gpu-build.sh "$work" weft_split_tests weft_cli || exit 1
echo "built at $(($(date +%s) - t0)) s"
timeout 200 build-gpu/tests/weft_split_tests --gtest_brief=1 \
  --gtest_filter='SplitApps*:SplitHplLu*' 2>&1 | tail -8
# racecheck needs about 250 s for all of SplitHplLu*: the test that factors both ways.
sanitize build-gpu/tests/weft_split_tests 'SplitHplLu.LookAheadGivesTheSameFactors' 150
machine=$(scripts/machine-name.sh)
for ((r = 1; r <= rounds; ++r)); do
  for variant in plain ahead; do
    flag=(--no-lu-look-ahead)
    [ "$variant" = ahead ] && flag=(--lu-look-ahead)
    run=lu-$variant-$r
    # A device call ends at 600 s: leave a run out rather than lose the session's archive.
    if (($(date +%s) - t0 > ${SESSION_BUDGET_S:-430})); then echo "== $run skipped: out of time"; continue; fi
    mkdir -p "$work/$run"
    WEFT_MACHINE=$machine timeout 150 build-gpu/tools/weft/weft bench split --only hpl_lu \
      --samples 3 --db "$work/$run/tables.db" --json "$work/$run/split.json" "${flag[@]}" \
      > "$work/$run.log" 2>&1
    echo "== $run (rc $?, at $(($(date +%s) - t0)) s)"
    grep -E '^\| hpl_lu_[0-9]+ \| [a-z_]+ \||^\| (gflops|converge|gsplit_adaptive)' \
      "$work/$run/split.md" 2>/dev/null
  done
done
