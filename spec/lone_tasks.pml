/* spec/lone_tasks.pml - the GPU pool's rule that a shard holding few tasks is left to its home
 * lane while that lane is awake and has an idle block for each (src/gpu/
 *: take_batch's `leave`,
 * Lane::napping, sleep_until_work, push) as a Promela model for spin.
 *
 * Two scheduler lanes; lane 0 is the home lane of the one input shard modelled. A pushing
 * thread pushes N tasks one at a time and waits for each to be taken (a taken task is loaded
 * and will run: the slots are not modelled here, spec/slot_protocol.pml has them), then a
 * closer stops the lanes. What is modelled, with the real code's steps:
 *  - a push takes the shard's lock, queues the task, unlocks, stores the shard's size hint
 *    (after the unlock) and, unless the home lane is awake (not napping) and has an idle
 *    block for the task, wakes ONE waiting lane if the count of sleeping lanes is not 0
 *    (notify_one: either);
 *  - a lane's round: if the hint is > 0, it takes from the shard unless the shard holds
 *    fewer than 64 tasks (here: always, the pusher never has two queued), the lane is not its
 *    home, the home lane does not nap and has idle blocks for them (the rule); the home lane
 *    takes only while it has an idle block (with none it loads nothing while another lane's
 *    blocks idle); taking is a try_lock, one task, the hint set to the true size, unlock;
 *  - whether the home lane has an idle block (its published hint): it may lose it when it
 *    takes a task, and get one back at any time (a task ended; or never: a task may hold its
 *    block forever); tasks of other shards, which could also take its blocks, are not
 *    modelled. With none, tasks queued in its shard and a lane asleep, the home lane
 *    wakes one (wake_for_own_shards);
 *  - a lane may, at any point of its loop, nap (napping set, a pause, napping cleared: the
 *    20 us nap between polls of long tasks) or sleep: napping set, then under the sleep lock
 *    it looks for work (stop, or a task it would not leave to the home lane) and waits if
 *    there is none, until notified;
 *  - the closer sets stop and wakes every sleeping lane.
 * Memory is sequentially consistent (the real code's seq_cst pairings make that sound).
 *
 * Checked (scripts/check-spin.sh): every task is taken exactly once, and no execution lets a
 * task wait forever: a search for non-progress cycles under weak fairness (progress = a task
 * taken, or the pusher done) finds none, and there is no invalid end state. A mutant must be
 * caught: a sleeping lane that does not set napping (the others would leave its lone task to
 * it forever, spinning: a non-progress cycle); and a push that wakes nobody while the home
 * lane is awake, whether or not it has an idle block, with no wake from the home lane either
 * (a task behind a block that never frees waits while the other lane sleeps).
 */
#ifndef N
#define N 2
#endif
#ifndef MUTANT
#define MUTANT 0 /* scripts/check-spin.sh: 1 is a known bug the check must catch */
#endif
#define L 2

byte qn = 0;        /* tasks queued in the shard (under its lock) */
byte sz = 0;        /* the shard's size hint */
bit shard_lock = 0;
bit napping[L];
bit home_idle = 1;  /* lane 0 has an idle block for the queued task (Lane::idle_blocks) */
byte sleeping = 0;  /* lanes in sleep_until_work (sleeping_lanes_) */
bit waiting[L];     /* the lane waits on the condition variable */
bit stop = 0;
byte taken = 0;     /* tasks taken by a lane */
byte pushed = 0;
bit pusher_done = 0;

inline notify_one() {  /* lock the sleep mutex, unlock, wake one waiter if any */
  atomic {
    if
    :: waiting[0] -> waiting[0] = 0
    :: waiting[1] -> waiting[1] = 0
    :: else -> skip
    fi
  }
}

proctype pusher() {
  byte v;
  do
  :: pushed < N ->
     atomic { shard_lock == 0 -> shard_lock = 1 };
     qn++;
     v = qn;
     shard_lock = 0;
     sz = v;  /* after the unlock: may be stale when it lands */
     pushed++;
#if MUTANT == 2  /* bug 2: the push ignores the home lane's idle blocks */
     if :: (napping[0] && sleeping > 0) -> notify_one() :: else -> skip fi;
#else
     if :: ((napping[0] || !home_idle) && sleeping > 0) -> notify_one() :: else -> skip fi;
#endif
     (taken == pushed)  /* wait until it was taken */
  :: else -> break
  od;
progress_done:
  pusher_done = 1
}

proctype lane(byte me) {
  bit got;
  do
  :: stop -> break
  :: !stop ->
     /* take: lane 0 (the home) while it has an idle block; another lane unless the rule
        leaves the task to the home lane */
     if
     :: (sz > 0 && ((me == 0 && home_idle) || (me != 0 && !(sz < 64 && !napping[0] && home_idle)))) ->
        atomic { if :: shard_lock == 0 -> shard_lock = 1; got = 1 :: else -> got = 0 fi };
        if
        :: got ->
           if
           :: qn > 0 ->
              qn--;
progress_taken:
              taken++;
              if :: me == 0 -> home_idle = 0 :: true -> skip fi  /* its last idle block? */
           :: else -> skip
           fi;
           sz = qn;
           shard_lock = 0
        :: else -> skip
        fi
     :: else -> skip
     fi;
     /* lane 0: a task of its may have ended; with no idle block it wakes a sleeper for its
        shard's tasks */
     if
     :: me == 0 -> home_idle = 1
     :: true -> skip
     fi;
#if MUTANT != 2
     if
     :: (me == 0 && !home_idle && sz > 0 && sleeping > 0) -> notify_one()
     :: else -> skip
     fi;
#endif
     /* idle: nap, sleep, or go round again */
     if
     :: true -> skip
     :: true -> napping[me] = 1; napping[me] = 0  /* the 20 us nap */
     :: true ->
#if MUTANT == 1  /* bug 1: a sleeping lane does not say so */
        skip;
#else
        napping[me] = 1;
#endif
        sleeping++;
        /* sleeps unless stopping or a task is there that it does not leave to lane 0 */
        atomic {
          if
          :: (stop || (sz > 0 && !(me != 0 && sz < 64 && !napping[0] && home_idle))) -> skip
          :: else -> waiting[me] = 1
          fi
        };
        (waiting[me] == 0);
        sleeping--;
        napping[me] = 0
     fi
  od
}

proctype closer() {
  (pusher_done);
  stop = 1;
  atomic { waiting[0] = 0; waiting[1] = 0 }
}

init {
  atomic {
    run lane(0);
    run lane(1);
    run pusher();
    run closer()
  }
  (_nr_pr == 1);
  assert(taken == N && qn == 0)
}
