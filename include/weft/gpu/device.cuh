// weft/gpu/device.cuh - the resident task-multiplexed kernel (seed 000 §3.2.4). Include it in
// exactly the CUDA translation unit(s) that make a DeviceProgram:
//
//   // tasks.cu
//   #include <weft/gpu/device.cuh>
//   weft::gpu::DeviceProgram my_program() { return weft::gpu::device_program<MyTasks, 64>(); }
//
// Each block serves a ring of slots in pinned host-mapped memory until it reads EXIT. Warp 0
// polls the records of its next slots (tagged words, weft/gpu/detail/slot.hpp): one read of a
// record is at once the poll and the copy of its payload into shared memory, and the record is
// taken when every word it needs carries the tag of the slot's next use. It backs off with
// __nanosleep; a block idle for a while stops reading host memory and sleeps on a per-GPU
// epoch in device memory, which one watcher block moves when the scheduler rings the host
// doorbell (docs/gpu.md, "Idle"). The task threads run the tasks in ring order and write each
// one's status and results back as tagged words; warp 1 stores each one's ended word with a
// system-scope release as soon as it ends.
#pragma once

#include <cuda_runtime.h>
#include <cuda/atomic>

#include "weft/gpu/detail/slot.hpp"
#include "weft/gpu/device_program.hpp"
#include "weft/gpu/task.hpp"

