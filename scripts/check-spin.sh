#!/usr/bin/env bash
# Checks spec/slot_protocol.pml exhaustively with spin for 2 blocks with rings of 1 and 2
# slots (safety: assertions and invalid end states, i.e. deadlock and blocks that never reach
# EXIT), and spec/block_roles.pml (one block's loader, task threads and publisher against a
# ring of 1 to 3 slots). Fails when spin finds an error or did not explore the whole state space, and also
# when spin does NOT find the error in one of the model's mutants (known protocol bugs: the
# check must be able to fail).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
command -v spin >/dev/null || { echo "check-spin: SKIPPED: spin is not installed (make deps)"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$root/spec/slot_protocol.pml" "$root/spec/block_roles.pml" "$work/"
cd "$work"
check() {  # K T MUTANT; prints the error count of an exhaustive search of $model
  spin -a -DK=$1 -DT=$2 -DMUTANT=$3 $model > spin.log
  cc -O2 -DSAFETY -o pan pan.c
  ./pan -m100000 > pan.log 2>&1 || true
  sed -n 's/.*errors: \([0-9]*\).*/\1/p' pan.log | head -n1
}
# verify MODEL LABEL "K..." "T..." : exhaustive search for each K and T (no error, whole state
# space), then mutants 1-3 at K=2 T=3, each of which must be caught.
verify() {
  model=$1
  local label=$2 ks=$3 ts=$4 k t mutant errors states
  for k in $ks; do
    for t in $ts; do
      errors=$(check $k $t 0)
      states=$(sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' pan.log | head -n1)
      if [[ "$errors" != "0" ]] || grep -q "max search depth too small" pan.log; then
        cat pan.log
        echo "check-spin: $label K=$k T=$t FAILED"
        exit 1
      fi
      echo "check-spin: $label, $k slot(s), $t tasks: no errors, $states states, exhaustive"
    done
  done
  for mutant in 1 2 3; do
    errors=$(check 2 3 $mutant)
    if [[ -z "$errors" || "$errors" == "0" ]]; then
      cat pan.log
      echo "check-spin: $label mutant $mutant (a known bug) was NOT caught"
      exit 1
    fi
    echo "check-spin: $label mutant $mutant caught ($(grep -m1 -oE 'assertion violated.*|invalid end state.*' pan.log))"
  done
}
verify slot_protocol.pml "2 blocks (slot protocol)" "1 2" "3 5"
verify block_roles.pml "one block's roles" "1 2 3" "3 4"
