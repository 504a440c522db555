/* spec/mailbox.pml - the GPU pool's lone-task mailbox (src/gpu/:
 * mailbox_push, mailbox_ready_for, mailbox_take, mailbox_take_for, mailbox_round, stop_lane,
 * shutdown; the server: mailbox_loop in include/weft/gpu/device.cuh, mailbox_main in
 * src/gpu/host_blocks.cpp) as a Promela model for spin.
 *
 * P pushing threads push N tasks each; a push that finds the mailbox FREE claims it (CAS to
 * FILLING), takes the next use, writes the task's record (meta) and the request tagged with
 * the use, and stores IN_FLIGHT; any other push goes to the rings (modelled as delivered
 * there). The server runs the request of the use after the last it served and writes the
 * result with that use's tag. Two consumers and the mailbox's lane collect: each reads the
 * hints (the use) first, then, seeing IN_FLIGHT and a result with the hinted tag, CASes
 * IN_FLIGHT -> COLLECTING, checks the result against the use it now holds (the hint may be an
 * earlier use's, whose result is still there), delivers and stores FREE, or stores IN_FLIGHT
 * back. The lane may also time the task out (WATCHDOG): CAS, delivered as timed out, LOST
 * until its result comes, then FREE. A closer shuts the pool down after the pushes
 * (CLOSE_EARLY 0) or at any moment (1): close() waits for a push filling the mailbox (it
 * takes the pusher's shard lock), later pushes are refused; the lane delivers what is in
 * flight, closes a FREE mailbox, and shutdown writes an EXIT request of the next use.
 * Tags are whole values here: that a word-at-a-time record is whole when every word carries
 * the tag is lab/spec/tagged_records.pml's. Each statement is atomic, memory sequentially
 * consistent (the real code's acquire CAS / release stores make that sound).
 *
 * Checked (scripts/check-spin.sh): every accepted task is delivered exactly once, with its
 * own result (not a result left by an earlier use), runs at most once, a refused one never;
 * nothing deadlocks and the server ends. Mutants the search must catch: 1, a collector that
 * trusts its hint after the CAS (delivers the previous use's result for the next task); 2, a
 * collector that frees the mailbox before reading the result; 3, no EXIT at shutdown (the
 * server never ends); 4, a server that waits for the use after the last it served (a task
 * timed out before it was read, then EXIT written over it at shutdown: the server never ends).
 */
#ifndef N
#define N 2
#endif
#define P 2
#define T (P * N)
#ifndef WATCHDOG
#define WATCHDOG 0
#endif
#ifndef CLOSE_EARLY
#define CLOSE_EARLY 0
#endif
#ifndef MUTANT
#define MUTANT 0
#endif

#define FREE 0
#define FILLING 1
#define IN_FLIGHT 2
#define COLLECTING 3
#define LOST 4
#define CLOSED 5
#define EXIT_TASK 255

byte mstate = FREE;
byte use = 0;        /* mbox_use_: the current request's tag */
byte meta = 0;       /* mbox_meta_: which task the mailbox holds */
byte req_tag = 0;    /* the request record: its tag and task */
byte req_task = 0;
byte res_tag = 0;    /* the result record: its tag and the task it is the result of */
byte res_task = 0;
bool closed = false;
bool stop = false;
byte pushes_done = 0;
bool lane_done = false;
byte delivered[T];
byte ran[T];
bool refused[T];
bool accepted[T];

/* A collector's attempt; `timeout_ok`: the lane's watchdog may time the task out instead. */
inline collect(h, t, got) {
  h = use;  /* the hint (mailbox_ready_for reads it before looking at the state) */
  if
  :: atomic { mstate == IN_FLIGHT && res_tag == h -> mstate = COLLECTING; got = true }
  :: else -> got = false
  fi;
  if
  :: got ->
#if MUTANT == 1
    if
    :: true ->  /* the hint trusted */
#else
    if
    :: res_tag == use ->
#endif
#if MUTANT == 2
      t = meta;
      mstate = FREE;  /* freed before the result was read */
      assert(res_task == t);
      delivered[t]++
#else
      t = meta;
      assert(res_task == t);  /* its own result */
      delivered[t]++;
      mstate = FREE
#endif
    :: else -> mstate = IN_FLIGHT  /* an earlier use's result: give it back */
    fi
  :: else -> skip
  fi
}

