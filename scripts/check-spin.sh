#!/usr/bin/env bash
# Checks spec/slot_protocol.pml exhaustively with spin for 2 blocks with rings of 1 and 2
# slots (safety: assertions and invalid end states, i.e. deadlock and blocks that never reach
# EXIT), spec/block_roles.pml (one block's loader, task threads and publisher against a
# ring of 1 to 3 slots), spec/lone_tasks.pml (lone tasks left to their home
# lane: no task waits forever), spec/mailbox.pml (the lone-task mailbox: pushers, consumers and
# a lane racing for it), spec/mailbox_wake.pml (who wakes whom around the mailbox: sleeping
# consumers and lane), and spec/pause.pml (pause and resume: lanes parking, blocks joined and
# launched again), and spec/device_graph.pml (device-side dependencies, decision 017: a
# graph's tasks made ready by the blocks that finish their inputs, through a ready queue and
# a completion ring; checked before it is built): the designs the pool uses. Also
# spec/stream_mailbox.pml: how the messages of one process's task streams meet and end,
# with streams that end before their peers, spec/stream_processes.pml: how a run ends
# across processes (notices with counts, receives that fail, the drain), and
# spec/world_close.pml: how the Worlds of processes that made different numbers of runs close
# (the extra runs fail, the destructions end). Fails when spin finds an error or did not
# explore the whole state space, and also when spin does NOT find the error in one of the
# models' mutants (known protocol bugs: the check must be able to fail). A model of a design
# not adopted, or retired, is in lab/spec/ (lab/README.md), not checked here.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
command -v spin >/dev/null || { echo "check-spin: SKIPPED: spin is not installed (make deps)"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$root/spec/slot_protocol.pml" "$root/spec/block_roles.pml" \
  "$root/spec/lone_tasks.pml" "$root/spec/mailbox.pml" "$root/spec/mailbox_wake.pml" \
  "$root/spec/pause.pml" "$root/spec/device_graph.pml" "$root/spec/stream_mailbox.pml" \
  "$root/spec/stream_processes.pml" "$root/spec/world_close.pml" "$work/"
cd "$work"
# search MODEL MODE DEFINES...: builds the model's verifier and searches the whole state space;
# MODE safety: assertions and invalid end states (deadlock, a process that never ends); MODE
# np: non-progress cycles under weak fairness. Prints the error count (empty if none printed).
# PAN_FLAGS (environment) adds options to the verifier's build (-DCOLLAPSE: states stored
# compressed, still exhaustive).
search() {
  local model=$1 mode=$2
  shift 2
  spin -a "$@" "$model" > spin.log
  if [[ $mode == np ]]; then
    cc -O2 -w -DNP ${PAN_FLAGS:-} -o pan pan.c  # -w: pan.c is generated; gcc false-positives
    ./pan -m100000 -l -f > pan.log 2>&1 || true
  else
    cc -O2 -w -DSAFETY ${PAN_FLAGS:-} -o pan pan.c
    ./pan -m100000 > pan.log 2>&1 || true
  fi
  sed -n 's/.*errors: \([0-9]*\).*/\1/p' pan.log | head -n1
}
# clean LABEL MODEL MODE DEFINES...: no error, and the whole state space explored.
clean() {
  local label=$1 errors states
  shift
  errors=$(search "$@")
  states=$(sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' pan.log | head -n1)
  if [[ "$errors" != "0" ]] || grep -qE "max search depth too small|out of memory" pan.log; then
    cat pan.log
    echo "check-spin: $label FAILED"
    exit 1
  fi
  echo "check-spin: $label: no errors, $states states, exhaustive"
}
# caught LABEL MODEL MODE DEFINES...: a mutant (a known bug) whose error the search must find.
caught() {
  local label=$1 errors
  shift
  errors=$(search "$@")
  if [[ -z "$errors" || "$errors" == "0" ]]; then
    cat pan.log
    echo "check-spin: $label (a known bug) was NOT caught"
    exit 1
  fi
  echo "check-spin: $label caught ($(grep -m1 -oE \
    'assertion violated.*|invalid end state.*|non-progress cycle.*' pan.log))"
}

# The slot protocol, 2 blocks with rings of K slots, T tasks; mutants at K=2 T=3.
for k in 1 2; do
  for t in 3 5; do
    clean "2 blocks (slot protocol), $k slot(s), $t tasks" slot_protocol.pml safety \
      -DK=$k -DT=$t -DMUTANT=0
  done
done
for mutant in 1 2 3; do
  caught "2 blocks (slot protocol) mutant $mutant" slot_protocol.pml safety -DK=2 -DT=3 \
    -DMUTANT=$mutant
done

# One block's roles against a ring of K slots, T tasks; mutants at K=2 T=3.
for k in 1 2 3; do
  for t in 3 4; do
    clean "one block's roles, $k slot(s), $t tasks" block_roles.pml safety -DK=$k -DT=$t \
      -DMUTANT=0
  done
done
for mutant in 1 2 3; do
  caught "one block's roles mutant $mutant" block_roles.pml safety -DK=2 -DT=3 -DMUTANT=$mutant
done

# spec/lone_tasks.pml: two lanes, a shard whose home is lane 0, one thread pushing N lone tasks
# and waiting for each to be taken. Liveness: no non-progress cycle under weak fairness (a
# task left to a sleeping home lane forever would be one), plus the safety search; mutant 1 (a
# sleeping lane that does not set napping) and mutant 2 (no wake-up for a task behind the home
# lane's busy blocks) must show a non-progress cycle.
for n in 1 2 3; do
  for mode in np safety; do
    clean "lone tasks, $n task(s), $mode" lone_tasks.pml $mode -DN=$n -DMUTANT=0
  done
done
for mutant in 1 2; do
  caught "lone tasks mutant $mutant" lone_tasks.pml np -DN=2 -DMUTANT=$mutant
done

# spec/mailbox.pml: 2 threads pushing N tasks each into the mailbox (or the rings), its server,
# 2 consumers and the lane collecting, with and without the watchdog, shutdown after the pushes
# or at any moment (2 x 2 tasks closing early needs 6 GB: 2 x 1 there). Mutants 1 (the hint
# trusted after the CAS), 2 (FREE before the result is read), 3 (no EXIT at shutdown) and 4 (a
# server waiting for the next use only) must be caught.
for config in "1 0 0" "2 0 0" "1 1 0" "1 1 1" "1 0 1"; do
  read -r n watchdog early <<< "$config"
  clean "mailbox, 2 x $n tasks, watchdog $watchdog, close early $early" mailbox.pml safety \
    -DN=$n -DWATCHDOG=$watchdog -DCLOSE_EARLY=$early -DMUTANT=0
done
for config in "1 2 0" "2 2 0" "3 1 0" "4 1 1"; do
  read -r mutant n watchdog <<< "$config"
  caught "mailbox mutant $mutant" mailbox.pml safety -DN=$n -DWATCHDOG=$watchdog -DMUTANT=$mutant
done

# spec/mailbox_wake.pml: threads pushing lone tasks into the mailbox (or the rings), its server,
# consumers that sleep and the mailbox's lane that sleeps; P pushers x N tasks, C consumers (2 x 2
# tasks with 2 consumers needs over 17 GB). Mutants 1 (the push does not wake the lane for a
# registered consumer: the hang CI found at c553ada), 2 (the consumer wakes the lane before it
# registers), 3 (the lane's sleep does not count the mailbox as work) and 4 (a consumer takes the
# mailbox's task before the queue's record) must be caught.
for config in "1 2 2" "2 1 2" "3 1 1"; do
  read -r n p c <<< "$config"
  clean "mailbox wake-ups, $p x $n tasks, $c consumer(s)" mailbox_wake.pml safety -DN=$n -DP=$p \
    -DC=$c -DMUTANT=0
done
for mutant in 1 2 3 4; do
  caught "mailbox wake-ups mutant $mutant" mailbox_wake.pml safety -DN=2 -DP=1 -DC=2 \
    -DMUTANT=$mutant
done
# The same with a future's or callback's task (CB=1: the first task), which only the lane
# delivers, and consumers whose stale hints win the CAS on a task not their own. Mutant 5 (the
# lane's sleep does not count COLLECTING as work: the lost wake-up a review found) must be
# caught.
for config in "1 2 1" "2 1 1"; do
  read -r n p c <<< "$config"
  clean "mailbox wake-ups with a callback task, $p x $n tasks, $c consumer(s)" mailbox_wake.pml \
    safety -DN=$n -DP=$p -DC=$c -DCB=1 -DMUTANT=0
done
caught "mailbox wake-ups mutant 5" mailbox_wake.pml safety -DN=1 -DP=2 -DC=1 -DCB=1 -DMUTANT=5

# spec/pause.pml: 2 lanes with a block each, a pusher of T tasks, R pauses and resumes (2 x 2 x 2
# takes ~10 s and 0.7 GB). Mutants 1 (resume does not wait for the lanes to leave their park:
# the hang the device example found) and 2 (a lane parks with a task in flight) must be caught.
for config in "1 2" "2 2"; do
  read -r t r <<< "$config"
  clean "pause and resume, 2 lanes, $t task(s), $r round(s)" pause.pml safety -DL=2 -DT=$t \
    -DR=$r -DMUTANT=0
done
caught "pause and resume mutant 1" pause.pml safety -DL=2 -DT=1 -DR=2 -DMUTANT=1
caught "pause and resume mutant 2" pause.pml safety -DL=2 -DT=1 -DR=1 -DMUTANT=2

# spec/device_graph.pml: 2 blocks, the diamond 0 -> {1, 2} -> 3, a lane collecting; no task
# failing, the root failing, or an input of the join failing (~75 s and 1 GB in all, states
# compressed). With -DSECOND_ROOT=1 (one more root) the search takes ~5 min and 6 GB: run by
# hand. Mutants 1 (the sleeper looks at the queue before it registers: a lost wake-up), 2 (the
# poison after the decrement), 3 (the count decremented and read in two steps), 4 (a take
# that claims a queue position without an available task) and 12 (a block keeps a successor it
# completed and enqueues it as well) must be caught; 11 (a take that reads
# its cell without waiting for the put) is caught only with -DSECOND_ROOT=1 (by hand).
for fails in 255 0 1; do
  PAN_FLAGS=-DCOLLAPSE clean "device graph, failing task $fails (255: none)" device_graph.pml \
    safety -DFAILS=$fails -DMUTANT=0
done
for config in "1 255" "2 1" "3 255" "4 255" "12 255"; do
  read -r mutant fails <<< "$config"
  PAN_FLAGS=-DCOLLAPSE caught "device graph mutant $mutant" device_graph.pml safety \
    -DFAILS=$fails -DMUTANT=$mutant
done
# With -DKEEP=2 a block may also keep none, or put the kept successor into the queue later, as
# the build's loader does when a ring run or EXIT comes first (66 million states, ~75 s).
PAN_FLAGS=-DCOLLAPSE clean "device graph, keep or requeue" device_graph.pml safety -DKEEP=2 \
  -DFAILS=255 -DMUTANT=0
# The same with the root loaded into a block's ring slot (-DRINGS=1), no task failing (~1 min;
# with -DFAILS=1, 56 million states and ~3-4 min: run by hand). Mutants 5 (the sleeper forgets
# its slot after it registers), 6 (a slot task also reported through the completion ring) and
# 9 (no doorbell for a sleeper when the host loads a slot) must be caught.
PAN_FLAGS=-DCOLLAPSE clean "device graph, root through a ring" device_graph.pml safety \
  -DRINGS=1 -DFAILS=255 -DMUTANT=0
for mutant in 5 6 9; do
  PAN_FLAGS=-DCOLLAPSE caught "device graph (rings) mutant $mutant" device_graph.pml safety \
    -DRINGS=1 -DFAILS=255 -DMUTANT=$mutant
done
# Two graphs through the same table (-DG=2 -DQ=4: the queue and the completion ring wrap
# around): clean with no task failing (82 million states, ~2 min); mutants 7 (the lane does not
# free the completion entries it read) and 8 (a take frees its cell for the next position, not
# the next lap) must be caught.
PAN_FLAGS=-DCOLLAPSE clean "device graph, two graphs through one table" device_graph.pml safety \
  -DG=2 -DQ=4 -DFAILS=255 -DMUTANT=0
# With KEEP (on), mutant 8 needs the queue path alone: kept tasks leave the queue too few laps
# to wrap within the two graphs.
for mutant in 7 8; do
  PAN_FLAGS=-DCOLLAPSE caught "device graph (two graphs) mutant $mutant" device_graph.pml safety \
    -DG=2 -DQ=4 -DFAILS=255 -DMUTANT=$mutant -DKEEP=$((mutant == 8 ? 0 : 1))
done
# Shutdown cancelling the table at any moment (-DCANCEL=1): the clean searches take 67 million
# states and ~2.5 min without rings, 159 million and ~8.5 min with them (run by hand); mutant
# 10 (a task cancelled for shutdown skips its successors: the graph never drains) must be
# caught either way.
for rings in 0 1; do
  PAN_FLAGS=-DCOLLAPSE caught "device graph (cancel, rings $rings) mutant 10" device_graph.pml \
    safety -DRINGS=$rings -DCANCEL=1 -DFAILS=255 -DMUTANT=10
done
# Task streams' in-process messages: a ping-pong, a receive from a stream that ends without
# sending, a send to a stream that ends without receiving, and both at once; mutants 1 (the
# ended flag set after the waiting receives are failed), 2 (a waiter that reads its wake counter
# after its check) and 3 (the sends left waiting in an ended stream's mailbox) must be caught.
for scenario in 1 2 3 4; do
  clean "stream mailboxes, scenario $scenario" stream_mailbox.pml safety -DSCENARIO=$scenario
done
caught "stream mailboxes mutant 1" stream_mailbox.pml safety -DSCENARIO=2 -DMUTANT=1
caught "stream mailboxes mutant 2" stream_mailbox.pml safety -DSCENARIO=1 -DMUTANT=2
caught "stream mailboxes mutant 3" stream_mailbox.pml safety -DSCENARIO=3 -DMUTANT=3
# Task streams across processes: the notice of an ended stream, the receive that fails only when
# nothing is coming, the drain at the end of a run; mutants 1 (a receive fails on the notice
# alone) and 2 (the drain stops on the notice alone) must be caught.
for scenario in 1 2 3 4; do
  clean "stream processes, scenario $scenario" stream_processes.pml safety -DSCENARIO=$scenario
done
caught "stream processes mutant 1" stream_processes.pml safety -DSCENARIO=1 -DMUTANT=1
caught "stream processes mutant 2" stream_processes.pml safety -DSCENARIO=3 -DMUTANT=2
# Closing the Worlds of two processes that made different numbers of runs (kClose with the runs
# made, peers gone for the runs they did not make, the end barrier of kEnd messages): 1 run
# each, 0 against 1 with a send or a receive in the extra run, 1 against 2, 2 each, 1 against 3,
# 2 against 3. Mutants 1 (destruction does not wait for the peer's kClose), 2 (no peer marked
# gone: in the receive, then in end_run's drain), 3 (a kClose of r runs or more marks the peer
# gone in run r), 4 (the end barrier takes the next run's notice), 5 (end_run leaves its sends
# in flight), 6 (destruction does not drain data) and 7 (begin_run forgets a close that came
# in an earlier run) must be caught.
for scenario in 1 2 3 4 5 6 7; do
  clean "world close, scenario $scenario" world_close.pml safety -DSCENARIO=$scenario -DMUTANT=0
done
for config in "1 2" "2 3" "2 2" "3 1" "4 5" "5 2" "6 2" "7 4"; do
  read -r mutant scenario <<< "$config"
  caught "world close mutant $mutant (scenario $scenario)" world_close.pml safety \
    -DSCENARIO=$scenario -DMUTANT=$mutant
done
