/* spec/device_graph.pml - device-side dependencies for the GPU pool (decision 017, "The build,
 * as planned"), as a Promela model for spin: the protocol the blocks are to run, checked before
 * it is built.
 *
 * One graph of N tasks in a GPU's graph table: per task a count of inputs not yet final and a
 * "poisoned" flag (an input failed or was cancelled). The host writes the table, then puts the
 * tasks with no inputs into the ready queue (a bounded multi-producer multi-consumer queue with
 * a sequence number per cell, as Vyukov's, whose positions are claimed by fetch_add: an enqueue
 * claims, puts, then counts its tasks available; a take claims an available task, then a
 * position, then waits for its cell's put), after which B blocks do, each in a loop:
 *  - take a task from the ready queue (before its ring, which this model leaves out);
 *  - run it, or, when poisoned, finish it as cancelled without running it;
 *  - for each successor: poison it first when this task did not end ok, then decrement its
 *    count (one atomic read-modify-write); the block that brings it to zero enqueues it, once
 *    it has counted down every successor (one claim of queue positions for all it completed),
 *    except one that it may keep (with KEEP, as the build does: decision 042) and run next,
 *    before it looks at the queue again, or enqueue later, when its loader takes a ring run
 *    or reads EXIT first (a root from a ring slot keeps none); the report of a task that kept
 *    one is written once the kept task is taken or enqueued;
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
 * The build's blocks do not register as sleepers: a GPU block polls the queues' counts in
 * device memory (every microsecond in deep idle) and a host block at every poll (at most
 * 128 us apart), so no enqueuer needs to wake one; the sleeper and epoch here are the stricter
 * protocol, which the polling implies.
 *
 * The build has two ready queues of this kind, the urgent level and the normal one (a task's
 * level is fixed when its graph is loaded; a block takes from the urgent queue first), so the
 * protocol of each is the one modelled here.
 *
 * Checked (scripts/check-spin.sh): every task is delivered exactly once, run at most once, run
 * only when every input ended ok and cancelled only when one did not, each delivery carries
 * the outcome the block wrote (assertions); no block sleeps forever and every process ends
 * (invalid end states). Mutants that must be caught: 1, the sleeper looks at the queue before
 * registering (a lost wake-up); 12, with KEEP, the kept successor is also enqueued (it runs
 * twice); 2, the poison is set after the decrement (a successor runs
 * on a failed input); 3, the count is decremented and read back in two steps (two blocks both
 * see zero and enqueue it twice); 4, a take claims a position without claiming an available
 * task first (it waits forever for a cell no enqueue will fill). With SECOND_ROOT (by hand),
 * also 11: a take reads its cell without waiting for the put (the host's put of the second
 * root may still be in flight when a block's later put made a task available). With RINGS also: 5, the sleeper looks at the
 * queue but not at its slot after registering (a root loaded meanwhile is never run); 6, a
 * slot task is also reported through the completion ring (delivered twice); 9, the host loads
 * a slot without waking the sleepers (a block asleep never sees its root).
 *
 * With G = 2 (and Q = 4, so that the queue wraps) the same table serves two graphs in turn, as
 * the build does (one graph at a time; the next loaded once every task of the last was
 * delivered): the host rewrites the counts and poison flags, the ready queue's positions and
 * its available count carry on from the last graph, and the completion ring (entry k % N,
 * freed by the lane as it reads it) wraps around. Mutants 7 (the lane does not free the
 * completion entries it read: the second graph's lane delivers a stale one) and 8 (a take frees
 * its cell for the next position instead of the next lap: the second graph's put finds the
 * cell taken) must be caught.
 *
 * With CANCEL (one graph), the host's shutdown sets the table's cancel flag at any moment: from then on a
 * task taken from the queue ends cancelled, unrun (a root in a slot still runs, as in the
 * build), and its successors are counted down as for any other end, so the graph drains and
 * every task is still delivered once. Mutant 10 (a task cancelled for shutdown skips its
 * successors) must be caught: the graph never drains.
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
#ifndef CANCEL
#define CANCEL 0
#endif
#ifndef KEEP
/* 1: a block runs one successor it completed itself, without the queue; 2: also as the build
 * may, keeps none, or puts the kept one into the queue later (a ring run or EXIT came first) */
#define KEEP 1
#endif
#ifndef G
#define G 1 /* graphs run through the table one after the other */
#endif
#if G > 1 && CANCEL
#error "the shutdown's cancel flag is modelled with one graph"
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

