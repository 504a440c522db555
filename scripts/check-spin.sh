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
model=slot_protocol.pml
check() {  # K T MUTANT; prints the error count of an exhaustive search of $model
  spin -a -DK=$1 -DT=$2 -DMUTANT=$3 $model > spin.log
  cc -O2 -DSAFETY -o pan pan.c
  ./pan -m100000 > pan.log 2>&1 || true
  sed -n 's/.*errors: \([0-9]*\).*/\1/p' pan.log | head -n1
}
for k in 1 2; do
  for t in 3 5; do
    errors=$(check $k $t 0)
    states=$(sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' pan.log | head -n1)
    if [[ "$errors" != "0" ]] || grep -q "max search depth too small" pan.log; then
      cat pan.log
      echo "check-spin: K=$k T=$t FAILED"
      exit 1
    fi
    echo "check-spin: 2 blocks x $k slot(s), $t tasks: no errors, $states states, exhaustive"
  done
done
for mutant in 1 2 3; do
  errors=$(check 2 3 $mutant)
  if [[ -z "$errors" || "$errors" == "0" ]]; then
    cat pan.log
    echo "check-spin: mutant $mutant (a known bug) was NOT caught"
    exit 1
  fi
  echo "check-spin: mutant $mutant caught ($(grep -m1 -oE 'assertion violated.*|invalid end state.*' pan.log))"
done
model=block_roles.pml
for k in 1 2 3; do
  for t in 3 4; do
    errors=$(check $k $t 0)
    states=$(sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' pan.log | head -n1)
    if [[ "$errors" != "0" ]] || grep -q "max search depth too small" pan.log; then
      cat pan.log
      echo "check-spin: block roles K=$k T=$t FAILED"
      exit 1
    fi
    echo "check-spin: one block's roles, $k slot(s), $t tasks: no errors, $states states, exhaustive"
  done
done
for mutant in 1 2 3; do
  errors=$(check 2 3 $mutant)
  if [[ -z "$errors" || "$errors" == "0" ]]; then
    cat pan.log
    echo "check-spin: block roles mutant $mutant (a known bug) was NOT caught"
    exit 1
  fi
  echo "check-spin: block roles mutant $mutant caught ($(grep -m1 -oE 'assertion violated.*|invalid end state.*' pan.log))"
done
