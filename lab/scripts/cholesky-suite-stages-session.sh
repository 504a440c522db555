#!/usr/bin/env bash
# One device call (one H200): the gpu-apps suite's Cholesky rows (`weft bench gpu-apps --only
# cholesky`) for each STAGE in turn, on the same machine, each STAGE the tree with its patches
# applied (none: the tree as it is). A stage named twice runs twice (a bracket against drift).
# The tree is restored after each stage however the script ends, and the objects built from a
# patched tree are removed.
#   device: WEFT_COMMIT=<hash> bash lab/scripts/cholesky-suite-stages-session.sh STAGE...
#   STAGE: NAME=[PATCH[+PATCH...]], e.g. tree= shared=lab/probes/task_shared_as_shared.patch
#     both=lab/probes/task_shared_as_shared.patch+lab/probes/cholesky_potrf_split.patch tree=
# WEFT_AB_RUN_LIMIT: seconds each suite run may take (default 150: every n but 8192).
set -uo pipefail
source lab/scripts/session-lib.sh
start_session
applied=()
stamp=$(mktemp)
restore() {
  for ((i = ${#applied[@]} - 1; i >= 0; --i)); do
    patch -R -p1 --no-backup-if-mismatch < "${applied[i]}" > /dev/null
  done
  applied=()
  find build-gpu -type f -newer "$stamp" -delete 2> /dev/null
  touch "$stamp"
}
trap 'restore; tar czf "$out/session.tar.gz" -C "$work" .' EXIT
run=0
for stage in "$@"; do
  name=${stage%%=*}
  patches=${stage#*=}
  run=$((run + 1))
  at "$run: $name"
  IFS=+ read -ra list <<< "$patches"
  for p in "${list[@]}"; do
    [ -n "$p" ] || continue
    if ! patch -p1 --no-backup-if-mismatch < "$p" > /dev/null; then
      echo "$p does not apply"
      restore
      continue 2
    fi
    applied+=("$(realpath "$p")")
  done
  if scripts/gpu-build.sh "$work/$run-$name-build" weft_cli > /dev/null 2>&1; then
    timeout "${WEFT_AB_RUN_LIMIT:-150}" build-gpu/tools/weft/weft bench gpu-apps --only cholesky \
      --json "$work/$run-$name.json" > "$work/$run-$name.log" 2>&1
    grep -E "^\[bench\] cholesky" "$work/$run-$name.log"
  else
    echo "build failed"
  fi
  [ ${#applied[@]} -gt 0 ] && restore
done
at done
