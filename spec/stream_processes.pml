/* spec/stream_processes.pml - how a run of task streams ends across two processes
 * (src/stream/mpi_transport.cpp: the notices of ended streams, sender_is_done, drain,
 * all_accounted and end_run; world_core.cpp: run) as a Promela model for spin.
 *
 * Two processes with one task stream each. A stream's messages to the other process leave on
 * the data communicator and become visible there later (a network process moves them, in
 * order: MPI does not let messages of one sender on one communicator overtake each other).
 * When a stream's body ends, its process sends the other one a notice on the control
 * communicator with the number of messages the stream sent; a notice may arrive before the
 * messages sent ahead of it (another communicator: no order between them). Each process's
 * own thread takes notices in while its stream runs. A stream waiting to receive takes a
 * message once one is visible, or fails once the sender's notice has come and it has taken
 * as many messages as the notice counts (none will come). After its stream has ended, the
 * process's thread takes in (drains) every message still arriving, until the notice has come
 * and received plus drained messages reach its count; then both processes meet in the end
 * barrier.
 *
 * Scenarios (-DSCENARIO=): 1, A sends one message and B receives it; 2, B waits for a message A
 * never sends; 3, A sends one message B never receives; 4, A sends two, B receives one.
 *
 * Checked (scripts/check-spin.sh): nothing hangs (an invalid end state is a process that never
 * ends its run); a receive fails only when no message is coming; B receives what the scenario
 * says it receives; every message is received or drained, once, before the run ends. Mutants
 * the search must catch: 1, a receive fails as soon as the sender's notice has come, without
 * the count (a message sent before the notice may not be visible yet); 2, the drain stops once
 * the notice has come, without the count (a message still arriving is left behind).
 */
#ifndef SCENARIO
#define SCENARIO 1
#endif
#ifndef MUTANT
#define MUTANT 0
#endif

#if SCENARIO == 1
#define A_SENDS 1
#define B_RECEIVES 1
#elif SCENARIO == 2
#define A_SENDS 0
#define B_RECEIVES 1
#elif SCENARIO == 3
#define A_SENDS 1
#define B_RECEIVES 0
#else
#define A_SENDS 2
#define B_RECEIVES 1
#endif

chan wire = [2] of { bit };      /* A's messages on their way */
chan data = [2] of { bit };      /* visible at B */
chan notice = [1] of { byte };   /* A's notice to B: how many it sent */

byte received;       /* messages B's stream took */
byte drained;        /* messages B's process took in at the end */
byte failed;         /* B's receives that failed */
bool notice_came;    /* B's process has A's notice (B's own thread or its stream sees it) */
byte noticed_count;
bool a_done, b_done; /* the end barrier */

active proctype network() {
  bit m;
end:
  do
  :: atomic { wire?m -> data!m }
  od
}

active proctype stream_a() {
  byte i = 0;
  do
  :: i < A_SENDS -> wire!1; i++
  :: else -> break
  od;
  notice!A_SENDS;   /* the body has ended */
  a_done = true;
  b_done             /* the end barrier */
}

/* B's process's own thread: takes the notice in while B's stream runs. */
active proctype world_b() {
  byte n;
  notice?n;
  atomic { noticed_count = n; notice_came = true }
}

active proctype stream_b() {
  bit m;
  byte i = 0;
  do
  :: i == B_RECEIVES -> break
  :: else ->
    i++;
    if
    :: data?m -> received++
#if MUTANT == 1
    :: notice_came ->
#else
    :: notice_came && received >= noticed_count ->
#endif
       assert(len(data) == 0 && len(wire) == 0);  /* nothing was coming */
       failed++
    fi
  od;
  /* The run's end: take in what still arrives, until the count is reached. */
  do
  :: data?m -> drained++
#if MUTANT == 2
  :: notice_came -> break
#else
  :: notice_came && received + drained >= noticed_count -> break
#endif
  od;
  assert(received + drained == A_SENDS);
  assert(len(data) == 0 && len(wire) == 0);
  assert(received + failed == B_RECEIVES);
  assert(received == (A_SENDS < B_RECEIVES -> A_SENDS : B_RECEIVES));
  b_done = true;
  a_done
}
