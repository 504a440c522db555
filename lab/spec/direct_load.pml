/* spec/direct_load.pml - the GPU pool's direct loads (include/weft/gpu/detail/pool_core.hpp:
 * offer_express, revoke_express, adopt_express, settle_express, push_direct, push,
 * sleep_until_work, stop_lane) as a Promela model for spin.
 *
 * One scheduler lane with its standby block (a ring of K slots), P pushing threads each with
 * its own input shard, each pushing N single tasks and waiting for each one's result before
 * the next (as `Pool.LoneTasksReachASlotWhateverTheirHomeLaneIsDoing` does), and a closer that
 * shuts the pool down: after every result came back (CLOSE_EARLY 0), or at any moment, with
 * pushes in flight (CLOSE_EARLY 1). What is modelled, with the real code's steps:
 *  - a push takes its shard's lock; if the pool is closed it is refused; if its shard is
 *    empty and the lane offers (express OFFERED) it claims the offer (CAS to CLAIMED), writes
 *    the slot the lane named, stores READY and FILLED, unlocks, and wakes the lane if the lane
 *    says it naps; else it queues the task, unlocks, stores the shard's size hint (after the
 *    unlock: a stale value may land) and wakes the lane if it naps;
 *  - the lane's round: adopt a FILLED offer, collect FINISHED slots in ring order, take the
 *    offer back if the hints show queued tasks (CAS OFFERED -> NONE), take one queued task
 *    (try_lock; the hint set to the true size under the lock) and load it into the block when
 *    the ring has room and nothing is offered, offer the next slot when the ring is empty and
 *    every hint is 0; with nothing in flight it may sleep: it sets napping, then under the
 *    sleep lock looks for work (a hint > 0, FILLED, stop) and waits if there is none;
 *  - the block runs the READY slots of its ring in order and stores FINISHED; EXIT ends it;
 *  - the closer closes (every later push is refused), takes every shard lock in turn, sets
 *    stop and wakes the lane; the lane then settles its offer (adopt, or take back; waits
 *    while a pusher fills it), cancels what is queued, collects what is in flight and stores
 *    EXIT in every slot.
 * Memory is sequentially consistent and each statement atomic; the seq_cst pairings of the
 * real code (FILLED / napping, size hint / napping) are what make that sound.
 *
 * Checked (scripts/check-spin.sh): every accepted task runs at most once and is delivered
 * exactly once (run, or cancelled at shutdown), a refused one never; the lane never loads a
 * slot that is not IDLE, nor the standby block while its slot is offered; nothing deadlocks
 * (a lost wake-up leaves a pusher waiting for its result forever: an invalid end state).
 */
#ifndef K
#define K 2
#endif
#ifndef N
#define N 2
#endif
#define P 2
#define T (P * N)
#ifndef CLOSE_EARLY
#define CLOSE_EARLY 0
#endif
#ifndef MUTANT
#define MUTANT 0 /* scripts/check-spin.sh: 1..4 are known bugs the check must catch */
#endif

#define IDLE 0
#define READY 1
#define FINISHED 2
#define EXIT 3

#define NONE 0
#define OFFERED 1
#define CLAIMED 2
#define FILLED 3

byte state[K];     /* the standby block's ring */
byte task_in[K];   /* the payload: which task */
byte express = NONE;
byte xslot;        /* the offered slot (lane, before OFFERED) */
byte xtask;        /* the task filled in (pusher, before FILLED) */

byte qn[P];        /* tasks queued in each shard (under its lock) */
byte qtask[P * N]; /* shard p's queue: qtask[p * N + i], from qhead[p] */
byte qhead[P];
byte sz[P];        /* each shard's size hint */
bit shard_lock[P];

bit closed = 0;
bit stop = 0;
bit napping = 0;
bit waiting = 0;   /* the lane waits on the condition variable */

byte accepted[T];
byte ran[T];
byte delivered[T];
byte ended = 0;

inline lock(p) { atomic { shard_lock[p] == 0 -> shard_lock[p] = 1 } }
inline unlock(p) { shard_lock[p] = 0 }
inline wake() {  /* lock the sleep mutex, unlock, notify */
  atomic { if :: waiting -> waiting = 0 :: else -> skip fi }
}
#define HINTS (sz[0] > 0 || sz[1] > 0)

proctype pusher(byte p) {
  byte i = 0, id, v;
  bit direct;
  do
  :: i < N ->
     id = p * N + i;
     lock(p);
     if
     :: closed -> unlock(p); break  /* refused: ShutDown */
     :: else -> skip
     fi;
     accepted[id] = 1;
     direct = 0;
     if
     :: qn[p] == 0 ->
        atomic { if :: express == OFFERED -> express = CLAIMED; direct = 1 :: else -> skip fi }
     :: else -> skip
     fi;
     if
     :: direct ->
        assert(state[xslot] == IDLE);
        task_in[xslot] = id;
        state[xslot] = READY;
        xtask = id;
        express = FILLED;
        unlock(p);
#if MUTANT != 3  /* bug 3: the lane is not woken after a direct load */
        if :: napping -> wake() :: else -> skip fi
#endif
     :: else ->
        qtask[p * N + (qhead[p] + qn[p]) % N] = id;
        qn[p]++;
        v = qn[p];
        unlock(p);
        sz[p] = v;  /* after the unlock: may be stale when it lands */
        if :: napping -> wake() :: else -> skip fi
     fi;
     (delivered[id] == 1 || stop);  /* wait for the result (or the shutdown) */
     i++
  :: else -> break
  od;
  ended++
}

