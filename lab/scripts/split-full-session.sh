#!/usr/bin/env bash
# One device call (one H200): `weft bench split` at its full sizes, every application, through
# the harness, without the tests and sanitizers of scripts/gpu-split.sh (which need more than
# one call's time beside it). Output: $OUT/split.{json,md,svg,log} and $OUT/session.tar.gz.
#   device: WEFT_COMMIT=<hash> bash lab/scripts/split-full-session.sh
set -uo pipefail
source lab/scripts/session-lib.sh
start_session
t0=$(date +%s)
scripts/gpu-build.sh "$work/build" weft_cli > "$work/build.txt" 2>&1
echo "build rc=$? at $(($(date +%s) - t0)) s" | tee "$work/times.txt"
WEFT_MACHINE=$(scripts/machine-name.sh) timeout $((560 - ($(date +%s) - t0))) \
  build-gpu/tools/weft/weft bench split --json "$out/split.json" > "$out/split.log" 2>&1
echo "split rc=$? at $(($(date +%s) - t0)) s" | tee -a "$work/times.txt"
