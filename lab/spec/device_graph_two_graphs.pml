/* lab/spec/device_graph_two_graphs.pml - the next version of spec/device_graph.pml, under way
 * (not checked by scripts/check-spin.sh): with -DG=2 -DQ=4 two graphs run through the same
 * table one after the other, the second loaded once the lane has collected the first, so that
 * the ready queue (Q = N cells) and the completion ring (entry k % N, freed by the lane as it
 * reads it) wrap around. With G = 1 it is spec/device_graph.pml (same configurations).
 * Found so far (2026-11-27, by hand, -DCOLLAPSE): mutant 7 (the lane does not free the entries
 * it read) and mutant 8 (a dequeue frees its cell for the next position, not the next lap) are
 * caught; the clean search with G = 2 and no failing task had reached 51 million states at
 * depth 670 (2.6 GB) when it was stopped after 15 minutes on a loaded 2-core machine, so it is
 * not yet known to be exhaustive. To run:
 *   cd "$(mktemp -d)" && cp /path/to/weft/lab/spec/device_graph_two_graphs.pml m.pml &&
 *     spin -a -DG=2 -DQ=4 -DFAILS=255 -DMUTANT=0 m.pml &&
 *     cc -O2 -w -DSAFETY -DCOLLAPSE -o pan pan.c && ./pan -m200000
 *
 * What follows is spec/device_graph.pml's description, which still holds.
 *
 * Device-side dependencies for the GPU pool (decision 017, "The build,
 * as planned"), as a Promela model for spin: the protocol the blocks are to run, checked before
 * it is built.
 *
 * One graph of N tasks in a GPU's graph table: per task a count of inputs not yet final and a
 * "poisoned" flag (an input failed or was cancelled). The host writes the table, then puts the
 * tasks with no inputs into the ready queue (a bounded multi-producer multi-consumer queue with
 * a sequence number per cell, as Vyukov's), after which B blocks do, each in a loop:
 *  - take a task from the ready queue (before its ring, which this model leaves out);
 *  - run it, or, when poisoned, finish it as cancelled without running it;
 *  - for each successor: poison it first when this task did not end ok, then decrement its
 *    count (one atomic read-modify-write); the block that brings it to zero enqueues it;
 *  - write the task's completion into the completion ring (mapped host memory, one entry per
 *    task of the table, so never full): claim an entry, fill it, then mark it full;
 *  - with nothing to take: register as a sleeper, look at the queue again, and only then wait
 *    for the epoch to move; whoever enqueues bumps the epoch when a sleeper is registered.
 * A scheduler lane collects the completion ring in order and delivers every task to its
 * output queue; once all N are delivered it tells the blocks to leave (and bumps the epoch).
 * Each Promela statement is atomic and memory is sequentially consistent: the real code's
 * release/acquire pairs (and the sleeper/epoch pair's full fences) are what make that view
 * sound; weak-memory effects are for compute-sanitizer and ThreadSanitizer.
 *
 * The graph: a diamond 0 -> {1, 2} -> 3 (1 and 2 enqueued and taken at once), and with
 * SECOND_ROOT task 4 with no edges (two roots in the queue at once). The run of task FAILS,
 * if any, may end failed or ok (a root failing cancels the rest of the diamond; task 1
 * failing races the poison of task 3 with task 2's decrement).
 *
 * With RINGS, the roots take the path the build plans for them (decision 017, "Where the rest
 * goes"): the host loads each into an idle block's ring slot, as it loads any task, and wakes
 * the sleepers; the block looks at the ready queue first, then at its slot, runs the successor
 * step for either, and reports a slot task through its slot (DONE, collected by the lane, who
 * frees the slot) and a queue task through the completion ring. A sleeper looks at both after
 * it registers. The lane delivers from both.
 *
 * With G = 2 the same table serves two graphs in turn, as the build plans (one graph at a
 * time; the next loaded once every completion of the last was collected): the host loads the
 * second once the lane has collected the first, the ready queue (Q = N cells) and the
 * completion ring (N entries, freed by the lane as it reads them) wrap around.
 *
 * Checked (scripts/check-spin.sh): every task is delivered exactly once, run at most once, run
 * only when every input ended ok and cancelled only when one did not, each delivery carries
 * the outcome the block wrote (assertions); no block sleeps forever and every process ends
 * (invalid end states). Mutants that must be caught: 1, the sleeper looks at the queue before
 * registering (a lost wake-up); 2, the poison is set after the decrement (a successor runs
 * on a failed input); 3, the count is decremented and read back in two steps (two blocks both
 * see zero and enqueue it twice); 4, a dequeue takes a cell without checking its sequence
 * number (a task read before it was written). With RINGS also: 5, the sleeper looks at the
 * queue but not at its slot after registering (a root loaded meanwhile is never run); 6, a
 * slot task is also reported through the completion ring (delivered twice). With G = 2 also:
 * 7, the lane does not free the completion entries it read (the second graph's lane reads a
 * stale one); 8, a dequeue frees its cell for the next position instead of the next lap (the
 * queue is found full when it wraps).
 */
