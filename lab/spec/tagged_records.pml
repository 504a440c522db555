/* lab/spec/tagged_records.pml - slots whose records are read and written a word at a time, each
 * word tagged: a design built and measured but not adopted (docs/gpu.md, "Tagged records"; its code
 * is on branch tagged-records; the pool's model is spec/slot_protocol.pml). The branch differs from
 * this model in one respect: its headers are the scheduler's and its status words the block's (a
 * result does not overwrite word 0), so its headers carry the use count, which this model shows is
 * otherwise needed only for diagnosis.
 *
 * Today a block acquires a slot's state word, then reads the payload (a second PCIe round
 * trip), and publishes its results with a system-scope release (a fence). With tagged records
 * every 8-byte word of a slot carries a tag beside its 32 bits of data, and 8-byte accesses are
 * single-copy atomic, but nothing orders one word against another: a reader may see any mix of
 * old and new words (the H100 showed one such poll in 6400 tagged round trips,
 * lab/results/h100/tagged_mailbox-a0d93bd.txt). The tag of a word is
 * 2 * (the slot's use count) + direction (0: request from the scheduler, 1: result from the
 * block), modulo TAGS; the slots start with every word's tag odd (a result's). So:
 *  - the scheduler writes a task's W words in ANY order (word 0: the task and its size in
 *    words; then the payload words), with the request tag of the slot's next use;
 *  - the block polls the slot at its ring position by reading all W words, each atomically, in
 *    any interleaving with the scheduler's writes, and takes the record only when word 0 and
 *    the words the size covers carry the tag it expects; it runs the task and writes the result
 *    over the record in place, a word at a time in any order, with the result tag;
 *  - the scheduler collects a slot (in ring order) when word 0 and the covered words carry the
 *    result tag, and only then loads the slot again; after the last task, it writes an EXIT
 *    record (word 0 with the EXIT mark, request tag) in every slot.
 * Each Promela statement is atomic and memory is sequentially consistent per word: that is the
 * single-copy atomicity of an aligned 8-byte relaxed access, and all this design assumes.
 *
 * Checked (by scripts/check-spin.sh until it left CI; by hand now: lab/README.md): every task is
 * run once, on a whole record of its own, and delivered once with its own result; no deadlock;
 * every block reaches EXIT. With TAGS = 2 (the direction alone) as with TAGS = 8: a slot is loaded
 * again only after its results were collected, every load covers word 0 and rewrites the words it
 * covers, and every result overwrites them, so an even tag (a request's) on a covered word is
 * always the current one; given odd starting tags, the use count is not needed for safety (it is
 * for diagnosis, and it makes zeroed memory safe until its count wraps). Mutants the check must
 * catch: 1, the block trusts word 0's tag alone (a state word without ordering; any TAGS); 2,
 * results carry the request tag (no direction; with TAGS = 2 the block takes its own result for the
 * next request, with a use count the scheduler waits forever, a livelock this safety search does
 * not see); 3, the slots start zeroed, a request's tag (with TAGS = 2 the block takes the empty
 * slot for a task).
 */
#ifndef K
#define K 2 /* slots per block's ring */
#endif
#define B 1
#define W 2 /* words per record: word 0 (task, size) + one payload word (the order of the
                writes below is spelt out for two words) */
#ifndef T
#define T 3
#endif
#ifndef MUTANT
#define MUTANT 0
#endif
#ifndef TAGS
#define TAGS 8
#endif
#define EXIT_MARK 15 /* word 0's task field in an EXIT record */

/* Slot j's words: tag[j * W + w], task[...] (the task the word belongs to, or EXIT_MARK),
 * size[...] (word 0 only: words covered), res[...] (1 in a result word). The payload's value is
 * modelled by the task it belongs to: a record is whole when all its covered words name the
 * same task. */
byte tag[K * W];
byte task[K * W];
byte size[K * W];
bit res[K * W];
byte executed[T];
byte delivered[T];
byte exited = 0;

/* One word of the scheduler's load of task `t` (n words) into slot j, use u. */
inline write_request(j, w, u, t, n) {
  d_step {
    tag[j * W + w] = (2 * u) % TAGS;
    task[j * W + w] = t;
    res[j * W + w] = 0;
    if
    :: w == 0 -> size[j * W] = n
    :: else -> skip
    fi
  }
}
/* One word of the block's result over slot j, with tag g. */
inline write_result(j, w, g) {
  d_step { tag[j * W + w] = g; res[j * W + w] = 1 }
}