proctype closer() {
  byte p;
#if CLOSE_EARLY == 0
  (ended == P);
#endif
  closed = 1;
  p = 0;
  do
  :: p < P -> lock(p); unlock(p); p++
  :: else -> break
  od;
  stop = 1;
  wake();
  ended++
}

proctype lane() {
  byte loaded = 0, collected = 0, j, p, id;
  byte meta[K];
  bit got;
  do
  :: /* adopt */
     if
     :: express == FILLED ->
        assert(xslot == loaded % K);
        meta[xslot] = xtask;
        loaded++;
        express = NONE
     :: else -> skip
     fi;
     /* collect */
     do
     :: (collected != loaded && state[collected % K] == FINISHED) ->
        j = collected % K;
        delivered[meta[j]]++;
        state[j] = IDLE;
        collected++
     :: else -> break
     od;
     if
     :: stop -> break
     :: else -> skip
     fi;
     /* input */
     if
     :: HINTS ->
        atomic { if :: express == OFFERED -> express = NONE :: else -> skip fi }
     :: else -> skip
     fi;
     p = 0;
     do
     :: p < P ->
#if MUTANT == 2  /* bug 2: loads the standby block while its slot is offered or filled */
        if
        :: (sz[p] > 0 && loaded - collected < K && express != CLAIMED) ->
#else
        if
        :: (sz[p] > 0 && loaded - collected < K && express == NONE) ->
#endif
           atomic { if :: shard_lock[p] == 0 -> shard_lock[p] = 1; got = 1 :: else -> got = 0 fi }
           if
           :: !got -> skip  /* try_lock failed: passed over */
           :: got && qn[p] > 0 ->
              id = qtask[p * N + qhead[p]];
              qhead[p] = (qhead[p] + 1) % N;
              qn[p]--;
              j = loaded % K;
              assert(state[j] == IDLE);
              task_in[j] = id;
              meta[j] = id;
              state[j] = READY;
              loaded++
           :: got && qn[p] == 0 -> skip
           fi;
           if
           :: got -> sz[p] = qn[p]; unlock(p)
           :: else -> skip
           fi
        :: else -> skip
        fi;
        p++
     :: else -> break
     od;
     /* offer */
     if
     :: (express == NONE && loaded == collected && !HINTS) ->
        xslot = loaded % K;
        express = OFFERED
     :: else -> skip
     fi;
     /* idle: with nothing in flight it may sleep */
     if
     :: loaded == collected ->
        napping = 1;
        atomic {
#if MUTANT == 1  /* bug 1: a filled offer is not work for a sleeping lane */
          if :: (stop || HINTS) -> skip :: else -> waiting = 1 fi
#else
          if :: (stop || HINTS || express == FILLED) -> skip :: else -> waiting = 1 fi
#endif
        }
        (waiting == 0);
        napping = 0
     :: true -> skip
     fi
  od;
  /* stop_lane: settle the offer (a pusher between CLAIMED and FILLED holds its shard lock,
   * which the closer took after closing: none is left), cancel the queued, collect, EXIT */
  do
#if MUTANT == 4  /* bug 4: a filled offer is dropped at shutdown instead of adopted */
  :: express == FILLED -> express = NONE; break
#else
  :: express == FILLED ->
     assert(xslot == loaded % K);
     meta[xslot] = xtask;
     loaded++;
     express = NONE;
     break
#endif
  :: express == OFFERED -> express = NONE; break
  :: express == NONE -> break
  od;
  p = 0;
  do
  :: p < P ->
     lock(p);
     do
     :: qn[p] > 0 ->
        delivered[qtask[p * N + qhead[p]]]++;  /* cancelled */
        qhead[p] = (qhead[p] + 1) % N;
        qn[p]--
     :: else -> break
     od;
     sz[p] = 0;
     unlock(p);
     p++
  :: else -> break
  od;
  do
  :: collected != loaded ->
     (state[collected % K] == FINISHED);
     j = collected % K;
     delivered[meta[j]]++;
     state[j] = IDLE;
     collected++
  :: else -> break
  od;
  j = 0;
  do
  :: j < K -> assert(state[j] == IDLE); state[j] = EXIT; j++
  :: else -> break
  od;
  ended++
}

proctype block() {
  byte pos = 0, id;
  do
  :: state[pos] == READY ->
     id = task_in[pos];
     ran[id]++;
     assert(ran[id] == 1);
     state[pos] = FINISHED;
     pos = (pos + 1) % K
  :: state[pos] == EXIT -> break
  od;
  ended++
}

init {
  byte t;
  atomic {
    run lane();
    run block();
    run pusher(0);
    run pusher(1);
    run closer()
  }
  (ended == P + 3);
  t = 0;
  do
  :: t < T ->
     if
     :: accepted[t] -> assert(delivered[t] == 1 && ran[t] <= 1)
     :: else -> assert(delivered[t] == 0 && ran[t] == 0)
     fi;
     t++
  :: else -> break
  od
}