proctype Pusher(byte first) {
  byte k = 0, t;
  do
  :: k < N ->
    t = first + k;
    if
    :: atomic { !closed && mstate == FREE -> mstate = FILLING; accepted[t] = true }
      use++;
      meta = t;
      req_task = t;
      req_tag = use;
      mstate = IN_FLIGHT
    :: atomic { !closed && mstate != FREE -> accepted[t] = true; delivered[t]++ }  /* rings */
    :: atomic { closed -> refused[t] = true }
    fi;
    k++
  :: else -> break
  od;
  pushes_done++
}

/* The server takes any request whose tag is not the last it served (one read of the record),
 * runs it and answers with its tag. Not "the next use" (the last + 1): a task timed out before
 * the server read it may be overwritten by shutdown's EXIT of the use after it, and a server
 * waiting for the lost use would never read the EXIT (mutant 4). */
proctype Server() {
  byte served = 0, tag, task;
end_wait:
  do
#if MUTANT == 4
  :: atomic { req_tag == served + 1 -> tag = req_tag; task = req_task };
#else
  :: atomic { req_tag != served -> tag = req_tag; task = req_task };
#endif
    if
    :: task == EXIT_TASK -> break
    :: else ->
      ran[task]++;
      res_task = task;
      res_tag = tag;
      served = tag
    fi
  od
}

proctype Consumer() {
  byte h, t;
  bool got;
end_loop:
  do
  :: collect(h, t, got)
  :: lane_done -> break
  od
}

proctype Lane() {
  byte h, t;
  bool got;
  do
  :: collect(h, t, got)
#if WATCHDOG
  :: atomic { mstate == IN_FLIGHT -> mstate = COLLECTING };
    if
    :: res_tag == use ->  /* ended after all */
      t = meta;
      assert(res_task == t);
      delivered[t]++;
      mstate = FREE
    :: else ->  /* timed out: delivered now, the mailbox LOST until the task ends */
      delivered[meta]++;
      mstate = LOST
    fi
#endif
  :: atomic { mstate == LOST && res_tag == use -> mstate = FREE }
  :: stop -> break
  od;
  /* stop_lane: deliver the mailbox's task (consumers may take it meanwhile) */
  do
  :: mstate == IN_FLIGHT || mstate == COLLECTING -> collect(h, t, got)
  :: atomic { mstate == LOST && res_tag == use -> mstate = FREE }
  :: atomic { mstate == FREE -> mstate = CLOSED; break }
  :: atomic { mstate == LOST -> break }  /* abandoned: shutdown does not wait for it */
  od;
  lane_done = true;
#if MUTANT != 3
  /* shutdown(): the EXIT request of the next use */
  atomic { req_task = EXIT_TASK; req_tag = use + 1 }
#endif
}

proctype Closer() {
#if CLOSE_EARLY == 0
  pushes_done == P;
#endif
  atomic { mstate != FILLING -> closed = true };  /* close(): waits for a filling pusher */
  stop = true
}

init {
  byte t = 0;
  atomic {
    run Pusher(0);
    run Pusher(N);
    run Server();
    run Consumer();
    run Consumer();
    run Lane();
    run Closer()
  }
  (_nr_pr == 1);  /* every process ended */
  do
  :: t < T ->
    assert(ran[t] <= 1);
    assert(refused[t] != accepted[t]);
    if
    :: accepted[t] -> assert(delivered[t] == 1)
    :: else -> assert(delivered[t] == 0)
    fi;
    t++
  :: else -> break
  od
}