proctype scheduler() {
  byte use[K];           /* uses of each slot so far (its next load is use[j] + 1) */
  byte loaded = 0, collected = 0, next = 0, j, n, t;
  do
  :: (next < T && loaded - collected < K) ->  /* load the next task into the next slot */
     j = loaded % K;
     use[j]++;
     n = 1 + next % W;  /* tasks of 1..W words */
     /* the covered words in either order; a word past the size is left as it was */
     if
     :: n == 1 -> write_request(j, 0, use[j], next, n)
     :: n == 2 -> write_request(j, 0, use[j], next, n); write_request(j, 1, use[j], next, n)
     :: n == 2 -> write_request(j, 1, use[j], next, n); write_request(j, 0, use[j], next, n)
     fi;
     loaded++;
     next++
  :: (collected < loaded) ->  /* collect the next slot once its result is whole */
     j = collected % K;
     atomic {
       /* word 0 and the words it covers carry this use's result tag */
       (tag[j * W] == (2 * use[j] + 1) % TAGS &&
        (size[j * W] < 2 || tag[j * W + 1] == (2 * use[j] + 1) % TAGS))
     };
     t = task[j * W];
     assert(t < T);
     assert(res[j * W] == 1);
     assert(size[j * W] < 2 || (task[j * W + 1] == t && res[j * W + 1] == 1));
     assert(delivered[t] == 0);
     delivered[t]++;
     collected++
  :: (collected == T) -> break
  od;
  /* shutdown: an EXIT record in every slot, with its next request tag */
  j = 0;
  do
  :: j < K ->
     use[j]++;
     d_step {
       tag[j * W] = (2 * use[j]) % TAGS;
       task[j * W] = EXIT_MARK;
       size[j * W] = 1;
       res[j * W] = 0
     };
     j++
  :: else -> break
  od
}

proctype block() {
  byte pos = 0, expect, t, n, w;
  byte seen_tag[W], seen_task[W], seen_size;
  bit seen_res[W];
  byte use[K];
  do
  :: use[pos]++;
     expect = (2 * use[pos]) % TAGS;
     /* poll: read the W words, each atomically, until the record is whole */
     do
     :: w = 0;
        do
        :: w < W ->
           d_step {
             seen_tag[w] = tag[pos * W + w];
             seen_task[w] = task[pos * W + w];
             seen_res[w] = res[pos * W + w];
             if
             :: w == 0 -> seen_size = size[pos * W]
             :: else -> skip
             fi
           };
           w++
        :: else -> break
        od;
#if MUTANT == 1  /* bug: word 0's tag taken as the whole record's (a state word's role) */
        if
        :: seen_tag[0] == expect -> break
        :: else -> skip
        fi
#else
        if
        :: (seen_tag[0] == expect && (seen_task[0] == EXIT_MARK || seen_size < 2 ||
                                      seen_tag[1] == expect)) -> break
        :: else -> skip
        fi
#endif
     od;
     if
     :: seen_task[0] == EXIT_MARK -> break
     :: else -> skip
     fi;
     t = seen_task[0];
     n = seen_size;
     assert(t < T && seen_res[0] == 0);
     assert(n < 2 || (seen_task[1] == t && seen_res[1] == 0));  /* a whole record of its own */
     executed[t]++;
     assert(executed[t] == 1);
     /* the result over the record in place, the covered words in either order */
#if MUTANT == 2  /* bug: the results carry the request tag */
     t = expect;
#else
     t = (expect + 1) % TAGS;
#endif
     if
     :: n == 1 -> write_result(pos, 0, t)
     :: n == 2 -> write_result(pos, 0, t); write_result(pos, 1, t)
     :: n == 2 -> write_result(pos, 1, t); write_result(pos, 0, t)
     fi;
     pos = (pos + 1) % K
  od;
  exited++
}

init {
  byte t;
#if MUTANT != 3  /* bug 3: the slots stay zeroed, tag 0 being a request's */
  t = 0;
  do
  :: t < K * W -> tag[t] = 1; t++
  :: else -> break
  od;
#endif
  run scheduler();  /* after the slots are set up */
  run block();
  (exited == B);
  t = 0;
  do
  :: t < T -> assert(executed[t] == 1 && delivered[t] == 1); t++
  :: else -> break
  od
}
