/* spec/slot_protocol.pml - the GPU pool's slot protocol (include/weft/gpu/detail/slot.hpp,
 * src/gpu/, device.cuh) as a Promela model for spin.
 *
 * B blocks, each with a ring of K slots; one scheduler (a lane) pushes T tasks. What is
 * modelled is the protocol's logic, with the nondeterminism the real code allows:
 *  - the scheduler loads a task into ANY block whose ring has a free slot (the real policy,
 *    lowest level first, is one of these choices), in ring order, and collects each block's
 *    slots in ring order when they are FINISHED; it may interleave loads and collects freely;
 *  - a block waits until the slot at its ring position is READY or EXIT, takes the run of
 *    READY slots from there (reading the states one by one, as the warp's lanes do, while the
 *    scheduler keeps loading), runs them in order, and publishes FINISHED in groups of any
 *    size (the kernel and the host backend publish every task on its own, a group of one;
 *    earlier kernels published groups behind one fence; every grouping is explored);
 *  - after every task was delivered, the scheduler stores EXIT in every slot.
 * Each Promela statement is atomic and memory is sequentially consistent: the release/acquire
 * pairs of the real code are what make that view sound (docs/gpu.md); weak-memory effects
 * themselves are checked by compute-sanitizer and ThreadSanitizer, not here.
 *
 * Checked (scripts/check-spin.sh, K = 1 and 2): every task is run once and delivered once with
 * its own result (assertions), nothing deadlocks and every block reaches EXIT (no invalid end
 * state: each process must end).
 */
#ifndef K
#define K 2
#endif
#define B 2
#ifndef T
#define T 4
#endif
#ifndef MUTANT
#define MUTANT 0 /* scripts/check-spin.sh: 1..3 are known bugs the check must catch */
#endif

#define IDLE 0
#define READY 1
#define FINISHED 2
#define EXIT 3

byte state[B * K];    /* the control lines: slot j of block b is b * K + j */
byte task_in[B * K];  /* the payload the scheduler wrote: which task */
byte result[B * K];   /* the results the block wrote back */
byte executed[T];     /* how often each task's body ran */
byte delivered[T];    /* how often each task reached an output queue */
byte exited = 0;      /* blocks that returned on EXIT */

active proctype scheduler() {
  byte loaded[B];     /* tasks loaded into block b so far: next slot loaded[b] % K */
  byte collected[B];  /* slots of block b taken back so far: next collected[b] % K */
  byte meta[B * K];   /* the scheduler's record of the task in each slot */
  byte next = 0, done = 0, b, j, i;
  do
  :: if  /* load the next task into a block with a free slot */
#if MUTANT == 2  /* bug: loads into a full ring */
     :: (next < T && loaded[0] - collected[0] <= K) -> b = 0
     :: (next < T && loaded[1] - collected[1] <= K) -> b = 1
#else
     :: (next < T && loaded[0] - collected[0] < K) -> b = 0
     :: (next < T && loaded[1] - collected[1] < K) -> b = 1
#endif
     fi;
     j = b * K + loaded[b] % K;
     assert(state[j] == IDLE);
     task_in[j] = next;
     meta[j] = next;
     state[j] = READY;  /* release: the payload before the state */
     loaded[b]++;
     next++
  :: if  /* collect the next slot of a block when it is FINISHED */
     :: (collected[0] != loaded[0] && state[0 * K + collected[0] % K] == FINISHED) -> b = 0
     :: (collected[1] != loaded[1] && state[1 * K + collected[1] % K] == FINISHED) -> b = 1
     fi;
     j = b * K + collected[b] % K;
     assert(result[j] == meta[j]);       /* the results are those of the task loaded there */
     assert(delivered[meta[j]] == 0);    /* delivered once */
     delivered[meta[j]]++;
     state[j] = IDLE;
     collected[b]++;
     done++
  :: done == T -> break
  od;
  /* shutdown: every task was delivered, so every slot is IDLE; EXIT goes in all of them */
  i = 0;
  do
  :: i < B * K -> assert(state[i] == IDLE); state[i] = EXIT; i++
  :: i == B * K -> break
  od
}

proctype block(byte b) {
  byte pos = 0, n, t, k, j;
  do
  :: (state[b * K + pos] == READY || state[b * K + pos] == EXIT) ->  /* poll (acquire) */
     if
     :: state[b * K + pos] == EXIT -> break
     :: else -> skip
     fi;
     /* the run: the READY slots from pos on, read one at a time */
     n = 1;
     do
     :: (n < K && state[b * K + (pos + n) % K] == READY) -> n++
     :: else -> break
     od;
     t = 0;
     k = 0;  /* the first task of the run not yet published */
     do
     :: t < n ->
        j = b * K + (pos + t) % K;
        assert(state[j] == READY);
#if MUTANT == 1  /* bug: the state is published before the results are written */
        state[j] = FINISHED;
#endif
        executed[task_in[j]]++;
        assert(executed[task_in[j]] == 1);  /* run once */
        result[j] = task_in[j];
        t++;
        if
        :: true ->  /* publish the group ending here (release, then the states) */
           do
           :: k < t -> state[b * K + (pos + k) % K] = FINISHED; k++
           :: else -> break
           od
        :: t < n -> skip  /* or keep it for a later group of this run */
#if MUTANT == 3  /* bug: the last group of a run is never published */
        :: t == n -> skip
#endif
        fi
     :: else -> break
     od;
#if MUTANT != 3 && MUTANT != 1
     assert(k == n);  /* the whole run is published before the block polls again */
#endif
     pos = (pos + n) % K
  od;
  exited++
}

init {
  byte t;
  run block(0);
  run block(1);
  (exited == B);  /* every block reached EXIT */
  t = 0;
  do
  :: t < T -> assert(executed[t] == 1 && delivered[t] == 1); t++
  :: else -> break
  od
}
