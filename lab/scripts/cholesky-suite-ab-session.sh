#!/usr/bin/env bash
# One device call (one H200): the gpu-apps suite's Cholesky rows (`weft bench gpu-apps --only
# cholesky`) of the tree as it is, then with PATCH taken out (patch -R), then as it is again,
# on the same machine, so that a change's effect on the suite's figures is not confused with
# the spread between machines. The tree is restored however the script ends, and the objects
# built from the reverted tree are removed.
#   device: WEFT_COMMIT=<hash> bash lab/scripts/cholesky-suite-ab-session.sh PATCH
#   (PATCH: the change to take out, e.g. `git diff A B -- apps/` made here; carry it along)
# WEFT_AB_RUN_LIMIT: seconds each suite run may take (default 150: every n but 8192, so that
# three runs and their builds fit one call).
set -uo pipefail
source lab/scripts/session-lib.sh
start_session
patch_file=$(realpath "$1")
t0=$(date +%s)
at() { echo "== $1 (at $(($(date +%s) - t0)) s)"; }
suite() {  # $1: the run's name
  scripts/gpu-build.sh "$work/$1-build" weft_cli > /dev/null 2>&1 || { echo "build failed"; return 1; }
  timeout "${WEFT_AB_RUN_LIMIT:-150}" build-gpu/tools/weft/weft bench gpu-apps --only cholesky --json "$work/$1.json" \
    > "$work/$1.log" 2>&1
  grep -E "^\[bench\] cholesky" "$work/$1.log"
}
at "as the tree is"
suite tree-1
stamp=$(mktemp)
patch -R -p1 --no-backup-if-mismatch < "$patch_file" > /dev/null || { echo "does not revert"; exit 1; }
restore() {
  patch -p1 --no-backup-if-mismatch < "$patch_file" > /dev/null
  find build-gpu -type f -newer "$stamp" -delete
  tar czf "$out/session.tar.gz" -C "$work" .
}
trap restore EXIT
at "without the patch"
suite without-1
restore
trap 'tar czf "$out/session.tar.gz" -C "$work" .' EXIT
at "as the tree is, again"
suite tree-2
at done
