/* spec/mailbox_wake.pml - who wakes whom around the GPU pool's lone-task mailbox
 * (src/gpu/: mailbox_push and push's wake-up after it,
 * wake_mailbox_lane, take_waiting, mailbox_round, sleep_until_work; ShardedOutput::wait and
 * deliver) as a Promela model for spin. spec/mailbox.pml has the mailbox's own protocol
 * (hints, CAS, tags, watchdog, shutdown) with consumers and a lane that never sleep; this
 * model has the sleeps and the wake-ups, and a mailbox reduced to its states.
 *
 * P pushing threads push N tasks each: a lone task takes the mailbox when it is FREE (FILLING,
 * the request, IN_FLIGHT), and then, when a consumer of its queue is registered as a waiter,
 * wakes the mailbox's lane if it naps; any task may go to the rings instead (queued for the
 * lane, which is woken if it naps). C consumers pop K tasks each (C*K = P*N): a consumer takes
 * a delivered task from the output queue, or the mailbox's task once its result is back (CAS
 * IN_FLIGHT -> COLLECTING, then FREE); finding neither, it registers as a waiter, wakes the
 * mailbox's lane if the mailbox holds a task and the lane naps (the `registered` hook of
 * ShardedOutput::wait), and sleeps until the queue has a task (the predicate is checked under
 * the wait lock, which a deliverer takes before it notifies: one atomic step here). The
 * lane delivers ring tasks, and the mailbox's task once its result is back (the grace period
 * is any interleaving); it sleeps only when the mailbox is not busy (neither IN_FLIGHT nor
 * COLLECTING: mailbox_busy), setting napping first and then checking its work under the lock
 * (queued tasks, the mailbox IN_FLIGHT). A delivery stores the record, then looks at the
 * waiters and notifies one (the seq_cst pair of deliver and wait). Threads in synchronize()
 * wake the lane as a registered consumer does and are not modelled.
 *
 * Each statement is atomic and memory sequentially consistent: the real code's seq_cst
 * stores and loads on both sides of each pairing (the mailbox's state against the waiters,
 * napping against the state) make that sound.
 *
 * Checked (scripts/check-spin.sh): every task is delivered exactly once with its own result,
 * and nothing hangs: an invalid end state is a consumer asleep for ever. Mutants the search
 * must catch: 1, the push does not wake the lane for a registered consumer (the hang CI found
 * under ThreadSanitizer at c553ada: a consumer asleep before the task reached the mailbox,
 * the lane asleep); 2, the consumer wakes the lane before it registers (c553ada's order: the
 * push may look at the waiters between the two); 3, the lane's sleep does not count a mailbox
 * IN_FLIGHT as work; 4, a consumer that may take the mailbox's task while the queue holds a
 * record (a consumer woken by notify_one for that record takes the mailbox's task instead,
 * and another sleeps on with the record there); 5 (with CB > 0), the lane's sleep counts only
 * IN_FLIGHT as work, not COLLECTING.
 *
 * With CB > 0 the first CB tasks are a future's or callback's: no consumer's queue gets them,
 * the lane delivers them (the push wakes the lane for them), and a consumer whose hints were
 * stale may still win the CAS to COLLECTING on one (or on a task whose result is not back),
 * find it is not its own and put IN_FLIGHT back, waking nobody. Mutant 5 is the lost wake-up
 * that found: the lane, about to sleep, saw COLLECTING, not IN_FLIGHT, and slept with a task
 * only it could deliver.
 */
#ifndef N
#define N 2
#endif
#ifndef P
#define P 2
#endif
#ifndef C
#define C 2
#endif
#if C > 2
#error "notify_one below picks among two consumers at most"
#endif
#define T (P * N)
#define K (T / C)
#ifndef MUTANT
#define MUTANT 0
#endif
#ifndef CB
#define CB 0
#endif
#undef K
#define K ((T - CB) / C)  /* queue tasks per consumer */
#define is_cb(t) ((t) < CB)

#define FREE 0
#define FILLING 1
#define IN_FLIGHT 2
#define COLLECTING 3

byte mstate = FREE;
byte use = 0;       /* the current request's tag */
byte meta = 0;      /* which task the mailbox holds */
byte req_tag = 0;   /* the request: its tag and task */
byte req_task = 0;
byte res_tag = 0;   /* the result: its tag and the task it is the result of */
byte res_task = 0;
bool napping = false;     /* lanes_[0]->napping */
bool lane_asleep = false; /* the lane waits on in_cv_ */
byte waiters = 0;         /* ShardedOutput::waiters_ */
bool casleep[C];          /* a consumer waits on the queue's cv_ */
byte consumers_done = 0;
byte cb_done = 0;         /* callback tasks delivered (by the lane) */
byte delivered[T];
byte ran[T];
chan ringq = [T] of { byte };  /* the input queue and the rings: the lane's */
chan outq = [T] of { byte };   /* the output queue */