#ifndef B
#define B 2
#endif
#ifndef FAILS
#define FAILS 255 /* the task whose run may end failed (255: none) */
#endif
#ifndef MUTANT
#define MUTANT 0
#endif

#ifndef SECOND_ROOT
#define SECOND_ROOT 0
#endif
#ifndef RINGS
#define RINGS 0
#endif
#ifndef G
#define G 1 /* graphs run through the table one after the other */
#endif
#if SECOND_ROOT
#define N 5 /* the diamond and task 4, a root with no edges */
#else
#define N 4
#endif
#ifndef Q
#define Q 8 /* ready-queue cells: at least N, so an enqueue never finds it full */
#endif
#define NONE 255

#define OK 1
#define FAILED 2
#define CANCELLED 3

/* The table. */
byte inputs[N];      /* inputs not yet final */
byte inputs0[N];     /* as the host writes them for every graph */
bit poisoned[N];
byte succ_count[N];
byte succ[N * 2];    /* successors of t: succ[t * 2 + k], k < succ_count[t] */

/* What happened, for the assertions. */
/* What happened, per graph: task t of graph g at [g * N + t]. */
byte graph = 0;      /* the graph in the table */
byte collected = 0;  /* graphs the lane has collected whole */
#define R(t) (graph * N + (t))
byte ran[G * N];
byte outcome[G * N]; /* as the finishing block decided it */
byte delivered[G * N];
byte delivered_as[G * N];

/* The ready queue. */
byte cell[Q];
byte seq[Q];
byte enq_pos = 0;
byte deq_pos = 0;

/* The completion ring: entry k % N for the k-th completion; the lane frees what it reads. */
byte ring_task[N];
byte ring_status[N];
bit ring_full[N];
byte ring_claimed = 0;

#if RINGS
/* Each block's ring, one slot deep: the host loads it, the block runs it, the lane frees it. */
#define IDLE 0
#define LOADED 1
#define DONE 2
byte slot_state[B];
byte slot_task[B];
byte slot_status[B];
#define MY_SLOT_LOADED (slot_state[me] == LOADED)
#else
#define MY_SLOT_LOADED 0
#endif

/* Idle and wake-up. */
byte sleepers = 0;
byte epoch = 0;
bit leave = 0;

inline edge(from, to) {
  succ[from * 2 + succ_count[from]] = to;
  succ_count[from]++;
  inputs[to]++
}

inline enqueue(v) {
  do
  :: pos = enq_pos;
     s = seq[pos % Q];
     if
     :: s == pos ->
        atomic { /* CAS enq_pos: pos -> pos + 1 */
          if
          :: enq_pos == pos -> enq_pos = pos + 1; won = 1
          :: else -> won = 0
          fi
        }
        if
        :: won -> cell[pos % Q] = v; seq[pos % Q] = pos + 1; break
        :: else -> skip
        fi
     :: s < pos -> assert(false) /* full: the queue holds at least every task of the table */
     :: s > pos -> skip          /* another enqueuer took pos: read enq_pos again */
     fi
  od;
  skip; /* the loop leaves to here, not into the d_step */
  d_step { pos = 0; s = 0; won = 0 }; /* scratch: reset, so that it does not split states */
  if /* wake the sleepers, if any */
  :: sleepers > 0 -> epoch++
  :: else -> skip
  fi
}