/* What happened, for the assertions, per graph: task t of graph g at [g * N + t]. */
byte graph = 0;      /* the graph in the table */
byte collected = 0;  /* graphs the lane has delivered whole */
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
/* Cells published and not yet claimed by a take; below 0 while takes that found none back out. */
short avail = 0;

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

/* Shutdown (CANCEL): from when it is set, a task taken from the queue ends cancelled, unrun;
 * a slot task (a root) still runs, as in the build. */
bit cancelled = 0;

/* Idle and wake-up. */
byte sleepers = 0;
byte epoch = 0;
bit leave = 0;

inline edge(from, to) {
  succ[from * 2 + succ_count[from]] = to;
  succ_count[from]++;
  inputs[to]++
}

/* The enqueue claims its position first (an atomic fetch_add of the tail), then fills the
 * cell and publishes its sequence number, as the build does: a block claims one position for
 * each successor it completed, in one step, then puts them one by one. With one graph the cell
 * at a claimed position is always free for that lap (the queue has a cell for every task): the
 * build waits for it to be, the model asserts it. */
inline put(v) {
  assert(seq[pos % Q] == pos);
  cell[pos % Q] = v;
  seq[pos % Q] = pos + 1;
  pos++
}

inline wake() {
  if /* wake the sleepers, if any */
  :: sleepers > 0 -> epoch++
  :: else -> skip
  fi
}

/* The host's enqueue of a root: one claim, one put, then it counts as available. */
inline enqueue(v) {
  atomic { pos = enq_pos; enq_pos++ };
  put(v);
  avail++;
  d_step { pos = 0 };
  wake()
}

/* A take first claims one available task (a fetch_sub of the count; it backs out when there
 * was none), then a position (a fetch_add of the head: never a retry, whatever the number of
 * blocks taking at once), then waits for that cell's put, which is at most in flight: the
 * count only grows once a put is done, so the position was claimed by an enqueue. */
inline try_dequeue(v) {
  v = NONE;
  atomic { got = avail; avail-- };
#if MUTANT == 4 /* bug: claims a position without an available task */
  got = 1;
#endif
  if
  :: got > 0 ->
     atomic { pos = deq_pos; deq_pos++ };
#if MUTANT == 11 /* bug: reads the cell without waiting for its put */
     skip;
#else
     (seq[pos % Q] == pos + 1);
#endif
     v = cell[pos % Q];
#if MUTANT == 8 /* bug: frees the cell for the next position, not the next lap */
     seq[pos % Q] = pos + 1
#else
     seq[pos % Q] = pos + Q
#endif
  :: else -> avail++ /* none: back out */
  fi;
  d_step { pos = 0; got = 0 }
}

/* Whether the queue has a task at its head (a look, not a take). */
#define QUEUE_HAS_WORK (avail > 0)

