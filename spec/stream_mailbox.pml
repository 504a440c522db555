/* spec/stream_mailbox.pml - how messages between the task streams of one process meet and end
 * (src/stream/world_core.cpp: post_local_send, post_local_recv, stream_ended; stream_core.cpp:
 * StreamCore::wait and notify) as a Promela model for spin.
 *
 * Two task streams. Each posts sends and receives, then waits for each. A send goes to its
 * destination's mailbox: it meets the receive posted there first (and both end), or waits in
 * the mailbox's list of sends. A receive looks in its own mailbox's sends: it meets one, or
 * fails at once when its source has ended, or waits in the list of receives. Each mailbox is
 * changed under its lock: one atomic step here. When a stream's body ends, it marks its own
 * mailbox ended and fails the sends waiting there (their receiver will never come). Then it
 * sets its `ended` flag, and then fails, mailbox by mailbox, the receives that wait for it (it
 * will send nothing more). Whoever ends an operation bumps its owner's wake counter; a waiter
 * reads its counter, checks its operation, and sleeps only while the counter is unchanged
 * (std::atomic::wait). Sends are rendezvous sends here (the buffered small ones end at once
 * and add nothing).
 *
 * Scenarios (-DSCENARIO=): 1, a ping-pong (stream 0 sends then receives, stream 1 receives
 * then sends); 2, stream 0 waits for a message stream 1 never sends (it must fail, not hang);
 * 3, stream 0 sends to stream 1, which ends without receiving (the send must fail); 4, both at
 * once: stream 0 sends and receives, stream 1 ends, in any order with them.
 *
 * Checked (scripts/check-spin.sh): every operation ends exactly once (set from PENDING once,
 * asserted), matched pairs end DONE, and nothing hangs: an invalid end state is a stream
 * asleep for ever. Mutants the search must catch: 1, stream_ended sets `ended` after it has
 * failed the waiting receives (a receive posted between the two checks the flag too early and
 * waits for ever); 2, the waiter reads its wake counter after checking its operation (the
 * wake-up between the two is lost); 3, stream_ended leaves the sends in its mailbox waiting.
 */
#ifndef SCENARIO
#define SCENARIO 1
#endif
#ifndef MUTANT
#define MUTANT 0
#endif

#define PENDING 0
#define DONE 1
#define FAILED 2
#define OPS 4
#define NONE 255

byte status[OPS];     /* each operation's end */
byte owner[OPS];      /* the stream that posted it */
byte peer[OPS];       /* its destination (a send) or source (a receive) */
bool box_ended[2];    /* the mailbox's own flag (under its lock) */
bool ended[2];        /* the stream's ended_ flag */
byte wake[2];         /* each stream's wake counter */
/* Each mailbox: the sends waiting for their receive, the receives waiting for their send. */
byte sends[4];        /* [box * 2 + i] */
byte recvs[4];

inline finish(op, how) {
  assert(status[op] == PENDING);
  status[op] = how;
  wake[owner[op]] = wake[owner[op]] + 1
}

inline post_send(op, me, dst) {
  atomic {
    owner[op] = me; peer[op] = dst;
    if
    :: box_ended[dst] -> finish(op, FAILED)
    :: !box_ended[dst] && recvs[dst * 2] != NONE && peer[recvs[dst * 2]] == me ->
       finish(recvs[dst * 2], DONE); finish(op, DONE);
       recvs[dst * 2] = recvs[dst * 2 + 1]; recvs[dst * 2 + 1] = NONE
    :: !box_ended[dst] && recvs[dst * 2 + 1] != NONE && peer[recvs[dst * 2 + 1]] == me &&
       !(recvs[dst * 2] != NONE && peer[recvs[dst * 2]] == me) ->
       finish(recvs[dst * 2 + 1], DONE); finish(op, DONE); recvs[dst * 2 + 1] = NONE
    :: else ->
       if
       :: sends[dst * 2] == NONE -> sends[dst * 2] = op
       :: else -> assert(sends[dst * 2 + 1] == NONE); sends[dst * 2 + 1] = op
       fi
    fi
  }
}