inline try_dequeue(v) {
  v = NONE;
  do
  :: pos = deq_pos;
     s = seq[pos % Q];
     if
#if MUTANT == 4 /* bug: takes the cell whatever its sequence number says */
     :: pos < enq_pos ->
#else
     :: s == pos + 1 ->
#endif
        atomic { /* CAS deq_pos: pos -> pos + 1 */
          if
          :: deq_pos == pos -> deq_pos = pos + 1; won = 1
          :: else -> won = 0
          fi
        }
        if
#if MUTANT == 8 /* bug: frees the cell for the next position, not the next lap */
        :: won -> v = cell[pos % Q]; seq[pos % Q] = pos + 1; break
#else
        :: won -> v = cell[pos % Q]; seq[pos % Q] = pos + Q; break
#endif
        :: else -> skip
        fi
#if MUTANT == 4
     :: pos >= enq_pos -> break
#else
     :: s < pos + 1 -> break /* empty */
     :: s > pos + 1 -> skip  /* another block took pos: read deq_pos again */
#endif
     fi
  od;
  skip;
  d_step { pos = 0; s = 0; won = 0 }
}

/* Whether the queue has a task at its head (a look, not a take). */
#define QUEUE_HAS_WORK (seq[deq_pos % Q] == deq_pos + 1)

proctype block(byte me) {
  byte t, k, v, pos, s, status, e, entry;
  bit won, last, from_slot;
  do
  :: try_dequeue(t);
#if RINGS
     if /* the queue first: the critical path does not wait behind host-loaded work */
     :: t == NONE && MY_SLOT_LOADED -> t = slot_task[me]; from_slot = 1
     :: else -> skip
     fi;
#endif
     if
     :: t != NONE ->
        if
        :: poisoned[t] -> status = CANCELLED
        :: else ->
           ran[R(t)]++;
           status = OK;
           if
           :: t == FAILS -> status = FAILED
           :: true -> skip
           fi
        fi;
        outcome[R(t)] = status;
        k = 0;
        do
        :: k < succ_count[t] ->
           v = succ[t * 2 + k];
#if MUTANT == 2 /* bug: the poison after the decrement */
           atomic { inputs[v]--; last = (inputs[v] == 0) }
           if :: status != OK -> poisoned[v] = 1 :: else -> skip fi;
#elif MUTANT == 3 /* bug: decrement, then read the count back */
           if :: status != OK -> poisoned[v] = 1 :: else -> skip fi;
           inputs[v]--;
           last = (inputs[v] == 0);
#else
           if :: status != OK -> poisoned[v] = 1 :: else -> skip fi;
           atomic { inputs[v]--; last = (inputs[v] == 0) }
#endif
           if
           :: last -> enqueue(v)
           :: else -> skip
           fi;
           k++
        :: else -> break
        od;
        if
#if RINGS
        :: from_slot ->
           slot_status[me] = status;
           slot_state[me] = DONE
#if MUTANT == 6 /* bug: a slot task reported through the completion ring as well */
           ;
           atomic { entry = ring_claimed % N; ring_claimed++ }
           assert(ring_full[entry] == 0);
           ring_task[entry] = t;
           ring_status[entry] = status;
           ring_full[entry] = 1
#endif
#endif
        :: else ->
           atomic { entry = ring_claimed % N; ring_claimed++ }
           assert(ring_full[entry] == 0);
           ring_task[entry] = t;
           ring_status[entry] = status;
           ring_full[entry] = 1
        fi;
        d_step { t = 0; k = 0; v = 0; status = 0; entry = 0; last = 0; from_slot = 0 }
     :: else ->
        if
        :: leave -> break
        :: else ->
           e = epoch;
#if MUTANT == 1 /* bug: looks at the queue, then registers */
           if
           :: QUEUE_HAS_WORK || leave -> skip
           :: else -> sleepers++; (epoch != e); sleepers--
           fi;
#else
           sleepers++;
           if
#if MUTANT == 5 /* bug: the sleeper forgets its slot */
           :: QUEUE_HAS_WORK || leave -> skip
#else
           :: QUEUE_HAS_WORK || MY_SLOT_LOADED || leave -> skip
#endif
           :: else -> (epoch != e)
           fi;
           sleepers--;
#endif
           e = 0
        fi
     fi
  od
}