/* notify_one on the output queue: any one sleeping consumer (none if none sleeps). */
inline notify_one() {
  atomic {
    if
    :: casleep[0] -> casleep[0] = false
    :: C > 1 && casleep[C - 1] -> casleep[C - 1] = false
    :: else -> skip
    fi
  }
}

/* ShardedOutput::deliver: the record, then a look at the waiters. */
inline deliver(t) {
  outq!t;
  if
  :: waiters > 0 -> notify_one()
  :: else -> skip
  fi
}

/* A lane delivers task t: a callback's to it, any other to the output queue. */
inline deliver_any(t) {
  if
  :: is_cb(t) -> delivered[t]++; cb_done++
  :: else -> deliver(t)
  fi
}

/* wake_mailbox_lane: the mailbox holds a task and the lane naps -> notify it (three loads). */
inline wake_mailbox_lane() {
  if
  :: mstate == IN_FLIGHT || mstate == COLLECTING ->
    if
    :: napping -> lane_asleep = false
    :: else -> skip
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
    :: atomic { mstate == FREE -> mstate = FILLING }  /* a lone task, the mailbox free */
      use++;
      meta = t;
      req_task = t;
      req_tag = use;
      mstate = IN_FLIGHT;
#if MUTANT != 1
      if
      :: is_cb(t) || waiters > 0 ->  /* the lane's to deliver; or a consumer sleeps (or may) */
        wake_mailbox_lane()
      :: else -> skip
      fi
#endif
    :: true ->  /* to the rings: push wakes a napping lane for it */
      ringq!t;
      if
      :: napping -> lane_asleep = false
      :: else -> skip
      fi
    fi;
    k++
  :: else -> break
  od
}

proctype Server() {
  byte served = 0;
end_wait:
  do
  :: atomic { req_tag != served ->
      ran[req_task]++;
      res_task = req_task;
      res_tag = req_tag;
      served = req_tag }
  od
}

proctype Consumer(byte me) {
  byte got = 0, t;
  do
  :: got == K -> break
  :: got < K ->
    /* take(): the queue first (try_take_one), then the mailbox (mailbox_take_for). The
     * order matters: a consumer woken by notify_one for a record that took the mailbox's
     * task instead would leave the record to a consumer that sleeps on. */
    if
    :: atomic { nempty(outq) -> outq?t };
      delivered[t]++;
      got++
#if MUTANT == 4
    :: true ->  /* the mailbox first, or whichever */
#else
    :: empty(outq) ->
#endif
      if
      :: atomic { mstate == IN_FLIGHT && res_tag == use -> mstate = COLLECTING };
        t = meta;
        assert(res_task == t);  /* its own result */
        if
        :: is_cb(t) -> mstate = IN_FLIGHT  /* not a queue's task: put back, wake nobody */
        :: else ->
          delivered[t]++;
          got++;
          mstate = FREE
        fi
#if CB > 0
      :: atomic { mstate == IN_FLIGHT -> mstate = COLLECTING };  /* stale hints: any task */
        if
        :: is_cb(meta) || res_tag != use -> mstate = IN_FLIGHT  /* not its own: put back */
        :: else ->
          t = meta;
          delivered[t]++;
          got++;
          mstate = FREE
        fi
#endif
      :: else ->
#if MUTANT == 2
        wake_mailbox_lane();
        waiters++;
#else
        waiters++;
        wake_mailbox_lane();  /* registered() */
#endif
        /* cv_.wait(lock, pred): pred checked under the wait lock, which deliver's notify
         * takes first */
        do
        :: atomic { nempty(outq) -> break }
        :: atomic { empty(outq) -> casleep[me] = true };
          !casleep[me]
        od;
        waiters--
      fi
    fi
  od;
  consumers_done++
}

proctype Lane() {
  byte t;
end_loop:
  do
  :: atomic { nempty(ringq) -> ringq?t };
    ran[t]++;
    deliver_any(t)
  :: atomic { mstate == IN_FLIGHT && res_tag == use -> mstate = COLLECTING };  /* the grace is over */
    t = meta;
    assert(res_task == t);
    mstate = FREE;
    deliver_any(t)
  :: mstate != IN_FLIGHT && mstate != COLLECTING ->  /* !mailbox_busy: sleep_until_work */
    napping = true;
    atomic {
      if
#if MUTANT == 3
      :: nempty(ringq) -> skip
#elif MUTANT == 5
      :: nempty(ringq) || mstate == IN_FLIGHT -> skip
#else
      :: nempty(ringq) || mstate == IN_FLIGHT || mstate == COLLECTING -> skip
#endif
      :: else -> lane_asleep = true
      fi
    };
end_sleep:
    !lane_asleep;
    napping = false
  od
}

init {
  byte t = 0;
  atomic {
    run Pusher(0);
#if P > 1
    run Pusher(N);
#endif
    run Server();
    run Consumer(0);
#if C > 1
    run Consumer(C - 1);
#endif
    run Lane()
  }
  consumers_done == C && cb_done == CB;
  do
  :: t < T ->
    assert(delivered[t] == 1);
    assert(ran[t] == 1);
    t++
  :: else -> break
  od
}
