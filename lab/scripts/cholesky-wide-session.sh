#!/usr/bin/env bash
# One device call (one H200), under 600 s: CholeskyPool (apps/gpu/cholesky_pool.hpp, decision
# 043) on the GPU: the applications' Cholesky tests, compute-sanitizer memcheck, racecheck and
# synccheck on the wide pool's tests, then `weft bench gpu-apps --only cholesky` (its JSON,
# tables and log into the session's folder, not bench/results: the other applications' rows
# are not in it).
#   device: WEFT_COMMIT=<hash> bash lab/scripts/cholesky-wide-session.sh
set -uo pipefail
source lab/scripts/session-lib.sh
start_session
t0=$(date +%s)
at() { echo "== $1 (at $(($(date +%s) - t0)) s)"; }
scripts/gpu-build.sh "$work" weft_gpu_apps_device_tests weft_cli || exit 1
at built
cholesky_checks
at bench
mkdir -p "$work/bench"
WEFT_MACHINE=$(scripts/machine-name.sh) timeout $((570 - ($(date +%s) - t0))) \
  build-gpu/tools/weft/weft bench gpu-apps --only cholesky --json "$work/bench/gpu-apps.json" \
  > "$work/bench/gpu-apps.log" 2>&1
echo "bench rc $?"
grep -E '^\[bench\]' "$work/bench/gpu-apps.log" | tail -20
at done