inline deliver(task, status) {
  assert(delivered[g * N + task] == 0);
  delivered[g * N + task] = 1;
  delivered_as[g * N + task] = status;
  assert(delivered_as[g * N + task] == outcome[g * N + task]);
  count++
}

proctype lane() {
  byte next = 0, t, p, count = 0, g = 0;
  do
  :: g < G ->
     do
     :: count == N -> break
     :: count < N && ring_full[next % N] == 1 ->
        t = ring_task[next % N];
        deliver(t, ring_status[next % N]);
#if MUTANT != 7 /* bug 7: the entry is not freed */
        ring_full[next % N] = 0;
#endif
        next++
#if RINGS
     :: count < N && slot_state[0] == DONE ->
        t = slot_task[0];
        deliver(t, slot_status[0]);
        slot_state[0] = IDLE
     :: count < N && slot_state[1] == DONE ->
        t = slot_task[1];
        deliver(t, slot_status[1]);
        slot_state[1] = IDLE
#endif
     od;
     /* Graph g delivered whole: check what each of its tasks saw. */
     t = 0;
     do
     :: t < N ->
        assert(ran[g * N + t] <= 1);
        assert((delivered_as[g * N + t] == CANCELLED) == (ran[g * N + t] == 0));
        t++
     :: else -> break
     od;
     /* A task ran only when every input ended ok, and was cancelled only when one did not. */
     assert((ran[g * N + 1] == 1) == (outcome[g * N + 0] == OK));
     assert((ran[g * N + 2] == 1) == (outcome[g * N + 0] == OK));
     assert((ran[g * N + 3] == 1) == (outcome[g * N + 1] == OK && outcome[g * N + 2] == OK));
     assert(ran[g * N + 0] == 1);
#if SECOND_ROOT
     assert(ran[g * N + 4] == 1);
#endif
     d_step { t = 0; count = 0; g++; collected = g } /* the host may load the next graph */
  :: else -> break
  od;
  leave = 1;
  epoch++
}

init {
  byte i, h, pos, s;
  bit won;
  bit is_root[N];
  atomic {
    i = 0;
    do
    :: i < Q -> seq[i] = i; i++
    :: else -> break
    od;
    edge(0, 1);
    edge(0, 2);
    edge(1, 3);
    edge(2, 3);
    i = 0;
    do
    :: i < N -> inputs0[i] = inputs[i]; i++
    :: else -> break
    od
  }
  i = 0;
  do
  :: i < B -> run block(i); i++
  :: else -> break
  od;
  run lane();
  h = 0;
  do
  :: h < G ->
     if
     :: h > 0 ->
        /* The next graph, once the lane has collected every completion of the last: no block
         * holds a task of it any more. */
        collected == h;
        d_step {
          i = 0;
          do
          :: i < N -> inputs[i] = inputs0[i]; poisoned[i] = 0; i++
          :: else -> break
          od;
          graph = h;
          i = 0
        }
     :: else -> skip
     fi;
     /* The roots, from the counts the host wrote: once the blocks run, a count that reads zero
      * may be a task a block has already enqueued, which the host would enqueue a second
      * time. */
     d_step {
       i = 0;
       do
       :: i < N -> is_root[i] = (inputs0[i] == 0); i++
       :: else -> break
       od;
       i = 0
     };
     /* The host puts the roots into the queue (with RINGS: into idle blocks' slots), the
      * blocks already polling. */
     do
     :: i < N ->
        if
        :: is_root[i] ->
#if RINGS
           if
           :: slot_state[0] == IDLE -> slot_task[0] = i; slot_state[0] = LOADED
           :: slot_state[1] == IDLE -> slot_task[1] = i; slot_state[1] = LOADED
           fi;
           if /* wake the sleepers, as an enqueue does */
           :: sleepers > 0 -> epoch++
           :: else -> skip
           fi
#else
           enqueue(i)
#endif
        :: else -> skip
        fi;
        i++
     :: else -> break
     od;
     h++
  :: else -> break
  od
}
