#!/usr/bin/env bash
# Checks spec/slot_protocol.pml exhaustively with spin for 2 blocks with rings of 1 and 2
# slots (safety: assertions and invalid end states, i.e. deadlock and blocks that never reach
# EXIT), spec/block_roles.pml (one block's loader, task threads and publisher against a
# ring of 1 to 3 slots), spec/direct_load.pml (a lane's standby slot offered to pushing
# threads, with sleeping and shutdown) and spec/lone_tasks.pml (lone tasks left to their home
# lane: no task waits forever). Fails when spin finds an error or did not explore the whole state space, and also
# when spin does NOT find the error in one of the model's mutants (known protocol bugs: the
# check must be able to fail).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
command -v spin >/dev/null || { echo "check-spin: SKIPPED: spin is not installed (make deps)"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$root/spec/slot_protocol.pml" "$root/spec/block_roles.pml" "$root/spec/direct_load.pml" \
  "$root/spec/lone_tasks.pml" "$work/"
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

# spec/direct_load.pml: one lane, its standby block's ring of K slots, 2 threads pushing N
# single tasks each, shutdown after the last result (CLOSE_EARLY=0) or at any moment (1; N=2
# there needs ~6 GB, so N=1). Mutants 1-3 must be caught with CLOSE_EARLY=0, 4 with 1.
direct() {  # K N CLOSE_EARLY MUTANT; prints the error count
  spin -a -DK=$1 -DN=$2 -DCLOSE_EARLY=$3 -DMUTANT=$4 direct_load.pml > spin.log
  cc -O2 -DSAFETY -o pan pan.c
  ./pan -m100000 > pan.log 2>&1 || true
  sed -n 's/.*errors: \([0-9]*\).*/\1/p' pan.log | head -n1
}
for config in "1 1 0" "1 2 0" "2 1 0" "2 2 0" "1 1 1" "2 1 1"; do
  read -r k n early <<< "$config"
  errors=$(direct $k $n $early 0)
  states=$(sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' pan.log | head -n1)
  if [[ "$errors" != "0" ]] || grep -qE "max search depth too small|out of memory" pan.log; then
    cat pan.log
    echo "check-spin: direct loads K=$k N=$n CLOSE_EARLY=$early FAILED"
    exit 1
  fi
  echo "check-spin: direct loads, $k slot(s), 2 x $n tasks, close early $early: no errors, $states states, exhaustive"
done
for config in "1 2 2 0" "2 2 2 0" "3 2 2 0" "4 2 1 1"; do
  read -r mutant k n early <<< "$config"
  errors=$(direct $k $n $early $mutant)
  if [[ -z "$errors" || "$errors" == "0" ]]; then
    cat pan.log
    echo "check-spin: direct loads mutant $mutant (a known bug) was NOT caught"
    exit 1
  fi
  echo "check-spin: direct loads mutant $mutant caught ($(grep -m1 -oE 'assertion violated.*|invalid end state.*' pan.log))"
done

# spec/lone_tasks.pml: two lanes, a shard whose home is lane 0, one thread pushing N lone tasks
# and waiting for each to be taken. Liveness: no non-progress cycle under weak fairness (a
# task left to a sleeping home lane forever would be one), plus the safety search; mutant 1 (a
# sleeping lane that does not set napping) must show a non-progress cycle.
lone() {  # N MUTANT MODE(np|safety); prints the error count
  spin -a -DN=$1 -DMUTANT=$2 lone_tasks.pml > spin.log
  if [[ $3 == np ]]; then
    cc -O2 -DNP -o pan pan.c
    ./pan -m100000 -l -f > pan.log 2>&1 || true
  else
    cc -O2 -DSAFETY -o pan pan.c
    ./pan -m100000 > pan.log 2>&1 || true
  fi
  sed -n 's/.*errors: \([0-9]*\).*/\1/p' pan.log | head -n1
}
for n in 1 2 3; do
  for mode in np safety; do
    errors=$(lone $n 0 $mode)
    states=$(sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' pan.log | head -n1)
    if [[ "$errors" != "0" ]] || grep -qE "max search depth too small|out of memory" pan.log; then
      cat pan.log
      echo "check-spin: lone tasks N=$n ($mode) FAILED"
      exit 1
    fi
    echo "check-spin: lone tasks, $n task(s), $mode: no errors, $states states, exhaustive"
  done
done
errors=$(lone 2 1 np)
if [[ -z "$errors" || "$errors" == "0" ]]; then
  cat pan.log
  echo "check-spin: lone tasks mutant 1 (a known bug) was NOT caught"
  exit 1
fi
echo "check-spin: lone tasks mutant 1 caught ($(grep -m1 -oE 'non-progress cycle.*|invalid end state.*' pan.log | head -n1))"
