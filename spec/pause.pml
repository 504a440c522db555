/* spec/pause.pml - pausing and resuming the GPU pool (src/gpu/pause.cpp; the lanes' part in
 * lane.cpp: park_if_drained; DeviceBlocks::start and join) as a Promela model for spin.
 *
 * L lanes, each with one block that serves the lane's ring: a lane takes a queued task into
 * its ring (not while a pause is requested), the block runs it, the lane collects and delivers
 * it. A pusher queues T tasks at any time, paused or not. A user pauses and resumes R times:
 * pause() requests the pause and waits until every lane has parked, then joins the blocks
 * (waits until each has returned); resume() launches the blocks again (their rings fresh, no
 * EXIT), clears the request and waits until every lane has left its park. A lane parks only
 * with nothing in flight: it sets its ring to EXIT (its block returns at the EXIT), counts
 * itself parked and sleeps until the request is cleared; it then counts itself out and goes
 * on. A block launched again serves its ring from the start. After the last resume the lanes
 * deliver what is left, set their rings to EXIT and stop (the shutdown).
 *
 * Each statement is atomic and memory sequentially consistent: the real code's in_mutex_ (the
 * request, the park count, the condition variables) and the kernel join make that sound.
 *
 * Checked (scripts/check-spin.sh): every task is delivered exactly once, no task is in a ring
 * when the ring is set to EXIT, and nothing hangs (an invalid end state: the pause's join
 * waiting for a block that never returns, or a lane parked for ever). Mutants the search must
 * catch: 1, resume() does not wait for the lanes to leave their park (a pause right after it
 * counts a lane still parked from before, which never set the new launch's ring to EXIT, and
 * joins for ever: the hang the device example found); 2, a lane parks with a task in flight.
 */
#ifndef L
#define L 2
#endif
#ifndef T
#define T 2
#endif
#ifndef R
#define R 2
#endif
#ifndef MUTANT
#define MUTANT 0
#endif

byte queued = 0;        /* tasks in the input queue */
byte delivered = 0;     /* tasks delivered */
byte pushed = 0;
bool requested = false; /* pause_requested_ */
byte parked = 0;        /* parked_lanes_ */
bool stopping = false;  /* after the last resume and every push: the lanes stop when idle */

bool in_ring[L];        /* a task is in the lane's ring (loaded, not yet collected) */
bool done_in_ring[L];   /* the block ran it: FINISHED */
bool exit_ring[L];      /* the ring is set to EXIT */
bool running[L];        /* the lane's block is running (launched, not returned) */
byte launch = 1;        /* launches so far */

proctype Block(byte me) {
  byte served = 0;
  do
  :: launch != served && !running[me] ->
       /* a (re)launch: fresh memory */
       atomic { served = launch; running[me] = true }
       do
       :: in_ring[me] && !done_in_ring[me] -> done_in_ring[me] = true
       :: exit_ring[me] -> running[me] = false; break
       od
  :: stopping && launch == served && !running[me] -> break
  od
}

proctype Lane(byte me) {
  byte my_launch;
  do
  :: in_ring[me] && done_in_ring[me] ->  /* collect and deliver */
       atomic { in_ring[me] = false; done_in_ring[me] = false; delivered++ }
  :: !requested && !in_ring[me] && queued > 0 ->  /* take and load */
       atomic { queued--; in_ring[me] = true }
  :: requested && (!in_ring[me] || MUTANT == 2) ->  /* park */
       atomic {
         assert(!in_ring[me]);  /* a task in a ring set to EXIT would be lost */
         exit_ring[me] = true;
         parked++
       }
       !requested || stopping;
       parked--
  :: stopping && !requested && queued == 0 && !in_ring[me] ->  /* shutdown: EXIT, stop */
       exit_ring[me] = true;
       break
  od
}

proctype Pusher() {
  do
  :: pushed < T -> atomic { pushed++; queued++ }
  :: pushed == T -> break
  od
}

proctype User() {
  byte round = 0;
  byte i;
  do
  :: round < R ->
       /* pause(): the request, every lane parked, the blocks joined */
       requested = true;
       parked == L;
       i = 0;
       do
       :: i < L -> !running[i]; i++
       :: i == L -> break
       od;
       /* resume(): fresh rings, a launch, the request cleared, every lane out of its park */
       atomic {
         i = 0;
         do
         :: i < L -> exit_ring[i] = false; i++
         :: i == L -> break
         od;
         launch++
       }
       requested = false;
#if MUTANT != 1
       parked == 0;
#endif
       round++
  :: round == R -> break
  od;
  pushed == T;
  stopping = true
}

init {
  byte i = 0;
  atomic {
    do
    :: i < L -> run Block(i); run Lane(i); i++
    :: i == L -> break
    od;
    run Pusher();
    run User()
  }
  /* everything ends: every task delivered once */
  (_nr_pr == 1);
  assert(delivered == T && queued == 0)
}