namespace weft::gpu {

namespace detail {

// Longest back-off of a block polling its own slot in warm idle. Warm idle lasts
// ResidentArgs::warm_idle_ns after the block's last task; then the block goes into deep idle,
// where it reads only device memory and one block per GPU (the watcher) polls the doorbell.
inline constexpr unsigned kMaxPollBackoffNs = 2048;
// The watcher's doorbell poll period, and how often a deep-idle block looks at its epoch copy.
inline constexpr unsigned kWatcherPollNs = 1000;
inline constexpr unsigned kDeepIdleSleepNs = 1000;
// The scheduler rings only for blocks it believes may be in deep idle (idle longer than half
// of warm_idle by its clock); a block whose idle began long before the scheduler noticed
// (a descheduled scheduler thread) may be missed, so deep-idle blocks also look at their own
// slot this often: a bounded worst case, at 1 read per 2 ms per block.
inline constexpr unsigned long long kDeepIdleSafetyPollNs = 2'000'000;
// A standby block (one per scheduler lane) never goes into deep idle and polls with at most
// this back-off: a single task on an idle pool starts within ~1 us instead of waiting for the
// doorbell, the watcher and the epoch (bench/results/h100/gpu-pool.md, latency). Each standby
// block reads host memory about once per microsecond (one read in flight), ~0.1% of the pinned
// bandwidth.
inline constexpr unsigned kStandbyBackoffNs = 256;
// The epoch is replicated so that 2000 sleeping blocks do not all read one L2 line.
inline constexpr int kEpochCopies = 64;
inline constexpr int kEpochStride = 32;  // words: one copy per 128 bytes

#if defined(WEFT_POOL_TRACE)
// scripts/probes/latency_trace.cu: the GPU clock when the last block to run a task had read its
// record (twice: once the poll, once the payload, when they were two reads), had run it, had
// handed it to the publisher, and had stored its ended word; then how many reads of records
// the poll that found it made, and how many of them found a record part old, part new.
#define WEFT_TRACE_WORDS 7
__device__ unsigned long long g_weft_trace[WEFT_TRACE_WORDS];
#define WEFT_TRACE(k)                                            \
  do {                                                           \
    if ((threadIdx.x & 31u) == 0) g_weft_trace[k] = global_ns(); \
  } while (0)
#else
#define WEFT_TRACE(k) \
  do {                \
  } while (0)
#endif

// Per GPU, in device memory (zeroed; watcher = -1 before the launch).
struct DeviceIdle {
  std::uint32_t epoch[kEpochCopies * kEpochStride];  // copy c at epoch[c * kEpochStride]
  int watcher;                                       // block holding the watcher role, or -1
};

__device__ inline unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// System-scope accesses to the words of a record (8 bytes, single-copy atomic).
__device__ inline std::uint64_t load_word_relaxed(const std::uint64_t* p) {
  return cuda::atomic_ref<std::uint64_t, cuda::thread_scope_system>(*const_cast<std::uint64_t*>(p))
      .load(cuda::memory_order_relaxed);
}
__device__ inline std::uint64_t load_word_acquire(const std::uint64_t* p) {
  return cuda::atomic_ref<std::uint64_t, cuda::thread_scope_system>(*const_cast<std::uint64_t*>(p))
      .load(cuda::memory_order_acquire);
}
__device__ inline void store_word_relaxed(std::uint64_t* p, std::uint64_t v) {
  cuda::atomic_ref<std::uint64_t, cuda::thread_scope_system>(*p).store(v,
                                                                       cuda::memory_order_relaxed);
}

// Deep idle (thread 0): an eventcount on this GPU's epoch. Returns once the record's type word
// `type_word` carries `tag` (the slot's next use is being written; the caller reads the whole
// record again). Reads of host memory: one per epoch change, plus the watcher's doorbell polls.
__device__ inline void deep_idle(const std::uint64_t* type_word, std::uint32_t tag,
                                 const ResidentArgs& a, unsigned long long& polls) {
  auto* idle = static_cast<DeviceIdle*>(a.idle);
  const int me = static_cast<int>(blockIdx.x);
  cuda::atomic_ref<std::uint32_t, cuda::thread_scope_device> my_epoch(
      idle->epoch[(me % kEpochCopies) * kEpochStride]);
  cuda::atomic_ref<int, cuda::thread_scope_device> watcher(idle->watcher);
  cuda::atomic_ref<std::uint32_t, cuda::thread_scope_system> doorbell(*a.doorbell);
  for (;;) {
    // acquire, device scope: pairs with the watcher's release stores of the epoch; whatever
    // the scheduler published before the doorbell value it copied is visible after it.
    const std::uint32_t e = my_epoch.load(cuda::memory_order_acquire);
    // acquire, system scope: pairs with the scheduler's release store of the type word. Read
    // after the epoch: a record written before the ring that produced a later epoch is seen
    // here or makes the epoch move (the eventcount's re-check).
    const std::uint32_t seen = tag_of(load_word_acquire(type_word));
    ++polls;
    a.polls[blockIdx.x] = polls;  // counted while idle too: the idle pool's traffic
    if (seen == tag) {
      int mine = me;
      // relaxed: the role is a hint that one block polls the doorbell; a vacancy is filled
      // by another deep-idle block within kDeepIdleSleepNs, and a new watcher compares the
      // doorbell with the published epoch, so no ring is missed.
      watcher.compare_exchange_strong(mine, -1, cuda::memory_order_relaxed);
      return;
    }
    const unsigned long long since = global_ns();
    for (;;) {
      int vacant = -1;
      // relaxed: see above.
      const bool watching = watcher.load(cuda::memory_order_relaxed) == me ||
                            watcher.compare_exchange_strong(vacant, me, cuda::memory_order_relaxed);
      if (watching) {
        // acquire, system scope: pairs with the scheduler's release increment of the doorbell
        // (made after its records' stores).
        const std::uint32_t d = doorbell.load(cuda::memory_order_acquire);
        ++polls;
        cuda::atomic_ref<std::uint32_t, cuda::thread_scope_device> first(idle->epoch[0]);
        // relaxed: only the watcher writes the epoch; it reads back its own last value.
        if (d != first.load(cuda::memory_order_relaxed)) {
          for (int c = 0; c < kEpochCopies; ++c) {
            cuda::atomic_ref<std::uint32_t, cuda::thread_scope_device> copy(
                idle->epoch[c * kEpochStride]);
            // release, device scope: pairs with the deep-idle blocks' acquire loads; carries
            // the doorbell's happens-before (the scheduler's record stores) to them.
            copy.store(d, cuda::memory_order_release);
          }
        }
        a.polls[blockIdx.x] = polls;  // the watcher's reads are the idle pool's traffic
        __nanosleep(kWatcherPollNs);
      } else {
        __nanosleep(kDeepIdleSleepNs);
      }
      // acquire: as above.
      if (my_epoch.load(cuda::memory_order_acquire) != e) break;
      if (global_ns() - since >= kDeepIdleSafetyPollNs) break;
    }
  }
}

// The block's three roles (docs/gpu.md, "Inside a block"): warp 0, the loader, polls the ring
// and reads payloads into shared memory; the task threads (every warp after the second) run
// the tasks and write their results back into the slots; warp 1, the publisher, stores each
// task's FINISHED. Polling and publication each stall the warp that does them for about a
// PCIe round trip (~1 us; bench/results/h100/probes/fence_probe-*.txt); on warps of their own
// the stalls overlap the tasks instead of delaying them.
//
// Hand-offs. The loader gives the task threads a run of slots at a time through named barrier
// kFullBarrier (it arrives, they wait) and takes slots back a run at a time through
// kFreeBarrier (they arrive, it waits), before it hands over the next run: so a run is loaded
// while the previous one runs, and every shared-memory word passes between the two sides
// through a barrier (compute-sanitizer racecheck models named barriers, not an mbarrier whose
// producer does not wait: scripts/probes/mbarrier_racecheck_probe.cu). The publisher reads no
// shared memory: it waits on one mbarrier per slot (task ended) and one for the block's end.
inline constexpr unsigned kRoleWarps = 2;
inline constexpr unsigned kRoleThreads = kRoleWarps * 32;
inline constexpr unsigned kTaskBarrier = BlockContext::kBarrier;  // the task threads
inline constexpr unsigned kFullBarrier = 2;                       // loader -> task threads
inline constexpr unsigned kFreeBarrier = 3;                       // task threads -> loader

// While the task threads run a run, the loader polls for the next one with back-off from
// kFirstBackoffAfterTaskNs doubling up to kBusyPollBackoffNs: a block running long tasks reads
// host memory a few times per run, not once a microsecond.
#if defined(WEFT_PROBE_BUSY_BACKOFF_NS)
inline constexpr unsigned kBusyPollBackoffNs = WEFT_PROBE_BUSY_BACKOFF_NS;
#else
inline constexpr unsigned kBusyPollBackoffNs = 16384;
#endif
// The loader's first back-off after it loaded tasks: the scheduler needs about this long to
// collect the slots and load the next tasks, and polling sooner only takes the line away from
// the CPU's cache while it writes it.
inline constexpr unsigned kFirstBackoffAfterTaskNs = 512;
// How long the loader naps while every slot holds a task the publisher has yet to publish.
inline constexpr unsigned kLoaderNapNs = 128;

__device__ inline unsigned shared_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
// mbarrier (sm_80+). Without .sem/.scope, PTX makes an arrival a release and a completed wait
// an acquire, both at block scope.
__device__ inline void mbar_init(std::uint64_t* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(shared_address(bar)), "r"(count)
               : "memory");
}
__device__ inline void mbar_arrive(std::uint64_t* bar) {
  asm volatile("{\n\t.reg .b64 st;\n\tmbarrier.arrive.shared::cta.b64 st, [%0];\n\t}" ::"r"(
                   shared_address(bar))
               : "memory");
}
// Whether the phase of parity `parity` has completed; does not wait.
__device__ inline bool mbar_test(std::uint64_t* bar, unsigned parity) {
  unsigned done;
  asm volatile(
      "{\n\t.reg .pred p;\n\tmbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
      "selp.u32 %0, 1, 0, p;\n\t}"
      : "=r"(done)
      : "r"(shared_address(bar)), "r"(parity)
      : "memory");
  return done != 0;
}
// The same, but the thread may be suspended in hardware until the phase completes or a
// system-dependent time limit passes.
__device__ inline bool mbar_try_wait(std::uint64_t* bar, unsigned parity) {
  unsigned done;
  asm volatile(
      "{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
      "selp.u32 %0, 1, 0, p;\n\t}"
      : "=r"(done)
      : "r"(shared_address(bar)), "r"(parity)
      : "memory");
  return done != 0;
}
// Named barriers: bar.sync waits, bar.arrive does not; `count` threads in all, whole warps.
__device__ inline void named_sync(unsigned id, unsigned count) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
}
__device__ inline void named_arrive(unsigned id, unsigned count) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(count) : "memory");
}

