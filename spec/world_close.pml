/* spec/world_close.pml - how the Worlds of two processes close when the processes made
 * different numbers of runs (src/stream/mpi_transport.cpp, class MpiWorld: begin_run,
 * poll_notices with the close notice, stream_ended, drain, all_accounted, end_run with its end
 * barrier of kEnd messages, and ~MpiWorld's close; world_core.cpp: run) as a Promela model for
 * spin.
 *
 * Two processes, A (0) and B (1), with one task stream each. A makes RA runs and B RB runs,
 * then each destroys its World. A run r (counted from 1): begin_run counts it and marks the
 * peer gone for the run if the peer's close notice has come already with fewer runs than r; the
 * stream's body may post a send to the peer's stream and may wait to receive one message from
 * it (the receive fails once the peer is gone, or once the peer's notice of this run has come
 * and as many messages as it counts have been received); meanwhile the process's own thread
 * polls control for notices and close notices (a close notice with fewer runs than r marks the
 * peer gone, which wakes the stream). When the body ends, the stream sends the peer a notice
 * (kNotice: the run, and how many messages it sent). end_run then (a) takes in (drains) what
 * still arrives on data, polling control, until no send of its own is in flight and the peer
 * is gone or its notice has come and received plus drained messages reach its count; (b)
 * sends kEnd(r) and waits for the peer's kEnd(r) or for the peer to be gone (polling control
 * for kClose; a kEnd of an earlier run is stale, skipped); (c) the run fails if the peer was
 * gone in it, else it succeeds. Destruction sends kClose(runs made), then takes in and
 * discards everything arriving on data and control until the peer's kClose has come (now or
 * during the runs); then the World is gone.
 *
 * Modelling shortcuts: control (the control communicator, one FIFO channel into each process:
 * one sender per channel, so MPI's order of one sender's messages) is visible at once; data
 * (the data communicator) goes through a network process, so a notice may overtake the
 * messages sent before it, or not (no order between the communicators). The polls take the
 * first message of one kind (MPI_Iprobe of one tag: `??` here): the stream's poller and end_run
 * (a) take kNotice and kClose, the end barrier (b) kEnd and kClose, destruction everything in
 * order. A stream sends at most one message a run, then may receive one; a send is posted
 * (Isend) and the body goes on, or waits for it; it completes only when the receiver takes it
 * (a rendezvous send: the large-message case; the sender sees "in flight" as its message still
 * in the network or the receiver's queue). One run's body is the same at every run of a
 * process. Between runs and before its first, a process polls nothing. A poll's probe and
 * receive are one atomic step; the stream and its process's thread are interleaved as the
 * alternatives of one loop. Messages carry their run number for the assertions only. The end
 * barrier must not take notices: the peer may already be in the next run (mutant 4; a notice
 * that carried its run, kept for that run, would do as well).
 *
 * Scenarios (-DSCENARIO=): 1, both make 1 run (A sends one message, which B receives; B sends
 * one, which A drains): the normal case; 2, A makes no run, B makes one in which its stream
 * sends A a message (rendezvous); 3, A makes no run, B makes one in which its stream waits to
 * receive from A; 4, A makes 1 run, B makes 2, both streams sending and receiving (A's close
 * notice comes before, during or after B's extra run starts: before when B takes it in run
 * 1's end barrier); 5, both make 2 runs (A sends, B receives): the normal case again, where the
 * notice of a run can reach a process still in the end barrier of the run before; 6, A makes 1
 * run, B makes 3 (B sends and receives): two extra runs; 7, A makes 2 runs, B makes 3, both
 * streams sending and receiving. A blocking send is one side's only (WA, WB below): two
 * streams that both block in a send before they receive deadlock in any protocol.
 *
 * Checked (scripts/check-spin.sh): nothing hangs (an invalid end state is a process that never
 * leaves a run or its World's destruction); a run that both processes make succeeds, B's extra runs
 * fail; a receive fails only when nothing is coming (the peer made no such run, or sent nothing in
 * it); every data message is taken exactly once (received, drained or discarded), and each one of a
 * run within that run; no message or kClose is sent to a process whose World is gone, and none is
 * left in flight to it when it goes. Mutants the search must catch: 1, destruction leaves at once
 * after sending its kClose, without waiting for the peer's (B's extra run's send is never taken);
 * 2, neither begin_run nor the poll marks a peer gone when its close notice counts fewer runs (B's
 * extra run waits for ever in the receive, or in end_run for the notice of a peer that made no such
 * run); 3, a close notice marks the peer gone even when it counts r runs or more (B's run that A
 * made too fails); 4, the end barrier polls notices too (poll_notices, as barrier() does) and
 * a notice carries no run number: the peer's notice of run r+1, taken while this process waits in
 * run r's end barrier, is booked to run r and forgotten by begin_run, and run r+1 waits for ever
 * for it; 5, end_run does not wait for its own sends in flight (B closes with its extra run's
 * message still in the network: A's World goes with it in flight); 6, destruction does not drain
 * data (B's extra run's send is never taken, B never closes, A waits for ever); 7, begin_run does
 * not mark a peer gone whose close notice came in an earlier run (only a close arriving during the
 * run does: B's second run waits for ever).
 */