inline post_recv(op, me, src) {
  atomic {
    owner[op] = me; peer[op] = src;
    if
    :: sends[me * 2] != NONE && owner[sends[me * 2]] == src ->
       finish(sends[me * 2], DONE); finish(op, DONE);
       sends[me * 2] = sends[me * 2 + 1]; sends[me * 2 + 1] = NONE
    :: sends[me * 2 + 1] != NONE && owner[sends[me * 2 + 1]] == src &&
       !(sends[me * 2] != NONE && owner[sends[me * 2]] == src) ->
       finish(sends[me * 2 + 1], DONE); finish(op, DONE); sends[me * 2 + 1] = NONE
    :: else ->
       if
       :: ended[src] -> finish(op, FAILED)
       :: else ->
          if
          :: recvs[me * 2] == NONE -> recvs[me * 2] = op
          :: else -> assert(recvs[me * 2 + 1] == NONE); recvs[me * 2 + 1] = op
          fi
       fi
    fi
  }
}

inline wait_for(op, me) {
  byte seen;
  do
  :: true ->
#if MUTANT == 2
     if
     :: status[op] != PENDING -> break
     :: else -> skip
     fi;
     seen = wake[me];
     (wake[me] != seen)
#else
     seen = wake[me];
     if
     :: status[op] != PENDING -> break
     :: else -> (wake[me] != seen)   /* sleeps while the counter is unchanged */
     fi
#endif
  od
}

/* Fails the receives of mailbox `box` that wait for stream `me`. */
inline fail_recvs_from(box, me) {
  atomic {
    if
    :: recvs[box * 2] != NONE && peer[recvs[box * 2]] == me ->
       finish(recvs[box * 2], FAILED); recvs[box * 2] = recvs[box * 2 + 1]; recvs[box * 2 + 1] = NONE
    :: else -> skip
    fi;
    if
    :: recvs[box * 2] != NONE && peer[recvs[box * 2]] == me ->
       finish(recvs[box * 2], FAILED); recvs[box * 2] = NONE
    :: else -> skip
    fi;
    if
    :: recvs[box * 2 + 1] != NONE && peer[recvs[box * 2 + 1]] == me ->
       finish(recvs[box * 2 + 1], FAILED); recvs[box * 2 + 1] = NONE
    :: else -> skip
    fi
  }
}

inline stream_ended(me) {
  atomic {
    box_ended[me] = true;
#if MUTANT != 3
    if
    :: sends[me * 2] != NONE -> finish(sends[me * 2], FAILED); sends[me * 2] = NONE
    :: else -> skip
    fi;
    if
    :: sends[me * 2 + 1] != NONE -> finish(sends[me * 2 + 1], FAILED); sends[me * 2 + 1] = NONE
    :: else -> skip
    fi
#endif
  }
#if MUTANT != 1
  ended[me] = true;
#endif
  fail_recvs_from(0, me);
  fail_recvs_from(1, me);
#if MUTANT == 1
  ended[me] = true;
#endif
}

proctype stream0() {
#if SCENARIO == 1
  post_send(0, 0, 1); post_recv(1, 0, 1);
  wait_for(1, 0); wait_for(0, 0);
  assert(status[0] == DONE && status[1] == DONE);
#elif SCENARIO == 2
  post_recv(0, 0, 1); wait_for(0, 0);
  assert(status[0] == FAILED);
#elif SCENARIO == 3
  post_send(0, 0, 1); wait_for(0, 0);
  assert(status[0] == FAILED);
#else
  post_send(0, 0, 1); post_recv(1, 0, 1);
  wait_for(0, 0); wait_for(1, 0);
  assert(status[0] == FAILED && status[1] == FAILED);
#endif
  stream_ended(0)
}

proctype stream1() {
#if SCENARIO == 1
  post_recv(2, 1, 0); wait_for(2, 1);
  post_send(3, 1, 0); wait_for(3, 1);
  assert(status[2] == DONE && status[3] == DONE);
#endif
  stream_ended(1)
}

init {
  byte i;
  for (i : 0 .. 3) { sends[i] = NONE; recvs[i] = NONE }
  atomic { run stream0(); run stream1() }
}