// The block's shared state besides the payloads.
struct BlockShared {
  std::uint64_t done[kMaxRingDepth];  // task threads -> publisher: slot j's task has ended
  std::uint64_t pub[kMaxRingDepth];   // publisher -> loader: slot j's ended word is stored
  std::uint64_t quit;                 // task threads -> publisher: the block ends
  std::uint32_t type[kMaxRingDepth];  // slot j's task type and payload size (loader)
  std::uint32_t size[kMaxRingDepth];
  // Loader -> task threads (with the run): the result tag of slot j's task.
  std::uint32_t result_tag[kMaxRingDepth];
  // The loader's own: slot j's uses so far, and while a poll checks a record at ring distance
  // t, the lowest index of its words that did not carry the tag expected.
  std::uint32_t use[kMaxRingDepth];
  std::uint32_t first_stale[kMaxRingDepth];
  // The run handed over (loader; read by the task threads after kFullBarrier): first slot,
  // number of slots, and whether the block ends instead.
  std::uint32_t run_first, run_count, run_exit;
};

// What one read of the records from the ring position found: `count` records in a row that
// hold their slot's next task in full, or (count 0) an EXIT record at the position.
struct RecordsFound {
  unsigned count;
  bool exit;
};

// Words of a record a block reads: the headers (words 0 and 1) and the payload words (words 2
// and 3 are the block's own).
template <std::uint32_t kRecordWords>
inline constexpr unsigned kReadWords = kRecordWords - 2;
// Records one pass of read_records covers: one word per lane. A strong (system-scope) load
// waits for its data before the warp issues another: one lane loading 8 words in a row took 8
// round trips, an acquire load in a divergent branch after relaxed ones two, and one load per
// lane in a single instruction one, acquire or not (1.3 us; bench/results/h100/probes/
// poll_read-8bb7057.txt). A record of more than 32 words (a payload over 120 bytes) takes a
// pass, and a round trip, per 32 words.
template <std::uint32_t kRecordWords>
inline constexpr unsigned kRecordsPerPass =
    kReadWords<kRecordWords> >= 32 ? 1u : 32u / kReadWords<kRecordWords>;