#ifndef SCENARIO
#define SCENARIO 1
#endif
#ifndef MUTANT
#define MUTANT 0
#endif

/* RA, RB: runs made; SA, SB: the stream sends one message each run; WA, WB: its body may wait
 * for that send to be taken before it goes on (a blocking send), or not; CA, CB: it receives
 * one (after its send). */
#if SCENARIO == 1
#define RA 1
#define RB 1
#define SA 1
#define WA 1
#define CA 0
#define SB 1
#define WB 0
#define CB 1
#elif SCENARIO == 2
#define RA 0
#define RB 1
#define SA 0
#define WA 0
#define CA 0
#define SB 1
#define WB 1
#define CB 0
#elif SCENARIO == 3
#define RA 0
#define RB 1
#define SA 0
#define WA 0
#define CA 0
#define SB 0
#define WB 0
#define CB 1
#elif SCENARIO == 4
#define RA 1
#define RB 2
#define SA 1
#define WA 0
#define CA 1
#define SB 1
#define WB 1
#define CB 1
#elif SCENARIO == 5
#define RA 2
#define RB 2
#define SA 1
#define WA 1
#define CA 0
#define SB 0
#define WB 0
#define CB 1
#elif SCENARIO == 6
#define RA 1
#define RB 3
#define SA 0
#define WA 0
#define CA 0
#define SB 1
#define WB 1
#define CB 1
#else
#define RA 2
#define RB 3
#define SA 1
#define WA 0
#define CA 1
#define SB 1
#define WB 1
#define CB 1
#endif

#define CAP 7          /* control messages one process can send: 2 a run (RB <= 3), 1 kClose */
#define NONE 255

mtype = { kNotice, kEnd, kClose };

chan ctl[2] = [CAP] of { mtype, byte, byte };  /* control into process p: kind, run, count */
chan wire[2] = [1] of { byte };                /* data on its way to p (its run) */
chan data[2] = [1] of { byte };                /* data arrived at p */

bool exited[2];   /* p's World is gone */
byte sent_to[2];  /* data messages sent to p */
byte taken_at[2]; /* data messages p took (received, drained or discarded) */

#define in_flight_to(p) (len(wire[p]) + len(data[p]))

active proctype network() {
  byte m;
end:
  do
  :: atomic { nempty(wire[0]) && nfull(data[0]) -> wire[0]?m; data[0]!m; m = 0 }
  :: atomic { nempty(wire[1]) && nfull(data[1]) -> wire[1]?m; data[1]!m; m = 0 }
  od
}

/* A close notice in run r: fewer runs than r, the peer is gone for this run. */
#if MUTANT == 2
#define MARK_GONE skip
#elif MUTANT == 3
#define MARK_GONE gone = true
#else
#define MARK_GONE if :: closed < r -> gone = true :: else -> skip fi
#endif

/* The poller of the stream phase and of end_run (a): notices and close notices. */
#define POLL_NOTICE_CLOSE \
  :: atomic { ctl[me]??kNotice,kr,cnt -> assert(kr == r); noticed = true; ncount = cnt; \
              kr = 0; cnt = 0 } \
  :: atomic { ctl[me]??kClose,kr,cnt -> closed = kr; MARK_GONE; kr = 0; cnt = 0 }

#define SEND_CTL(k, a, b) assert(!exited[peer] && len(ctl[peer]) < CAP); ctl[peer]!k,a,b