proctype block(byte me) {
  byte t, k, v, pos, s, status, e, entry, completed, kept = NONE;
  byte report_task = NONE, report_status; /* a report left until the kept task is taken */
  short got;
  bit won, last, from_slot;
  do
  :: if /* the successor this block kept, else the queue */
     :: kept != NONE -> d_step { t = kept; kept = NONE }
#if KEEP >= 2
     :: kept != NONE -> /* the build's loader took a ring run or read EXIT first: the kept task
                        * goes to the queue, and this block looks there as any block does */
        v = kept;
        kept = NONE;
        enqueue(v);
        v = 0;
        try_dequeue(t)
#endif
     :: else -> try_dequeue(t)
     fi;
     if /* the report of the task that kept it: the build's loader publishes it once it has
         * handed the kept task over */
     :: report_task != NONE ->
        atomic { entry = ring_claimed % N; ring_claimed++ }
        assert(ring_full[entry] == 0);
        ring_task[entry] = report_task;
        ring_status[entry] = report_status;
        ring_full[entry] = 1;
        d_step { report_task = NONE; report_status = 0; entry = 0 }
     :: else -> skip
     fi;
#if RINGS
     if /* the queue first: the critical path does not wait behind host-loaded work */
     :: t == NONE && MY_SLOT_LOADED -> t = slot_task[me]; from_slot = 1
     :: else -> skip
     fi;
#endif
     if
     :: t != NONE ->
        if
        :: poisoned[t] || (cancelled && !from_slot) -> status = CANCELLED
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
#if MUTANT == 10 /* bug: a task cancelled for shutdown skips its successors */
        :: status == CANCELLED && cancelled -> break
#endif
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
           :: last -> completed = completed | (1 << k)
           :: else -> skip
           fi;
           k++
        :: else -> break
        od;
#if KEEP
        if /* keep the first successor completed (not after a slot task): the block runs it next */
        :: !from_slot && (completed & 1) -> kept = succ[t * 2]; completed = completed & ~1
        :: !from_slot && ((completed >> 1) & 1) == 1 && (completed & 1) == 0 ->
           kept = succ[t * 2 + 1]; completed = completed & ~2
#if KEEP >= 2
        :: true -> skip /* none kept: a normal one while the urgent queue has work, in the build */
#else
        :: else -> skip
#endif
        fi;
#if MUTANT == 12 /* bug: the kept successor is enqueued as well */
        if
        :: kept != NONE && kept == succ[t * 2] -> completed = completed | 1
        :: kept != NONE && kept == succ[t * 2 + 1] -> completed = completed | 2
        :: else -> skip
        fi;
#endif
#endif
        if /* the successors completed: one claim, then a put each */
        :: completed != 0 ->
           atomic { pos = enq_pos; enq_pos = enq_pos + (completed & 1) + ((completed >> 1) & 1) };
           k = 0;
           do
           :: k < succ_count[t] ->
              if
              :: (completed >> k) & 1 -> put(succ[t * 2 + k])
              :: else -> skip
              fi;
              k++
           :: else -> break
           od;
           avail = avail + (completed & 1) + ((completed >> 1) & 1);
           wake()
        :: else -> skip
        fi;
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
        :: kept != NONE -> /* reported after the kept task is taken (above) */
           report_task = t;
           report_status = status
        :: else ->
           atomic { entry = ring_claimed % N; ring_claimed++ }
           assert(ring_full[entry] == 0);
           ring_task[entry] = t;
           ring_status[entry] = status;
           ring_full[entry] = 1
        fi;
        d_step { t = 0; k = 0; v = 0; status = 0; entry = 0; last = 0; from_slot = 0; completed = 0; pos = 0 }
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
#if MUTANT != 7 /* bug 7: the entry read is not freed */
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
     /* A task ran only when every input ended ok, and was cancelled only when one did not (or,
      * from shutdown on, when it came from the queue). */
     assert(ran[g * N + 1] == 0 || outcome[g * N + 0] == OK);
     assert(ran[g * N + 2] == 0 || outcome[g * N + 0] == OK);
     assert(ran[g * N + 3] == 0 || (outcome[g * N + 1] == OK && outcome[g * N + 2] == OK));
     assert(cancelled || (ran[g * N + 1] == 1) == (outcome[g * N + 0] == OK));
     assert(cancelled || (ran[g * N + 2] == 1) == (outcome[g * N + 0] == OK));
     assert(cancelled ||
            (ran[g * N + 3] == 1) == (outcome[g * N + 1] == OK && outcome[g * N + 2] == OK));
     assert(cancelled || RINGS || ran[g * N + 0] == 1);
#if RINGS
     assert(ran[g * N + 0] == 1); /* a root in a slot always runs */
#endif
#if SECOND_ROOT
     assert(cancelled || ran[g * N + 4] == 1);
#endif
     d_step { t = 0; count = 0; g++; collected = g } /* the host may load the next graph */
  :: else -> break
  od;
  leave = 1;
  epoch++
}

#if CANCEL
/* The host at shutdown: cancels the table at any moment. */
proctype shutdown() {
  cancelled = 1
}
#endif

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
    od;
    i = 0
  }
  do
  :: i < B -> run block(i); i++
  :: else -> break
  od;
  run lane();
#if CANCEL
  run shutdown();
#endif
  h = 0;
  do
  :: h < G ->
     if
     :: h > 0 ->
        /* The next graph, once the lane has delivered every task of the last: no block holds
         * a task of it any more (the table is reused, its queue and ring wrap around). */
        collected == h;
        d_step {
          i = 0;
          do
          :: i < N -> inputs[i] = inputs0[i]; poisoned[i] = 0; i++
          :: else -> break
          od;
          graph = h
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
#if MUTANT != 9 /* bug 9: no doorbell for a sleeper */
           if /* wake the sleepers, as an enqueue does */
           :: sleepers > 0 -> epoch++
           :: else -> skip
           fi
#endif
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