// Warp 0: one read of the records of the `window` slots from ring position `pos` (ring order,
// window <= kRecordsPerPass), their words copied into shared memory (type, size, payload) as
// they arrive, and each record checked: it holds its slot's next use n in full when words 0, 1
// and the payload words its size covers carry request_tag(n) (a record read while the
// scheduler writes it may be part old, part new: slot.hpp). Every lane loads one word per pass
// with acquire (system scope: pairs with the scheduler's release store of word 0, and costs no
// more than a relaxed load when the whole warp loads in one instruction). The slots in the
// window are free: neither the task threads nor the publisher use them.
template <std::uint32_t kRecordWords, std::uint32_t kSharedWords, std::size_t kCapacity>
__device__ inline RecordsFound read_records(BlockShared& sh, std::uint32_t* payload_words32,
                                            unsigned char* ring, std::size_t slot_stride,
                                            unsigned depth, unsigned pos, unsigned window) {
  const unsigned lane = threadIdx.x;  // warp 0
  // In shared memory slot j's payload is kSharedWords 4-byte words from j * kSharedWords.
  constexpr unsigned kRead = kReadWords<kRecordWords>;
  if (lane < window) sh.first_stale[lane] = kRecordWords;
  __syncwarp();
  const unsigned words = window * kRead;
  for (unsigned base = 0; base < words; base += 32) {
    const unsigned i = base + lane;
    if (i < words) {
      const unsigned t = i / kRead, o = i % kRead;
      const unsigned w = o < 2 ? o : o + 2;  // words 0, 1, then 4...
      const unsigned j = (pos + t) % depth;
      const std::uint64_t v = load_word_acquire(
          reinterpret_cast<const std::uint64_t*>(ring + j * slot_stride) + w);
      if (tag_of(v) != request_tag(sh.use[j] + 1)) {
        atomicMin(&sh.first_stale[t], w);
      } else if (w == kTypeWord) {
        sh.type[j] = data_of(v);
      } else if (w == kSizeWord) {
        sh.size[j] = data_of(v);
      } else {
        payload_words32[j * kSharedWords + (w - kPayloadWord)] = data_of(v);
      }
    }
  }
  __syncwarp();  // every lane's shared writes and atomics before the checks below
  bool whole = false, is_exit = false;
  if (lane < window) {
    const unsigned j = (pos + lane) % depth;
    const std::uint32_t stale = sh.first_stale[lane];
    if (stale > kSizeWord) {  // the headers are this use's
      const std::uint32_t size = sh.size[j];
      is_exit = size == kExitMark;
      // A size past the capacity (no scheduler sends one) fails with bad_payload_size; its
      // payload is not read.
      whole = is_exit || size > kCapacity || stale >= kPayloadWord + payload_words(size);
    }
  }
  const unsigned tasks = __ballot_sync(0xFFFFFFFFu, whole && !is_exit);
  const unsigned count = ~tasks == 0u ? 32u : static_cast<unsigned>(__ffs(~tasks)) - 1u;
  const bool exit_first = __shfl_sync(0xFFFFFFFFu, whole && is_exit ? 1 : 0, 0) != 0;
  if (lane < count) {
    const unsigned j = (pos + lane) % depth;
    const std::uint32_t use = sh.use[j] + 1;
    sh.use[j] = use;
    sh.result_tag[j] = result_tag(use);
  }
  __syncwarp();
  return RecordsFound{count, count == 0 && exit_first};
}