proctype world(byte me; byte runs; bool sends; bool waits; bool receives; byte peer_runs;
               bool peer_sends) {
  byte peer = 1 - me;
  byte r = 0;          /* runs begun */
  byte closed = NONE;  /* the runs the peer made, once its kClose has come */
  bool gone;           /* this run: the peer is gone */
  bool noticed;        /* this run: the peer's notice has come ... */
  byte ncount;         /* ... counting these messages */
  byte got;            /* this run: messages from the peer received or drained */
  byte sent;           /* this run: messages sent to the peer */
  bool end_came;       /* this run: the peer's kEnd(r) has come */
  byte st;             /* the stream: 0 before its send, 1 waiting for it to be taken, 2 before
                          its receive, 3 ending */
  byte kr, cnt, m;
  mtype kind;

  do
  :: r == runs -> break
  :: r < runs ->
    /* 1. begin_run */
    atomic {
      r++;
      noticed = false; ncount = 0; got = 0; sent = 0; end_came = false; st = 0;
#if MUTANT == 2 || MUTANT == 7
      gone = false
#else
      gone = (closed != NONE && closed < r)
#endif
    }
    /* 2-4. The stream's body and, meanwhile, the process's poller. */
    do
    :: st == 0 ->
      if
      :: sends -> assert(!exited[peer]); wire[peer]!r; sent_to[peer]++; sent = 1;
        if :: waits -> st = 1 :: true -> st = 2 fi
      :: else -> st = 2
      fi
    :: st == 1 && in_flight_to(peer) == 0 -> st = 2  /* a blocking send: taken */
    :: st == 2 && !receives -> st = 3
    :: atomic { st == 2 && receives && nempty(data[me]) ->
        data[me]?m; assert(m == r); got++; taken_at[me]++; m = 0; st = 3 }
    :: atomic { st == 2 && receives && (gone || (noticed && got >= ncount)) ->
        /* the receive fails: nothing is coming */
        assert(in_flight_to(me) == 0 && !(r <= peer_runs && peer_sends)); st = 3 }
    :: st == 3 -> SEND_CTL(kNotice, r, sent); break  /* 4. stream_ended */
    POLL_NOTICE_CLOSE
    od;
    /* 5(a). end_run: finish the sends, drain, until everything from the peer is accounted */
    do
    :: atomic { data[me]?m -> assert(m == r); got++; taken_at[me]++; m = 0 }
    POLL_NOTICE_CLOSE
#if MUTANT == 5
    :: gone || (noticed && got >= ncount) -> break
#else
    :: in_flight_to(peer) == 0 && (gone || (noticed && got >= ncount)) -> break
#endif
    od;
    /* 5(b). the end barrier */
    SEND_CTL(kEnd, r, 0);
    do
    :: atomic { ctl[me]??kEnd,kr,cnt -> assert(kr <= r);
        if :: kr == r -> end_came = true :: else -> skip fi; kr = 0; cnt = 0 }  /* else stale */
    :: atomic { ctl[me]??kClose,kr,cnt -> closed = kr; MARK_GONE; kr = 0; cnt = 0 }
#if MUTANT == 4
    :: atomic { ctl[me]??kNotice,kr,cnt -> noticed = true; ncount = cnt; kr = 0; cnt = 0 }
#endif
    :: end_came || gone -> break
    od;
    /* 5(c). the run fails exactly when the peer did not make it */
    assert(gone == (r > peer_runs))
  od;
  /* 6. the World's destruction */
  SEND_CTL(kClose, r, 0);
#if MUTANT != 1
  do
  :: closed != NONE -> break
  :: atomic { ctl[me]?kind,kr,cnt ->
      if :: kind == kClose -> closed = kr :: else -> skip fi; kind = 0; kr = 0; cnt = 0 }
#if MUTANT != 6
  :: atomic { data[me]?m -> taken_at[me]++; m = 0 }
#endif
  od;
#endif
  atomic {
    exited[me] = true;
    assert(len(ctl[me]) == 0 && in_flight_to(me) == 0 && taken_at[me] == sent_to[me]);
    assert(closed == peer_runs)
  }
}

init {
  atomic {
    run world(0, RA, SA, WA, CA, RB, SB);
    run world(1, RB, SB, WB, CB, RA, SA)
  }
}
