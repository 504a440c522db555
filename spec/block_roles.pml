/* spec/block_roles.pml - inside one resident block (include/weft/gpu/device.cuh, docs/gpu.md
 * "Inside a block"): the loader, the task threads and the publisher, against the scheduler's
 * side of one ring of K slots, as a Promela model for spin. spec/slot_protocol.pml checks the
 * ring protocol between blocks and the scheduler; this one checks the block's own hand-offs:
 *  - the loader takes a run of READY slots from pos on, but only among the slots that are
 *    neither unpublished (their state may still read READY) nor held by the task threads (their
 *    shared-memory payloads are still in use); hands the run over (named barrier FULL: it
 *    arrives, the task threads wait); before the next hand-over takes the held run back (named
 *    barrier FREE: the task threads arrive, it waits); on EXIT it hands over an exit run;
 *  - the task threads run each task of a run (the body reads the loader's shared copy of the
 *    payload), write the results into the slot, signal "ended" (mbarrier done), and arrive on
 *    FREE after the run; on the exit run they signal quit and end;
 *  - the publisher stores FINISHED for each ended task in ring order (mbarrier pub after it)
 *    and ends on quit when no task is pending.
 * A named barrier holds one phase at a time; the model asserts that no side ever arrives twice
 * before the other waited. Ghost variable inuse[j] asserts that the loader never overwrites a
 * payload the task threads may still read. Each statement is atomic and memory sequentially
 * consistent, as in slot_protocol.pml (release/acquire pairs and barriers justify it; racecheck
 * and compute-sanitizer check the real code).
 *
 * Checked (scripts/check-spin.sh, K = 1..3): every task runs once and is delivered once with its
 * own result, nothing deadlocks, every role ends. Mutants the check must catch:
 *  1: the loader ignores unpublished slots (only the held run is excluded): the bug the H100
 *     found at be74504, where a task ran twice;
 *  2: the loader hands over the next run without taking the held one back first;
 *  3: the task threads signal "ended" before they write the results.
 */
#ifndef K
#define K 2
#endif
#ifndef T
#define T 4
#endif
#ifndef MUTANT
#define MUTANT 0
#endif

#define IDLE 0
#define READY 1
#define FINISHED 2
#define EXIT 3

byte state[K];      /* the ring's control line (host memory) */
byte task_in[K];    /* the payload the scheduler wrote */
byte result[K];     /* the results the task threads wrote back */
byte executed[T];
byte delivered[T];

/* shared memory of the block */
byte payload[K];    /* the loader's copy of slot j's payload */
bit inuse[K];       /* ghost: slot j's payload may still be read by the task threads */
/* FULL: the run handed over (one phase at a time) */
bit handed = 0;
byte run_first, run_count;
bit run_exit;
/* FREE: runs the task threads gave back, and how many of them the loader took */
byte freed = 0, free_taken = 0;
/* mbarriers: tasks ended per slot (laps), tasks published in all, quit */
byte ended[K];
byte published = 0;
bit quit = 0;
byte roles_done = 0;

active proctype scheduler() {
  byte loaded = 0, collected = 0, next = 0, j, i;
  byte meta[K];
  do
  :: (next < T && loaded - collected < K) ->  /* load the next task into the next slot */
     j = loaded % K;
     assert(state[j] == IDLE);
     task_in[j] = next;
     meta[j] = next;
     state[j] = READY;
     loaded++;
     next++
  :: (collected != loaded && state[collected % K] == FINISHED) ->  /* collect in ring order */
     j = collected % K;
     assert(result[j] == meta[j]);
     assert(delivered[meta[j]] == 0);
     delivered[meta[j]]++;
     state[j] = IDLE;
     collected++
  :: (next == T && collected == T) -> break
  od;
  i = 0;
  do
  :: i < K -> assert(state[i] == IDLE); state[i] = EXIT; i++
  :: i == K -> break
  od
}

active proctype loader() {
  byte pos = 0, loaded = 0, held = 0, seen = 0, in_use, n, t, j;
  bit is_exit;
  do
  :: true ->
     /* tasks the publisher has published (the loader tests pub in ring order) */
     seen = published;
#if MUTANT == 1
     in_use = held;
#else
     if
     :: (loaded - seen > held) -> in_use = loaded - seen
     :: else -> in_use = held
     fi;
#endif
     if
     :: in_use == K ->
        if
        :: (held != 0 && held >= loaded - seen) ->  /* take the whole ring back */
           (freed > free_taken);
           free_taken++;
           t = 0;
           do
           :: t < K -> inuse[t] = 0; t++
           :: else -> break
           od;
           held = 0
        :: else -> (published != seen)  /* wait for the publisher */
        fi
     :: else ->
        /* poll: wait until the slot at pos is READY or EXIT */
        (state[pos] == READY || state[pos] == EXIT);
        is_exit = (state[pos] == EXIT);
        n = 0;
        if
        :: !is_exit ->
           /* the run of READY slots among the usable ones, read one at a time */
           do
           :: (n < K - in_use && state[(pos + n) % K] == READY) -> n++
           :: else -> break
           od;
           t = 0;
           do
           :: t < n ->
              j = (pos + t) % K;
              assert(inuse[j] == 0);  /* no payload still read by the task threads */
              payload[j] = task_in[j];
              inuse[j] = 1;
              t++
           :: else -> break
           od
        :: else -> skip
        fi;
#if MUTANT != 2
        if
        :: held != 0 ->  /* take the held run back before the next hand-over */
           (freed > free_taken);
           t = 0;
           do
           :: t < held -> inuse[(pos + K - held + t) % K] = 0; t++
           :: else -> break
           od;
           free_taken++;
           held = 0
        :: else -> skip
        fi;
#endif
        assert(handed == 0);  /* FULL holds one phase at a time */
        run_first = pos;
        run_count = n;
        run_exit = is_exit;
        handed = 1;
        if
        :: is_exit -> break
        :: else -> skip
        fi;
        loaded = loaded + n;
#if MUTANT == 2
        held = held + n;
#else
        held = n;
#endif
        pos = (pos + n) % K
     fi
  od;
  roles_done++
}

active proctype task_threads() {
  byte first, count, t, j;
  do
  :: handed == 1 ->
     first = run_first;
     count = run_count;
     if
     :: run_exit -> handed = 0; quit = 1; break
     :: else -> handed = 0
     fi;
     t = 0;
     do
     :: t < count ->
        j = (first + t) % K;
        executed[payload[j]]++;
        assert(executed[payload[j]] == 1);  /* run once */
#if MUTANT == 3
        ended[j]++;
        result[j] = payload[j];
#else
        result[j] = payload[j];
        ended[j]++;
#endif
        t++
     :: else -> break
     od;
     assert(freed == free_taken);  /* FREE holds one phase at a time */
     freed++
  od;
  roles_done++
}

active proctype publisher() {
  byte pos = 0;
  byte laps[K];
  do
  :: ended[pos] > laps[pos] ->
     assert(state[pos] == READY);
     state[pos] = FINISHED;  /* release: the results before the state */
     laps[pos]++;
     published++;
     pos = (pos + 1) % K
  :: (quit == 1 && ended[pos] == laps[pos]) -> break
  od;
  roles_done++
}

/* Every role ends (the loader on EXIT, the task threads on the exit run, the publisher after
 * them), and every task ran and was delivered once: checked when all three have ended. */
active proctype checker() {
  byte t = 0;
  (roles_done == 3);
  do
  :: t < T -> assert(executed[t] == 1 && delivered[t] == 1); t++
  :: else -> break
  od
}