// The loader: waits until the slot at ring position `pos` holds its next use (a task or EXIT)
// and returns what read_records found, the tasks' words in shared memory. A poll reads the
// record at pos alone (one line of host memory for small payloads: reads of more lines per
// poll took the busy pool's host-memory traffic from 3.4% to 12.4% of the pinned bandwidth and
// slowed the lanes' writes, bench/results/h100/probes/tagged_bench_ab-e8ef7ec/); when it holds
// a task and `busy()` (the task threads hold a run, or the publisher is behind), one more pass
// reads the records after it (up to the `usable` free slots), whose tasks join the run: that
// trip overlaps the tasks in hand. While busy, polls back off from `first_backoff` doubling up
// to kBusyPollBackoffNs; otherwise in warm idle (doubling up to kMaxPollBackoffNs), then in
// deep idle (lane 0) after warm_idle_ns (the scheduler rings the doorbell only for blocks with
// nothing in flight). A standby block stays in warm idle with a back-off of at most
// kStandbyBackoffNs.
template <std::uint32_t kRecordWords, std::uint32_t kSharedWords, std::size_t kCapacity,
          class Busy>
__device__ inline RecordsFound poll_ring(BlockShared& sh, std::uint32_t* payload_words32,
                                         unsigned char* ring, unsigned depth, unsigned pos,
                                         unsigned usable, const ResidentArgs& a,
                                         unsigned long long& polls, unsigned first_backoff,
                                         bool standby, Busy busy) {
  const unsigned lane = threadIdx.x;  // warp 0
  unsigned backoff = first_backoff;
  unsigned long long since = global_ns();
  bool was_busy = busy();
#if defined(WEFT_POOL_TRACE)
  unsigned long long reads = 0, torn = 0;
#endif
  for (;;) {
    RecordsFound found = read_records<kRecordWords, kSharedWords, kCapacity>(
        sh, payload_words32, ring, a.slot_stride, depth, pos, 1);
    // Host memory read, in 64-byte lines.
    if (lane == 0) polls += (a.slot_stride + 63) / 64;
    // busy() asked now: a standby block does not re-evaluate was_busy between its polls (with
    // was_busy, every lone task on an idle pool paid the extra pass, ~1.3 us: latency link
    // 3.0 -> 5.0 us, bench/results/h100/probes/tagged_variants-d08f45b.txt).
#if defined(WEFT_PROBE_NO_EXTENSION)
    if (false) {
#else
    if (found.count != 0 && usable > 1 && busy()) {
#endif
      const unsigned more = min(usable - 1, kRecordsPerPass<kRecordWords>);
      found.count += read_records<kRecordWords, kSharedWords, kCapacity>(
                         sh, payload_words32, ring, a.slot_stride, depth, (pos + 1) % depth, more)
                         .count;
      if (lane == 0) polls += (more * a.slot_stride + 63) / 64;
    }
#if defined(WEFT_POOL_TRACE)
    ++reads;
    if (found.count == 0 && !found.exit && sh.first_stale[0] > kTypeWord) ++torn;
    if (found.count != 0 && lane == 0) {
      g_weft_trace[5] = reads;
      g_weft_trace[6] = torn;
    }
#endif
    if (found.count != 0 || found.exit) return found;
    if (lane == 0) a.polls[blockIdx.x] = polls;  // it may wait here for the pool's life
    if (standby) {
      __nanosleep(kStandbyBackoffNs);
      continue;
    }
    const bool is_busy = busy();  // uniform: an mbarrier test by lane 0, shuffled
    if (is_busy != was_busy) {    // the task threads ended their run
      was_busy = is_busy;
      since = global_ns();
      backoff = first_backoff;
    }
    if (is_busy) {
      __nanosleep(backoff);
      backoff = backoff < kBusyPollBackoffNs ? backoff * 2 : kBusyPollBackoffNs;
      continue;
    }
    // Lane 0's clock decides for the warp: every lane must take the same branch (the shuffle
    // above and the __syncwarp below need the whole warp).
    const int expired = __shfl_sync(0xFFFFFFFFu, global_ns() - since >= a.warm_idle_ns ? 1 : 0, 0);
    if (expired != 0) {
      if (lane == 0) {
        const auto* head = reinterpret_cast<const std::uint64_t*>(ring + pos * a.slot_stride);
        deep_idle(head + kTypeWord, request_tag(sh.use[pos] + 1), a, polls);
      }
      __syncwarp();
      since = global_ns();
      backoff = 32;
      continue;  // read the record again
    }
    __nanosleep(backoff);
    backoff = backoff < kMaxPollBackoffNs ? backoff * 2 : kMaxPollBackoffNs;
  }
}

// Warp 0: loads runs of tasks into shared memory and hands them to the task threads, in ring
// order, until it reads EXIT.
template <std::uint32_t kRecordWords, std::uint32_t kSharedWords, std::size_t kCapacity>
__device__ void load_loop(BlockShared& sh, std::uint32_t* payload_words32, unsigned char* ring,
                          const ResidentArgs& a, unsigned task_threads, bool standby) {
  const unsigned depth = a.ring_depth;
  const unsigned lane = threadIdx.x;
  const unsigned pair = task_threads + 32;  // the named barriers' count: task threads + loader
  unsigned long long polls = 0;
  unsigned pos = 0;          // the ring slot loaded next
  unsigned held = 0;         // slots of the run the task threads hold (0: none)
  std::uint32_t loaded = 0;  // tasks loaded, and of them published (wrap; differences)
  std::uint32_t published = 0;
  unsigned oldest = 0;           // lane 0: the slot of the oldest task not known published
  std::uint32_t pub_parity = 0;  // lane 0: bit j, the parity of slot j's next pub phase
  bool after_tasks = false;      // the last poll found tasks
  for (unsigned j = lane; j < depth; j += 32) sh.use[j] = 0;
  __syncwarp();
  // Counts the tasks the publisher has published since (a test of each slot's pub mbarrier,
  // in ring order; acquire, block scope: the publisher's ended store happens before).
  auto advance = [&] {
    if (lane == 0) {
      while (published != loaded && mbar_test(&sh.pub[oldest], (pub_parity >> oldest) & 1u)) {
        pub_parity ^= 1u << oldest;
        oldest = (oldest + 1) % depth;
        ++published;
      }
    }
    published = __shfl_sync(0xFFFFFFFFu, published, 0);
  };
  // Whether the block has tasks in flight (loaded, not yet published): no deep idle then.
  auto busy = [&] {
    advance();
    return published != loaded;
  };
  for (;;) {
    // Slots not to read: those of the run the task threads hold (given back only at
    // kFreeBarrier) and those whose task is not yet published (their pub mbarrier's phase is
    // still to complete; a slot is loaded again only after its last phase completed): the last
    // max(loaded - published, held) slots before pos.
    advance();
    const unsigned in_use = max(loaded - published, held);
    if (in_use == depth) {
      if (held != 0 && held >= loaded - published) {
        named_sync(kFreeBarrier, pair);  // the task threads hold the whole ring: take it back
        held = 0;
      } else {
        __nanosleep(kLoaderNapNs);  // the publisher has not caught up
      }
      continue;
    }
    if (after_tasks) __nanosleep(kFirstBackoffAfterTaskNs);  // see kFirstBackoffAfterTaskNs
    // The records and their payloads in one read (one round trip over PCIe), into slots the
    // task threads gave back with the run before the one they hold.
    const RecordsFound found = poll_ring<kRecordWords, kSharedWords, kCapacity>(
        sh, payload_words32, ring, depth, pos, depth - in_use, a, polls,
        after_tasks ? 256u : 32u, standby, busy);
    const unsigned count = found.count;
    if (lane == 0) a.polls[blockIdx.x] = polls;  // only this thread writes it; read at the end
    if (count != 0) {
      WEFT_TRACE(0);
      WEFT_TRACE(1);
    }
    // Take back the run the task threads hold (they arrive when they have ended it): its
    // slots may be loaded again, and the run words below rewritten.
    if (held != 0) named_sync(kFreeBarrier, pair);
    if (lane == 0) {
      sh.run_first = pos;
      sh.run_count = count;
      sh.run_exit = count == 0 ? 1u : 0u;  // EXIT at pos: the block ends after the runs before
    }
    // Every lane's shared-memory writes (payloads, headers, tags, run words) happen before the
    // task threads' reads: they wait at this barrier; this warp does not.
    named_arrive(kFullBarrier, pair);
    if (count == 0) return;
    loaded += count;
    held = count;
    pos = (pos + count) % depth;
    after_tasks = true;
  }
}

// Warp 1: stores each task's ended word as soon as the task threads end it, in ring order,
// with one system-scope release store; ends when the task threads end. Lane l counts the uses
// of slot l (the tag), as the loader does: both go through the ring in order.
__device__ inline void publish_loop(BlockShared& sh, unsigned char* ring, const ResidentArgs& a) {
  const unsigned depth = a.ring_depth;
  const unsigned lane = threadIdx.x - 32;
  unsigned pos = 0;
  std::uint32_t parity = 0;    // bit j: the parity of slot j's next done phase
  std::uint32_t my_uses = 0;   // lane l < depth: slot l's tasks published so far
  for (;;) {
    // acquire, block scope (the completed wait): pairs with the task threads' arrival; the
    // task's global-memory writes happen before the release store below.
    // Every lane waits (with lane 0 alone waiting, 67d4a79, one task's publication came 0.5 us
    // later: bench/results/h100/probes/session-67d4a79.txt); lane 0's outcome decides for the
    // warp, so that the lanes cannot take different branches, and lane 0 is the lane that
    // stores below.
    const bool ended =
        __shfl_sync(0xFFFFFFFFu, mbar_try_wait(&sh.done[pos], (parity >> pos) & 1u) ? 1 : 0, 0);
    if (!ended) {
      // The task threads arrive on quit after their last done: a quit seen with this slot's
      // task not ended means there is none (re-tested after quit, which orders the two).
      const bool quit =
          lane == 0 && mbar_test(&sh.quit, 0) && !mbar_test(&sh.done[pos], (parity >> pos) & 1u);
      if (__shfl_sync(0xFFFFFFFFu, quit ? 1 : 0, 0) != 0) return;
      continue;
    }
    parity ^= 1u << pos;
    if (lane == pos) ++my_uses;
    const std::uint32_t use = __shfl_sync(0xFFFFFFFFu, my_uses, pos);
    WEFT_TRACE(3);
    if (lane == 0) {
      auto* ended_word =
          reinterpret_cast<std::uint64_t*>(ring + pos * a.slot_stride) + kEndedWord;
      // release, system scope: pairs with the scheduler's acquire load of the ended word (a
      // fence, then the store: the task's global-memory writes, status and results are
      // visible to whatever the scheduler's delivery leads to; the scheduler checks the tags of
      // status and results all the same).
      cuda::atomic_ref<std::uint64_t, cuda::thread_scope_system>(*ended_word)
          .store(tagged(result_tag(use), 0), cuda::memory_order_release);
      WEFT_TRACE(4);
      // release, block scope: pairs with the loader's test; the store above happens before.
      mbar_arrive(&sh.pub[pos]);
    }
    __syncwarp();
    pos = (pos + 1) % depth;
  }
}

template <class Types, std::size_t Capacity>
__global__ void resident_kernel(ResidentArgs a) {
  // The payload in shared memory: a whole number of 16-byte words (the task types' Payload
  // alignment); a record carries it 4 bytes a word (kPayloadWords words).
  constexpr std::uint32_t kWords = (Capacity + 15) / 16;
  constexpr std::uint32_t kRecordWords = static_cast<std::uint32_t>(record_words(Capacity));
  static_assert(kRecordWords - kPayloadWord <= kWords * 4, "a record's payload fits its copy");
  const unsigned depth = a.ring_depth;
  extern __shared__ __align__(16) unsigned char shared[];
  auto* payloads = reinterpret_cast<uint4*>(shared);          // slot j: kWords words at j*kWords
  unsigned char* task_shared = shared + depth * kWords * 16;  // the types' own space
  __shared__ BlockShared sh;

  const int block = a.first_block + static_cast<int>(blockIdx.x);
  unsigned char* ring =
      static_cast<unsigned char*>(a.rings) + static_cast<std::size_t>(block) * a.ring_stride;
  const unsigned threads = blockDim.x - kRoleThreads;  // task threads
  if (threadIdx.x == 0) {
    for (unsigned j = 0; j < depth; ++j) {
      mbar_init(&sh.done[j], 1);  // task thread 0
      mbar_init(&sh.pub[j], 1);   // the publisher's lane 0
    }
    mbar_init(&sh.quit, 1);  // task thread 0
  }
  __syncthreads();  // the mbarriers are initialised; the only block-wide barrier
  if (threadIdx.x < 32) {
    load_loop<kRecordWords, kWords * 4, Capacity>(
        sh, reinterpret_cast<std::uint32_t*>(payloads), ring, a, threads,
        a.standby != nullptr && a.standby[blockIdx.x] != 0);
    return;
  }
  if (threadIdx.x < kRoleThreads) {
    publish_loop(sh, ring, a);
    return;
  }
  // The task threads: run after run.
  const unsigned me = threadIdx.x - kRoleThreads;
  auto slot = [&](unsigned j) { return reinterpret_cast<std::uint64_t*>(ring + j * a.slot_stride); };
  const BlockContext ctx(static_cast<int>(me), static_cast<int>(threads), block, task_shared);
  for (;;) {
    named_sync(kFullBarrier, threads + 32);  // the loader's run (it arrives)
    if (sh.run_exit != 0u) {
      if (me == 0) mbar_arrive(&sh.quit);  // release: after every done arrival before it
      return;
    }
    const unsigned first = sh.run_first, count = sh.run_count;
    for (unsigned t = 0; t < count; ++t) {
      const unsigned j = (first + t) % depth;
      const std::uint32_t size = sh.size[j];
      uint4* mine = payloads + j * kWords;
      const TaskStatus status = size <= Capacity ? Types::dispatch(sh.type[j], mine, size, ctx)
                                                 : TaskStatus::bad_payload_size;
      // Every task thread's global-memory writes and result words happen before the copy.
      named_sync(kTaskBarrier, threads);
      if (me < 32) {
        WEFT_TRACE(2);
        // The status and the results back into the slot (posted writes over PCIe; relaxed:
        // each vouches for itself by its tag) by the first task warp, before the publisher's
        // release: its fence makes them visible with the ended word. (Written after the
        // arrival instead, beside the fence, they reached the host microseconds late: the
        // latency trace's link 2.7 -> 7.3 us, bench/results/h100/probes/
        // tagged_slots_latency_ab-f7aa3fc.txt. Posted writes to host memory are not pushed out
        // by anything but a fence.)
        const std::uint32_t tag = sh.result_tag[j];
        std::uint64_t* out = slot(j);
        const std::uint32_t words = size <= Capacity ? payload_words(size) : 0;
        const auto* result = reinterpret_cast<const std::uint32_t*>(mine);
        for (std::uint32_t i = me; i < words; i += 32) {
          store_word_relaxed(out + kPayloadWord + i, tagged(tag, result[i]));
        }
        if (me == 0) {
          store_word_relaxed(out + kStatusWord, tagged(tag, static_cast<std::uint32_t>(status)));
        }
        __syncwarp();  // the lanes' writes happen before lane 0's arrival
        // release, block scope: pairs with the publisher's wait; with the barrier above, every
        // task thread's writes for this task happen before the publisher's release store.
        if (me == 0) mbar_arrive(&sh.done[j]);
      }
      // The next task may reuse the types' shared memory only after every thread left this
      // one (the copy above reads only this slot's payload words).
    }
    // The run's slots go back to the loader (it waits for this). The task barrier first:
    // without it racecheck reported the first task warp's reads of the last result words
    // against the loader's next writes of that slot (H100 run at 99243b9), although a bare
    // read before a bar.arrive is not reported (scripts/probes/mbarrier_racecheck_probe.cu,
    // variant 9); with it, none.
    named_sync(kTaskBarrier, threads);
    named_arrive(kFreeBarrier, threads + 32);
  }
}

template <class Types, std::size_t Capacity>
int launch_resident(const ResidentArgs& args, int blocks, int threads, std::size_t shared_bytes,
                    void* stream) {
  auto kernel = &resident_kernel<Types, Capacity>;
  if (shared_bytes > 48 * 1024) {
    const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(shared_bytes));
    if (e != cudaSuccess) return static_cast<int>(e);
  }
  // `threads` task threads, plus the loader and publisher warps.
  kernel<<<blocks, threads + static_cast<int>(kRoleThreads), shared_bytes,
           static_cast<cudaStream_t>(stream)>>>(args);
  return static_cast<int>(cudaGetLastError());
}

template <class Types, std::size_t Capacity>
int resident_occupancy(int threads, std::size_t shared_bytes, int* blocks) {
  return static_cast<int>(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      blocks, &resident_kernel<Types, Capacity>, threads + static_cast<int>(kRoleThreads),
      shared_bytes));
}

}  // namespace detail

/// The DeviceProgram of a task-type list and payload capacity (must match the pool's).
template <class Types, std::size_t Capacity>
DeviceProgram device_program() {
  static_assert(Types::kMaxPayload <= Capacity,
                "weft::gpu::device_program: a task type's Payload exceeds the capacity");
  DeviceProgram p;
  p.launch = &detail::launch_resident<Types, Capacity>;
  p.max_blocks_per_sm = &detail::resident_occupancy<Types, Capacity>;
  p.payload_capacity = Capacity;
  p.payload_shared_bytes = ((Capacity + 15) / 16) * 16;
  p.task_shared_bytes = Types::kSharedBytes;
  p.idle_bytes = sizeof(detail::DeviceIdle);
  return p;
}

}  // namespace weft::gpu
