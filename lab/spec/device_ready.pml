/* lab/spec/device_ready.pml - a proposed pool feature, not built: dependencies resolved on the
 * GPU (docs/decisions/017-gpu-device-dependencies.md). A task graph's tasks live in device
 * memory with a counter of unfinished predecessors each; a block that finishes a task
 * decrements its successors' counters, and the decrement that reaches zero enqueues that
 * successor into a ready queue in device memory, from which any block takes work without the
 * host. The queue is a bounded multi-producer multi-consumer ring with a sequence number per
 * cell (Vyukov's): a producer claims a ticket at the tail by CAS when the cell's sequence says
 * it is free, writes the task, then publishes sequence = ticket + 1; a consumer claims a ticket
 * at the head by CAS when the cell's sequence says it holds that ticket's task, reads it, then
 * frees the cell for the ticket one lap later. Each finished task is reported to the host
 * (a counter here).
 *
 * The graph: a diamond, 0 -> {1, 2} -> 3, with task 0 ready at the start; B blocks.
 *
 * Checked: every task runs exactly once, only after all its predecessors finished, and every
 * block ends once all have (no deadlock; and, searched for non-progress cycles under weak
 * fairness, no task left unready for ever while the blocks poll). Mutants the search must
 * catch: 1, the zero test looks at the counter again after the decrement (two finishers both
 * see zero and enqueue the successor twice); 2, a consumer takes the head ticket without
 * looking at the cell's sequence (it may read a cell a producer has claimed but not yet
 * written); 3, the decrement is a load and a store (two finishers lose one: the successor
 * never becomes ready, a non-progress cycle).
 */
#ifndef B
#define B 2
#endif
#ifndef MUTANT
#define MUTANT 0
#endif
#define TASKS 4
#define CAP 2
#define EMPTY 255

byte preds[TASKS];      /* unfinished predecessors */
bool finished[TASKS];
byte runs[TASKS];
byte reported = 0;      /* completions the host has seen */

/* the ready queue */
byte head = 0, tail = 0;  /* tickets (mod 256) */
byte seq[CAP];            /* per cell: ticket + 1 when it holds that ticket's task; ticket when free */
byte cell[CAP];

inline enqueue(t) {
  do
  :: atomic { tk = tail; (seq[tk % CAP] == tk) -> tail = tk + 1 }; break  /* claim: CAS at tail */
  od;
  cell[tk % CAP] = t;
  seq[tk % CAP] = tk + 1  /* publish (release) */
}

/* Takes a task id into `got`, or EMPTY when the queue is empty at the look. */
inline try_dequeue(got) {
  got = EMPTY;
  atomic {
    hk = head;
#if MUTANT == 2
    if
    :: hk != tail -> head = hk + 1; got = 0  /* claimed without the sequence */
    :: else -> skip
    fi
#else
    if
    :: seq[hk % CAP] == hk + 1 -> head = hk + 1; got = 0  /* claim: CAS at head */
    :: else -> skip
    fi
#endif
  };
  if
  :: got == 0 ->
       got = cell[hk % CAP];
       seq[hk % CAP] = hk + CAP  /* free for the ticket one lap later */
  :: else -> skip
  fi
}

inline release(s) {
#if MUTANT == 1
  preds[s]--;  /* the decrement, then a second look at the counter */
  if
  :: preds[s] == 0 -> enqueue(s)
  :: else -> skip
  fi
#elif MUTANT == 3
  seen = preds[s];  /* a load and a store, not one atomic decrement */
  preds[s] = seen - 1;
  if
  :: seen == 1 -> enqueue(s)
  :: else -> skip
  fi
#else
  atomic { preds[s]--; left = preds[s] };  /* atomicSub returns the old value: old - 1 */
  if
  :: left == 0 -> enqueue(s)
  :: else -> skip
  fi
#endif
}

/* The successors' counters, the zero test, the enqueue (the locals tk, hk, seen, left are the
 * block's). */
inline finish(t) {
  finished[t] = true;
  if
  :: t == 0 -> release(1); release(2)
  :: t == 1 || t == 2 -> release(3)
  :: else -> skip
  fi;
  reported++
}

inline run_task(t) {
  assert(t < TASKS);
  assert(t == 0 || (t == 3 -> finished[1] && finished[2] : finished[0]));
  atomic { runs[t]++; assert(runs[t] == 1) }
}

proctype Block() {
  byte t;
  byte tk, hk, seen, left;
  do
  :: reported == TASKS -> break
  :: else ->
       try_dequeue(t);
       if
       :: t != EMPTY ->
progress:
            run_task(t);
            finish(t)
       :: else -> skip
       fi
  od
}

init {
  byte i;
  atomic {
    preds[0] = 0; preds[1] = 1; preds[2] = 1; preds[3] = 2;
    seq[0] = 0; seq[1] = 1;
    cell[0] = EMPTY; cell[1] = EMPTY;
    /* task 0 ready: the host enqueues it */
    cell[0] = 0; seq[0] = 1; tail = 1;
    i = 0;
    do
    :: i < B -> run Block(); i++
    :: i == B -> break
    od
  }
  (_nr_pr == 1);
  assert(reported == TASKS);
  i = 0;
  do
  :: i < TASKS -> assert(runs[i] == 1); i++
  :: i == TASKS -> break
  od
}
