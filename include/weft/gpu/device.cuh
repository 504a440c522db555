// weft/gpu/device.cuh - the resident task-multiplexed kernel (docs/architecture.md). Include it in
// exactly the CUDA translation unit(s) that make a DeviceProgram:
//
//   // tasks.cu
//   #include <weft/gpu/device.cuh>
//   weft::gpu::DeviceProgram my_program() { return weft::gpu::device_program<MyTasks, 64>(); }
//
// Each block serves a ring of slots in pinned host-mapped memory until it reads EXIT. Warp 0
// polls the ring's control line (the slots' state words) with system-scope acquire loads,
// backing off with __nanosleep; a block idle for a while stops reading host memory and sleeps
// on a per-GPU epoch in device memory, which one watcher block moves when the scheduler rings
// the host doorbell (docs/gpu.md, "Idle"). The block copies the run of READY slots into shared
// memory in one pass of 16-byte words, runs the tasks in ring order with all its threads,
// copies each one's results back, and thread 0 publishes each one's FINISHED state with a
// system-scope release store as soon as it ends.
#pragma once

#include <cuda_runtime.h>
#include <cuda/atomic>

#include "weft/gpu/detail/mailbox_record.hpp"
#include "weft/gpu/detail/slot.hpp"
#include "weft/gpu/device_program.hpp"
#include "weft/gpu/record.hpp"
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
// doorbell, the watcher and the epoch (docs/decisions/004-gpu-idle-and-wakeups.md). Each standby
// block reads host memory about once per microsecond (one read in flight), ~0.1% of the pinned
// bandwidth.
inline constexpr unsigned kStandbyBackoffNs = 256;
// The mailbox's server polls like a standby block until it has had no task for this long, then
// every kMaxPollBackoffNs: its reads of host memory slow the ring blocks' (measurably, on batched
// empty tasks: docs/decisions/005-gpu-single-task-paths.md), and a pool fed lone tasks more
// than once per millisecond keeps it fast.
inline constexpr unsigned long long kMailboxSlowPollAfterNs = 1'000'000;
// The epoch is replicated so that 2000 sleeping blocks do not all read one L2 line.
inline constexpr int kEpochCopies = 64;
inline constexpr int kEpochStride = 32;  // words: one copy per 128 bytes

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

__device__ inline bool is_ready_or_exit(std::uint32_t s) {
  return s == static_cast<std::uint32_t>(SlotState::ready) ||
         s == static_cast<std::uint32_t>(SlotState::exit);
}

// ---- Task graphs (docs/decisions/017-gpu-device-dependencies.md; spec/device_graph.pml) ----
// The host backend's HostGraphTable with device-scope atomics: the ready queues (Vyukov's
// bounded queue, a sequence number per cell, its positions claimed by fetch_add and a count of
// the tasks available to take), the counts of unfinished inputs and the poison
// flags in device memory, the records and the completion ring in mapped host memory. Every
// read of the table's device memory is an atomic (relaxed unless said), or for the records'
// copy a load past L1 (__ldcg): the host rewrites the table for each graph, and a plain load
// could find an L1 line of the last.
using DeviceScopeU32 = cuda::atomic_ref<std::uint32_t, cuda::thread_scope_device>;
using DeviceScopeU64 = cuda::atomic_ref<unsigned long long, cuda::thread_scope_device>;

// Ready queue q's cell for position pos (kGraphNormal, kGraphUrgent: the same protocol each).
__device__ inline unsigned long long* graph_cell(const DeviceGraphArgs& g, int q,
                                                 unsigned long long pos) {
  return g.cells + 2 * (static_cast<std::size_t>(q) * g.slots + (pos & (g.slots - 1)));
}

// Ready queue q's count of tasks put and not yet claimed by a take (signed: a take that finds
// none backs its decrement out).
__device__ inline DeviceScopeU64 graph_available(const DeviceGraphArgs& g, int q) {
  return DeviceScopeU64(g.counters[kGraphQueueWords * q + kGraphAvailable]);
}

// Whether ready queue q has a task to take (a look, not a take).
__device__ inline bool graph_queue_has_work(const DeviceGraphArgs& g, int q) {
  // relaxed: a hint; the take's claim decides.
  return static_cast<long long>(graph_available(g, q).load(cuda::memory_order_relaxed)) > 0;
}

// Whether a ready queue has a task to take.
__device__ inline bool graph_has_work(const DeviceGraphArgs& g) {
  if (g.records == nullptr) return false;
  return graph_queue_has_work(g, kGraphUrgent) || graph_queue_has_work(g, kGraphNormal);
}

// One thread: a task from ready queue q, or -1 (spec/device_graph.pml's take). It claims one
// available task, then a position, each with one read-modify-write, never retried (the first
// backs out when no task was left): with hundreds of blocks taking at once, a compare-and-swap
// on the head would make the takes a chain of failed retries, one success per round trip to L2
// (docs/decisions/017-gpu-device-dependencies.md). The cell at the position was claimed by an
// enqueue, whose put is at most in flight: the count grows only once a put is done.
__device__ inline int graph_take_from(const DeviceGraphArgs& g, int q) {
  if (!graph_queue_has_work(g, q)) return -1;
  DeviceScopeU64 available = graph_available(g, q);
  // relaxed: a claim; the cell's sequence (acquire, below) orders the task's read.
  if (static_cast<long long>(available.fetch_sub(1, cuda::memory_order_relaxed)) <= 0) {
    available.fetch_add(1, cuda::memory_order_relaxed);  // none after all: back out
    return -1;
  }
  const unsigned long long pos = DeviceScopeU64(g.counters[kGraphQueueWords * q + kGraphDequeueAt])
                                     .fetch_add(1, cuda::memory_order_relaxed);
  unsigned long long* cell = graph_cell(g, q, pos);
  // acquire: pairs with graph_put's release of the cell (the task, and what its enqueuer wrote
  // before: the inputs' results and poison).
  while (DeviceScopeU64(cell[0]).load(cuda::memory_order_acquire) != pos + 1) {
  }
  const auto t = static_cast<int>(DeviceScopeU64(cell[1]).load(cuda::memory_order_relaxed));
  // release: the read above happens before the cell's next put (one lap later).
  DeviceScopeU64(cell[0]).store(pos + g.slots, cuda::memory_order_release);
  return t;
}

// One thread: a ready task, an urgent one first, or -1.
__device__ inline int graph_take(const DeviceGraphArgs& g) {
  const int t = graph_take_from(g, kGraphUrgent);
  return t >= 0 ? t : graph_take_from(g, kGraphNormal);
}

// One thread: puts task t into the ready queue's cell for position `pos`, which its warp
// claimed (graph_count_down). The cell is free for that lap by then: every task of a graph is
// enqueued at most once, the queue has a cell for each, and the table takes the next graph
// only once every task of the last was taken; the wait is for the take's release all the same.
__device__ inline void graph_put(const DeviceGraphArgs& g, int q, unsigned long long pos,
                                 std::uint32_t t) {
  unsigned long long* cell = graph_cell(g, q, pos);
  // acquire: pairs with graph_take's release (the cell's previous task was read).
  while (DeviceScopeU64(cell[0]).load(cuda::memory_order_acquire) != pos) {
  }
  DeviceScopeU64(cell[1]).store(t, cuda::memory_order_relaxed);
  // release: the task, and everything this thread's block wrote before it (a finished task's
  // results and poison), to the block whose take acquires it.
  DeviceScopeU64(cell[0]).store(pos + 1, cuda::memory_order_release);
}

// Whether task t may run: every input ended ok and the pool is not shutting down (a request
// to stop early; a block that misses it runs t, also a correct end).
__device__ inline bool graph_runnable(const DeviceGraphArgs& g, std::uint32_t t) {
  return DeviceScopeU32(g.poisoned[t]).load(cuda::memory_order_relaxed) == 0 &&
         DeviceScopeU32(*g.cancelled).load(cuda::memory_order_relaxed) == 0;
}

// graph_count_down's keep, for one batch of successors (lane: successor s, `completes` when this
// warp took its count to zero, at `level`): returns the successor kept, or -1, in every lane,
// and clears `completes` in the keeping lane so that the batch's puts leave it out. Its count
// reached zero in this warp's acq_rel decrement, as for a task it would enqueue: its inputs'
// writes and poison are visible to this block, which runs it next.
__device__ inline int graph_keep_one(const DeviceGraphArgs& g, std::uint32_t s, bool& completes,
                                     int level, unsigned lane) {
  const unsigned urgent = __ballot_sync(0xFFFFFFFFu, completes && level == kGraphUrgent);
  unsigned pick = urgent;
  if (pick == 0u) {
    const unsigned normal = __ballot_sync(0xFFFFFFFFu, completes);
    // A look at the urgent queue (lane 0's, for the warp) only when a normal one could be kept.
    if (normal != 0u &&
        __shfl_sync(0xFFFFFFFFu, lane == 0 && graph_queue_has_work(g, kGraphUrgent) ? 1 : 0, 0) ==
            0) {
      pick = normal;
    }
  }
  if (pick == 0u) return -1;
  const unsigned keeper = static_cast<unsigned>(__ffs(pick)) - 1u;
  if (lane == keeper) completes = false;
  return static_cast<int>(__shfl_sync(0xFFFFFFFFu, s, keeper));
}

// The first task warp, converged, once task t ended with `status` (the same in every lane):
// the successor step of spec/device_graph.pml for 32 successors at a time, one a lane. Each lane
// poisons its successor unless t ended ok, then counts its input down in one read-modify-write
// (the poison first: mutant 2); the successors the warp completed get consecutive queue
// positions from one claim (a fetch_add, as the model's enqueue) and are put there a lane each.
// A warp, not one thread: one thread would keep the critical path waiting for a chain of
// dependent atomics per successor.
// With `may_keep` (a task taken from the ready queue, not a root from a ring slot) one successor
// completed is kept instead (the model's KEEP; decision 042): the block runs it next, without
// the queue's claim, put and take, which cost a dependent step about as much as the count
// itself. It keeps the first urgent one, else the first normal one while the urgent queue looks
// empty (a task in it would otherwise wait behind this block's next run). Returns the task
// kept, or -1, in every lane.
__device__ inline int graph_count_down(const DeviceGraphArgs& g, std::uint32_t t, TaskStatus status,
                                       unsigned lane, bool may_keep) {
  const std::uint32_t begin = DeviceScopeU32(g.successor_start[t]).load(cuda::memory_order_relaxed);
  const std::uint32_t end =
      DeviceScopeU32(g.successor_start[t + 1]).load(cuda::memory_order_relaxed);
  int kept = -1;
  for (std::uint32_t first = begin; first < end; first += 32) {  // uniform
    const std::uint32_t i = first + lane;
    std::uint32_t s = 0;
    bool completes = false;
    int level = kGraphNormal;
    if (i < end) {
      s = DeviceScopeU32(g.successors[i]).load(cuda::memory_order_relaxed);
      // relaxed: published by the release half of the decrement below.
      if (status != TaskStatus::ok)
        DeviceScopeU32(g.poisoned[s]).store(1, cuda::memory_order_relaxed);
      // acq_rel: the release sequence of s's count carries every input's results and poison
      // to the thread that takes it to zero (acquire), which enqueues s. The block's results
      // reach this lane's release through the task barrier and the warp's __syncwarp before.
      completes = DeviceScopeU32(g.inputs[s]).fetch_sub(1, cuda::memory_order_acq_rel) == 1;
      // relaxed: written by the host before the graph's roots were loaded, like the counts.
      if (completes && DeviceScopeU32(g.urgent[s]).load(cuda::memory_order_relaxed) != 0)
        level = kGraphUrgent;
    }
    if (may_keep && kept < 0) kept = graph_keep_one(g, s, completes, level, lane);
    for (int q = kGraphUrgent; q >= kGraphNormal; --q) {  // uniform
      const unsigned ready = __ballot_sync(0xFFFFFFFFu, completes && level == q);
      if (ready == 0u) continue;
      unsigned long long at = 0;
      if (lane == 0) {
        // relaxed: the claim orders nothing; each cell's sequence publishes its task.
        at = DeviceScopeU64(g.counters[kGraphQueueWords * q + kGraphEnqueueAt])
                 .fetch_add(static_cast<unsigned long long>(__popc(ready)),
                            cuda::memory_order_relaxed);
      }
      at = __shfl_sync(0xFFFFFFFFu, at, 0);
      if (completes && level == q) {
        graph_put(g, q, at + static_cast<unsigned>(__popc(ready & ((1u << lane) - 1u))), s);
      }
      __syncwarp();  // the puts are done before they count as available
      // relaxed: the count only bounds how long a take waits for a put (these are done); each
      // cell's sequence publishes its task.
      if (lane == 0) graph_available(g, q).fetch_add(__popc(ready), cuda::memory_order_relaxed);
    }
  }
  __syncwarp();
  return kept;
}

// One thread: enqueues task t, kept by graph_count_down and not run, at its level (the model's
// enqueue: a claim, the put, then it counts as available). Its count reached zero in this block
// (acquire), and the block's barriers order that before the put's release.
__device__ inline void graph_requeue(const DeviceGraphArgs& g, std::uint32_t t) {
  // relaxed: written by the host before the graph's roots were loaded, like the counts.
  const int q = DeviceScopeU32(g.urgent[t]).load(cuda::memory_order_relaxed) != 0 ? kGraphUrgent
                                                                                  : kGraphNormal;
  // relaxed: the claim orders nothing; the cell's sequence publishes the task.
  const unsigned long long at = DeviceScopeU64(g.counters[kGraphQueueWords * q + kGraphEnqueueAt])
                                    .fetch_add(1, cuda::memory_order_relaxed);
  graph_put(g, q, at, t);
  // relaxed: as in graph_count_down.
  graph_available(g, q).fetch_add(1, cuda::memory_order_relaxed);
}

// A warp's lane 0's status, in every lane: the one its task's slot or record reports.
__device__ inline TaskStatus uniform(TaskStatus status) {
  return static_cast<TaskStatus>(__shfl_sync(0xFFFFFFFFu, static_cast<unsigned>(status), 0));
}

// One thread, after count_down: reports task t (taken from the ready queue) to the lane through
// the completion ring, which has an entry for every task of a graph, so it is never full.
__device__ inline void graph_publish(const DeviceGraphArgs& g, std::uint32_t t, TaskStatus status) {
  const unsigned long long at =
      DeviceScopeU64(g.counters[kGraphClaimed]).fetch_add(1, cuda::memory_order_relaxed);
  unsigned long long* entry = g.completions + 2 * (at & (g.slots - 1));
  using SystemU64 = cuda::atomic_ref<unsigned long long, cuda::thread_scope_system>;
  // relaxed: published by the sequence's release just after.
  SystemU64(entry[1]).store(t | (static_cast<unsigned long long>(status) << 32),
                            cuda::memory_order_relaxed);
  // release, system scope: pairs with the lane's acquire load of the sequence; the task's
  // results (in its record, written by the first task warp before this thread's barrier) are
  // visible with it.
  SystemU64(entry[0]).store(at + 1, cuda::memory_order_release);
}

// Deep idle (thread 0): an eventcount on this GPU's epoch. Returns the slot's state once it
// is READY or EXIT, or, in a kernel that runs graphs, once a ready queue has a task. Reads of
// host memory: one per epoch change, plus the watcher's doorbell polls.
template <bool Graphs>
__device__ inline std::uint32_t deep_idle(
    cuda::atomic_ref<std::uint32_t, cuda::thread_scope_system>& state, const ResidentArgs& a,
    unsigned long long& polls) {
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
    // acquire, system scope: pairs with the scheduler's release store of READY/EXIT. Read
    // after the epoch: a READY stored before the ring that produced a later epoch is seen
    // here or makes the epoch move (the eventcount's re-check).
    const std::uint32_t s = state.load(cuda::memory_order_acquire);
    ++polls;
    a.polls[blockIdx.x] = polls;  // counted while idle too: the idle pool's traffic
    // A graph task in the ready queue (device memory: no read of host memory) wakes it too:
    // it looks at the queue every kDeepIdleSleepNs, so no enqueuer needs to wake it.
    if (is_ready_or_exit(s) || (Graphs && graph_has_work(a.graph))) {
      int mine = me;
      // relaxed: the role is a hint that one block polls the doorbell; a vacancy is filled
      // by another deep-idle block within kDeepIdleSleepNs, and a new watcher compares the
      // doorbell with the published epoch, so no ring is missed.
      watcher.compare_exchange_strong(mine, -1, cuda::memory_order_relaxed);
      return s;
    }
    const unsigned long long since = global_ns();
    for (;;) {
      int vacant = -1;
      // relaxed: see above.
      const bool watching = watcher.load(cuda::memory_order_relaxed) == me ||
                            watcher.compare_exchange_strong(vacant, me, cuda::memory_order_relaxed);
      if (watching) {
        // acquire, system scope: pairs with the scheduler's release increment of the doorbell
        // (made after its READY/EXIT stores).
        const std::uint32_t d = doorbell.load(cuda::memory_order_acquire);
        ++polls;
        cuda::atomic_ref<std::uint32_t, cuda::thread_scope_device> first(idle->epoch[0]);
        // relaxed: only the watcher writes the epoch; it reads back its own last value.
        if (d != first.load(cuda::memory_order_relaxed)) {
          for (int c = 0; c < kEpochCopies; ++c) {
            cuda::atomic_ref<std::uint32_t, cuda::thread_scope_device> copy(
                idle->epoch[c * kEpochStride]);
            // release, device scope: pairs with the deep-idle blocks' acquire loads; carries
            // the doorbell's happens-before (the scheduler's slot stores) to them.
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
      if (Graphs && graph_has_work(a.graph)) break;
    }
  }
}

// The block's three roles (docs/gpu.md, "Inside a block"): warp 0, the loader, polls the ring
// and reads payloads into shared memory; the task threads (every warp after the second) run
// the tasks and write their results back into the slots; warp 1, the publisher, stores each
// task's FINISHED. Polling and publication each stall the warp that does them for about a
// PCIe round trip (~1 us: docs/decisions/007-gpu-device-blocks.md); on warps of their own the
// stalls overlap the tasks instead of delaying them.
//
// Hand-offs. The loader gives the task threads a run of slots at a time through named barrier
// kFullBarrier (it arrives, they wait) and takes slots back a run at a time through
// kFreeBarrier (they arrive, it waits), before it hands over the next run: so a run is loaded
// while the previous one runs, and every shared-memory word passes between the two sides
// through a barrier (compute-sanitizer racecheck models named barriers, not an mbarrier whose
// producer does not wait: docs/decisions/006-gpu-mailbox-barriers.md). The publisher reads no
// shared memory: it waits on one mbarrier per slot (task ended) and one for the block's end.
inline constexpr unsigned kRoleWarps = 2;
inline constexpr unsigned kRoleThreads = kRoleWarps * 32;
inline constexpr unsigned kTaskBarrier = BlockContext::kBarrier;  // the task threads
inline constexpr unsigned kFullBarrier = 2;                       // loader -> task threads
inline constexpr unsigned kFreeBarrier = 3;                       // task threads -> loader

// While the task threads run a run, the loader polls for the next one with back-off from
// kFirstBackoffAfterTaskNs doubling up to kBusyPollBackoffNs: a block running long tasks reads
// host memory a few times per run, not once a microsecond.
inline constexpr unsigned kBusyPollBackoffNs = 16384;
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
  std::uint64_t pub[kMaxRingDepth];   // publisher -> loader: slot j's FINISHED is stored
  std::uint64_t quit;                 // task threads -> publisher: the block ends
  std::uint64_t graph_done;           // task threads -> loader: the graph task has ended
  // task threads -> loader: the successor the graph task kept (its index + 1; 0: none), which
  // the loader hands over next, or puts into the ready queue when a ring run or EXIT comes
  // first (graph_count_down). Read as the loader takes the task back (after kFreeBarrier).
  std::uint32_t graph_kept;
  // task threads -> loader, with graph_done, when that task kept a successor: its report (the
  // task's index + 1 and its status), which the loader publishes once it has handed the next
  // run over, so that the kept task does not wait for the report's system-scope release.
  std::uint32_t graph_report, graph_report_status;
  std::uint32_t type[kMaxRingDepth];  // slot j's task type and payload size (loader)
  std::uint32_t size[kMaxRingDepth];
  std::uint32_t graph_task[kMaxRingDepth];  // slot j's SlotHeader::graph_task (a graph root)
  // The run handed over (loader; read by the task threads after kFullBarrier): first slot,
  // number of slots, and whether the block ends instead.
  std::uint32_t run_first, run_count, run_exit;
  // Or a graph task taken from the ready queue: its index + 1 (0: a ring run), type, payload
  // size, and whether it runs (else it ends cancelled); its payload is in the extra slot.
  std::uint32_t run_graph, graph_type, graph_size, graph_runs;
};

// poll_ring's answer when the ready queue has a graph task (not a SlotState).
inline constexpr std::uint32_t kGraphWork = 0xFFFFFFFFu;

// The loader: waits until the slot at ring position `pos` is READY or EXIT and returns the
// states of the ring from `pos` on (lane t < `usable`: slot (pos + t) % depth; other lanes
// read nothing: their slots are the run the task threads hold). One poll is one coalesced read
// of the ring's control line. While `busy()` (the task threads hold a run), back-off from
// `first_backoff` doubling up to kBusyPollBackoffNs; otherwise warm idle (doubling up to
// kMaxPollBackoffNs), then deep idle (lane 0) after warm_idle_ns (the scheduler rings the
// doorbell only for blocks with nothing in flight). A standby block stays in warm idle with a
// back-off of at most kStandbyBackoffNs. Returns kGraphWork instead when the task threads are
// free and they held a graph task (`graph_held`: the loader takes it back, and with it the
// successor it may have kept) or a ready queue has a graph task: before it reads the ring,
// unless `ring_first` (the
// loader's last take lost the task to another block: the ring is read once first, so that
// ring tasks are not kept waiting while the blocks race for the queue).
template <bool Graphs, class Busy>
__device__ inline std::uint32_t poll_ring(std::uint32_t* states, unsigned depth, unsigned pos,
                                          unsigned usable, const ResidentArgs& a, bool graph_held,
                                          unsigned long long& polls, unsigned first_backoff,
                                          bool standby, bool ring_first, Busy busy) {
  const unsigned lane = threadIdx.x;  // warp 0
  unsigned backoff = first_backoff;
  unsigned long long since = global_ns();
  bool was_busy = busy();
  for (;;) {
    // Lane 0 looks, in device memory.
    if constexpr (Graphs) {
      if (!ring_first && !busy() &&
          (graph_held ||
           __shfl_sync(0xFFFFFFFFu, lane == 0 && graph_has_work(a.graph) ? 1 : 0, 0) != 0)) {
        return kGraphWork;
      }
      ring_first = false;
    }
    std::uint32_t s = static_cast<std::uint32_t>(SlotState::idle);
    if (lane < usable) {
      // acquire, system scope: pairs with the scheduler's release store of READY (or EXIT);
      // the type, size and payload it wrote before are visible to this lane after it, and to
      // the warp's other lanes after the __syncwarp that follows.
      s = cuda::atomic_ref<std::uint32_t, cuda::thread_scope_system>(states[(pos + lane) % depth])
              .load(cuda::memory_order_acquire);
    }
    if (lane == 0) ++polls;  // the warp's loads share one line: one read of host memory
    const std::uint32_t first = __shfl_sync(0xFFFFFFFFu, s, 0);
    if (is_ready_or_exit(first)) return s;
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
      if constexpr (!Graphs) {
        __nanosleep(backoff);
      } else {
        // In short naps that end when the task threads do: the block may then take the
        // successors its task made ready, without a trip to another block.
        for (unsigned slept = 0; slept < backoff && busy(); slept += kLoaderNapNs) {
          __nanosleep(kLoaderNapNs);
        }
      }
      backoff = backoff < kBusyPollBackoffNs ? backoff * 2 : kBusyPollBackoffNs;
      continue;
    }
    // Lane 0's clock decides for the warp: every lane must take the same branch (the shuffle
    // above and the __syncwarp below need the whole warp).
    const int expired = __shfl_sync(0xFFFFFFFFu, global_ns() - since >= a.warm_idle_ns ? 1 : 0, 0);
    if (expired != 0) {
      if (lane == 0) {
        cuda::atomic_ref<std::uint32_t, cuda::thread_scope_system> head(states[pos]);
        (void)deep_idle<Graphs>(head, a, polls);
      }
      __syncwarp();
      since = global_ns();
      backoff = 32;
      continue;  // read the whole line again
    }
    __nanosleep(backoff);
    backoff = backoff < kMaxPollBackoffNs ? backoff * 2 : kMaxPollBackoffNs;
  }
}

// Placement (warp 0 of every block, before anything else): the ring a block serves is its
// rank among the launch's blocks ordered by (SM, block index), so that the rings of one SM are
// adjacent and a scheduler lane, which owns a contiguous range of rings, owns whole SMs; then
// it tells the host its SM. With a mailbox, the last block in that order serves it, so that
// the rings keep ranks 0 .. blocks - 2 and only the last SM has a ring fewer (were it any other
// block, every SM after its own would start one rank early, and the lanes' ranges, whole
// multiples of the blocks per SM, would each split an SM between two lanes). The pool
// launches no more blocks than fit, so the wait ends once they are all resident: at once on
// an idle GPU, later while other kernels hold SMs (the host gives up after a while:
// DeviceBlocks::wait_for_placement). Returns the ring (this GPU's numbering), or -1 for the
// mailbox's block.
__device__ inline int place_block(const ResidentArgs& a) {
  const unsigned lane = threadIdx.x;  // warp 0
  const int me = static_cast<int>(blockIdx.x);
  const int blocks = static_cast<int>(gridDim.x);
  unsigned smid = 0;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
  cuda::atomic_ref<int, cuda::thread_scope_device> arrived(a.placement[blocks]);
  if (lane == 0) {
    // relaxed: published by the release increment below.
    cuda::atomic_ref<int, cuda::thread_scope_device>(a.placement[me])
        .store(static_cast<int>(smid), cuda::memory_order_relaxed);
    // release: pairs with the other blocks' acquire loads of the count; every block's SM is
    // visible to a block that reads the full count (the increments form one release sequence).
    arrived.fetch_add(1, cuda::memory_order_release);
    // acquire: see above.
    while (arrived.load(cuda::memory_order_acquire) < blocks) __nanosleep(256);
  }
  __syncwarp();  // lane 0's acquire happens before the other lanes' loads below
  int before = 0;
  for (int j = static_cast<int>(lane); j < blocks; j += 32) {
    // relaxed: made visible by lane 0's acquire above.
    const int s = cuda::atomic_ref<int, cuda::thread_scope_device>(a.placement[j])
                      .load(cuda::memory_order_relaxed);
    if (s < static_cast<int>(smid) || (s == static_cast<int>(smid) && j < me)) ++before;
  }
  const int ring = __reduce_add_sync(0xFFFFFFFFu, before);
  if (ring == a.mailbox_block) return -1;  // the launch's rings: blocks - 1 with a mailbox
  if (lane == 0 && a.ring_sms != nullptr) {
    // release, system scope: pairs with the host's acquire loads while it waits for every
    // block's report.
    cuda::atomic_ref<std::uint32_t, cuda::thread_scope_system>(a.ring_sms[ring])
        .store(smid, cuda::memory_order_release);
  }
  return ring;
}

// Warp 0: loads runs of READY slots into shared memory and hands them to the task threads, in
// ring order, until it reads EXIT; in a kernel that runs graphs, also the graph tasks it takes
// from the ready queues.
template <std::uint32_t kWords, bool Graphs>
__device__ void load_loop(BlockShared& sh, uint4* payloads, std::uint32_t* states,
                          unsigned char* ring, const ResidentArgs& a, unsigned task_threads,
                          bool standby) {
  constexpr std::uint32_t kSlotWords = 1 + kWords;  // the header, then the payload
  const unsigned depth = a.ring_depth;
  const unsigned lane = threadIdx.x;
  const unsigned pair = task_threads + 32;  // the named barriers' count: task threads + loader
  auto slot = [&](unsigned j) { return ring + kRingControlBytes + j * a.slot_stride; };
  unsigned long long polls = 0;
  unsigned pos = 0;          // the ring slot loaded next
  unsigned held = 0;         // slots of the run the task threads hold (0: none)
  std::uint32_t loaded = 0;  // tasks loaded, and of them published (wrap; differences)
  std::uint32_t published = 0;
  unsigned oldest = 0;             // lane 0: the slot of the oldest task not known published
  std::uint32_t pub_parity = 0;    // lane 0: bit j, the parity of slot j's next pub phase
  bool after_tasks = false;        // the last poll found tasks
  bool graph_held = false;         // the task threads hold a graph task (the extra slot)
  bool took_graph_work = false;    // poll_ring returned kGraphWork
  std::uint32_t graph_parity = 0;  // the parity of graph_done's phase for the task held
  [[maybe_unused]] uint4* graph_payload = payloads + depth * kWords;  // the extra slot
  // Counts the tasks the publisher has published since (a test of each slot's pub mbarrier,
  // in ring order; acquire, block scope: the publisher's FINISHED store happens before, so a
  // READY read afterwards in that slot is a new task, never the old one still READY).
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
  // Whether the task threads still run the graph task they hold (a test of graph_done).
  auto graph_running = [&] {
    if (!Graphs || !graph_held) return false;
    const int ended = lane == 0 && mbar_test(&sh.graph_done, graph_parity) ? 1 : 0;
    return __shfl_sync(0xFFFFFFFFu, ended, 0) == 0;
  };
  // Whether the block has tasks in flight (ring tasks loaded, not yet published, or a graph
  // task not yet ended): no deep idle then, and no graph task taken.
  auto busy = [&] {
    advance();
    if constexpr (Graphs) {
      return published != loaded || graph_running();
    } else {
      return published != loaded;
    }
  };
  // Takes back the graph task the task threads hold (they arrive at kFreeBarrier after it).
  // Every phase of graph_done is seen complete before the task threads arrive on the next: a
  // ring run that takes back the graph task may have tested the phase only while it was still
  // open. Task thread 0 arrives on it before kFreeBarrier, so after the barrier the wait
  // returns at once.
  // The successor the task kept and the report it left to this warp (BlockShared::graph_kept,
  // graph_report; lane 0) are taken with it, after kFreeBarrier: copied before the next run is
  // handed over, whose task may leave the next ones.
  std::uint32_t kept_task = 0, report = 0, report_status = 0;
  auto take_back_graph_task = [&] {
    named_sync(kFreeBarrier, pair);
    if (lane == 0) {
      while (!mbar_try_wait(&sh.graph_done, graph_parity)) {
      }
      kept_task = sh.graph_kept;
      sh.graph_kept = 0;
      report = sh.graph_report;
      report_status = sh.graph_report_status;
      sh.graph_report = 0;
    }
    __syncwarp();  // the warp together again before its next barrier
    graph_parity ^= 1u;
    graph_held = false;
  };
  // Publishes that report, once the next run is handed over (the task threads run it meanwhile).
  // Its system-scope release follows this lane's acquire of graph_done, so the task's results,
  // written before that arrival, reach the host before it (as the publisher's FINISHED does).
  auto publish_report = [&] {
    if (Graphs && lane == 0 && report != 0) {
      graph_publish(a.graph, report - 1, static_cast<TaskStatus>(report_status));
      report = 0;
    }
  };
  for (;;) {
    // A graph task from the ready queue first, but only while the task threads are free: a
    // task taken while they still run one would wait behind it while other blocks idle (a
    // ready task is on some graph's critical path). Its record goes into the extra slot, and
    // it is handed over as a run of its own, each once the task threads gave back what they
    // held (at once: they have ended it).
    bool lost_take = false;  // a ready queue had work, another block took it
    if constexpr (Graphs) {
      if (!busy()) {
        // A graph task that has ended goes back first, with what it kept and its report.
        if (graph_held) take_back_graph_task();
        int t = -1;
        if (lane == 0) {
          // The successor it kept, if any, else a take from the ready queues.
          t = static_cast<int>(kept_task) - 1;
          kept_task = 0;
          if (t < 0) t = graph_take(a.graph);
        }
        t = __shfl_sync(0xFFFFFFFFu, t, 0);
        lost_take = t < 0 && took_graph_work;
        took_graph_work = false;
        if (t >= 0) {
          __syncwarp();  // lane 0's acquire of the cell happens before every lane's record reads
          // From the records' copy in device memory, past L1 (__ldcg: a line of the last graph's
          // records may still be in it; the host's copy of this graph's ended before its roots
          // were loaded, which this task's cell acquire follows).
          const auto* record = reinterpret_cast<const uint4*>(
              a.graph.device_records + static_cast<std::size_t>(t) * a.graph.record_stride);
          constexpr unsigned kHeadWords = 2;  // RecordHead, then the payload (kRecordPayloadOffset)
          for (unsigned i = lane; i < kWords; i += 32)
            graph_payload[i] = __ldcg(record + kHeadWords + i);
          const uint4 head = __ldcg(record);  // RecordHead: type, payload_size, ...
          const bool runs = lane == 0 && graph_runnable(a.graph, static_cast<std::uint32_t>(t));
          // The run words, these included, only once the task threads gave back the run they
          // hold: they read them (in one vector load) at the start of every run.
          if (held != 0) named_sync(kFreeBarrier, pair);
          held = 0;
          if (lane == 0) {
            sh.graph_type = head.x;
            sh.graph_size = head.y;
            sh.graph_runs = runs ? 1u : 0u;
            sh.run_first = pos;
            sh.run_count = 0;
            sh.run_exit = 0;
            sh.run_graph = static_cast<std::uint32_t>(t) + 1;
          }
          named_arrive(kFullBarrier, pair);  // as for a ring run, below
          graph_held = true;
          publish_report();
          continue;
        }
      }
    }
    // Slots not to load: those whose task is not yet published (their state may still read
    // READY) and those of the run the task threads hold (given back only at kFreeBarrier):
    // the last max(loaded - published, held) slots before pos.
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
    const std::uint32_t s =
        poll_ring<Graphs>(states, depth, pos, depth - in_use, a, graph_held, polls,
                          after_tasks ? 256u : 32u, standby, lost_take, busy);
    if (Graphs && s == kGraphWork) {  // every lane has it
      took_graph_work = true;
      continue;
    }
    // The run of READY slots from pos (lanes at or past depth - in_use read nothing).
    const unsigned ready =
        __ballot_sync(0xFFFFFFFFu, s == static_cast<std::uint32_t>(SlotState::ready));
    const unsigned count = ~ready == 0u ? 32u : static_cast<unsigned>(__ffs(~ready)) - 1u;
    if (lane == 0) a.polls[blockIdx.x] = polls;  // only this thread writes it; read at the end
    __syncwarp();  // the lanes' acquire loads happen before every lane's reads below
    if (count != 0) {
      // Headers and payloads of the run in one coalesced pass (one round trip over PCIe), into
      // slots the task threads gave back with the run before the one they hold.
      for (unsigned i = lane; i < count * kSlotWords; i += 32) {
        const unsigned t = i / kSlotWords, w = i % kSlotWords;
        const unsigned j = (pos + t) % depth;
        const uint4 word = reinterpret_cast<const uint4*>(slot(j))[w];
        if (w == 0) {
          sh.type[j] = word.x;  // SlotHeader: type, payload_size, status, graph_task
          sh.size[j] = word.y;
          if constexpr (Graphs) sh.graph_task[j] = word.w;
        } else {
          payloads[j * kWords + w - 1] = word;
        }
      }
    }
    // Take back the run the task threads hold (they arrive when they have ended it): its
    // slots may be loaded again, and the run words below rewritten.
    if (Graphs && graph_held) {
      take_back_graph_task();
    } else if (held != 0) {
      named_sync(kFreeBarrier, pair);
    }
    if constexpr (Graphs) {
      // A successor the graph task just taken back kept goes to the ready queue, where any
      // block takes it: this block runs a ring run next, or ends (EXIT: its lane parks for a
      // pause or shuts down, while the first lane's blocks stay up as long as a graph is in the
      // table), and the kept task would otherwise wait behind that run, or be lost with the
      // block.
      if (lane == 0 && kept_task != 0) {
        graph_requeue(a.graph, kept_task - 1);
        kept_task = 0;
      }
    }
    if (lane == 0) {
      sh.run_first = pos;
      sh.run_count = count;
      sh.run_exit = count == 0 ? 1u : 0u;  // EXIT at pos: the block ends after the runs before
      if constexpr (Graphs) sh.run_graph = 0;
    }
    // Every lane's shared-memory writes (payloads, headers, run words) happen before the task
    // threads' reads: they wait at this barrier; this warp does not.
    named_arrive(kFullBarrier, pair);
    if constexpr (Graphs) publish_report();
    if (count == 0) return;
    loaded += count;
    held = count;
    pos = (pos + count) % depth;
    after_tasks = true;
  }
}

// Warp 1: stores each task's FINISHED as soon as the task threads end it, in ring order, with
// one system-scope release store; ends when the task threads end.
__device__ inline void publish_loop(BlockShared& sh, std::uint32_t* states, const ResidentArgs& a) {
  const unsigned depth = a.ring_depth;
  const unsigned lane = threadIdx.x - 32;
  unsigned pos = 0;
  std::uint32_t parity = 0;  // bit j: the parity of slot j's next done phase
  for (;;) {
    // acquire, block scope (the completed wait): pairs with the task threads' arrival; the
    // task's results and status (written into the slot by the task threads) and its
    // global-memory writes happen before the release store below.
    // Every lane waits (with lane 0 alone waiting, a task's publication came measurably later:
    // docs/decisions/007-gpu-device-blocks.md); lane 0's outcome decides for the warp, so that
    // the lanes cannot take different branches, and lane 0 is the lane that stores below.
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
    if (lane == 0) {
      cuda::atomic_ref<std::uint32_t, cuda::thread_scope_system> state(states[pos]);
      if (a.watchdog) {
        std::uint32_t expected = static_cast<std::uint32_t>(SlotState::ready);
        // release, system scope: pairs with the scheduler's acquire load of FINISHED. A CAS
        // (a round trip over PCIe) only with a watchdog: a scheduler that gave up on this task
        // and shut down has stored EXIT meanwhile, and EXIT must stay (the loader finds it).
        state.compare_exchange_strong(expected, static_cast<std::uint32_t>(SlotState::finished),
                                      cuda::memory_order_release, cuda::memory_order_relaxed);
      } else {
        // release, system scope: pairs with the scheduler's acquire load of FINISHED.
        state.store(static_cast<std::uint32_t>(SlotState::finished), cuda::memory_order_release);
      }
      // release, block scope: pairs with the loader's test; the store above happens before.
      mbar_arrive(&sh.pub[pos]);
    }
    __syncwarp();
    pos = (pos + 1) % depth;
  }
}

// The mailbox server (detail/mailbox_record.hpp; docs/gpu.md "The mailbox"): one block of the pool
// that serves no ring. Warp 0 polls the whole request with one acquire load per lane (one
// instruction, one read of host memory: a system-scope load costs a round trip per
// instruction, acquire or not: docs/decisions/007-gpu-device-blocks.md), the task
// threads run the body, and the first task warp writes the results, then result word 0 with a
// system-scope release. It polls like a standby block and never goes into deep idle.
// Shared memory passes between warp 0 and the task threads through the ring block's named
// barriers, not __syncthreads: warp 0 arrives at kFullBarrier with a request (the task threads
// wait there), the task threads arrive at kFreeBarrier when they are done with it (warp 0
// waits there before it writes the next). With a block-wide barrier in their place,
// compute-sanitizer racecheck reported hazards between warp 0 and the task warps
// (docs/decisions/006-gpu-mailbox-barriers.md); the ring blocks' pattern, the task barrier
// after the copy included, is what racecheck passes.
template <class Types, std::size_t Capacity>
__device__ void mailbox_loop(const ResidentArgs& a, uint4* payload, unsigned char* task_shared,
                             int block) {
  __shared__ std::uint32_t m_type, m_size, m_use;
  // The largest payload it takes: what the pusher may send and `payload` (Capacity bytes) holds.
  constexpr std::uint32_t kMax =
      Capacity < kMailboxPayloadMax ? static_cast<std::uint32_t>(Capacity) : kMailboxPayloadMax;
  // The request words a task of this pool can have: only those are read (one line of host
  // memory for payloads up to 56 bytes, instead of the whole 256-byte request).
  constexpr unsigned kPollWords = 2u + mailbox_payload_words(kMax);
  const unsigned threads = blockDim.x - kRoleThreads;
  const unsigned pair = threads + 32;  // warp 0 and the task threads, at kFull/kFreeBarrier
  unsigned long long* box = a.mailbox;
  unsigned long long* result = box + kMailboxResultOffset;
  if (threadIdx.x >= 32 && threadIdx.x < kRoleThreads) return;  // warp 1 has no role here
  if (threadIdx.x < 32) {
    const unsigned lane = threadIdx.x;
    unsigned long long polls = 0;
    unsigned long long last_task = global_ns();  // lane 0's clock
    // The tag of the last request served (memory starts zeroed, at tag 0). Any other tag is a
    // new request: not only the next use, because shutdown writes its EXIT as the use after
    // the current one, over a request the watchdog gave up on before it was read
    // (spec/mailbox.pml, mutant 4).
    std::uint32_t served = 0;
    for (;;) {
      std::uint32_t use = 0, size = 0;
      for (;;) {
        // acquire, system scope: pairs with the pusher's release store of word 0 (lane 0
        // reads it); with the tags of the others, the whole request and what the pusher wrote
        // before it are visible to the warp after the vote below.
        unsigned long long w = 0;
        if (lane < kPollWords) {
          w = cuda::atomic_ref<unsigned long long, cuda::thread_scope_system>(box[lane]).load(
              cuda::memory_order_acquire);
        }
        if (lane == 0) ++polls;
        use = mailbox_tag(__shfl_sync(0xFFFFFFFFu, w, 0));
        size = mailbox_data(__shfl_sync(0xFFFFFFFFu, w, 1));
        const std::uint32_t need =
            size == kMailboxExit ? 2u : 2u + mailbox_payload_words(size <= kMax ? size : 0u);
        if (use != served && __all_sync(0xFFFFFFFFu, lane >= need || mailbox_tag(w) == use) != 0) {
          if (lane == 0) {
            m_type = mailbox_data(w);
            m_use = use;
          }
          if (lane == 1) m_size = size;
          if (lane >= 2 && lane < need) {
            reinterpret_cast<std::uint32_t*>(payload)[lane - 2] = mailbox_data(w);
          }
          break;
        }
        if (lane == 0) a.polls[blockIdx.x] = polls;  // the idle pool's traffic, counted
        // Lane 0's clock decides for the warp (the vote above needs every lane each round).
        const int slow = __shfl_sync(
            0xFFFFFFFFu, lane == 0 && global_ns() - last_task > kMailboxSlowPollAfterNs ? 1 : 0, 0);
        __nanosleep(slow != 0 ? kMaxPollBackoffNs : kStandbyBackoffNs);
      }
      // The request (shared memory above) to the task threads: they wait at this barrier.
      __syncwarp();
      named_arrive(kFullBarrier, pair);
      if (size == kMailboxExit) return;
      served = use;
      // The task threads are done with the request, its payload and its results.
      named_sync(kFreeBarrier, pair);
      if (lane == 0) {
        a.polls[blockIdx.x] = polls;
        last_task = global_ns();
      }
    }
  }
  // The task threads.
  const unsigned me = threadIdx.x - kRoleThreads;
  const BlockContext ctx(static_cast<int>(me), static_cast<int>(threads), block, task_shared);
  for (;;) {
    named_sync(kFullBarrier, pair);  // warp 0's request (it arrives)
    const std::uint32_t size = m_size;
    if (size == kMailboxExit) return;
    // The pusher sends at most kMax bytes; anything else is not a payload.
    const TaskStatus status =
        size <= kMax ? Types::dispatch(m_type, payload, size, ctx) : TaskStatus::bad_payload_size;
    // Every task thread's writes (results, global memory) before the copy, which the first
    // task warp makes, as in a ring block.
    named_sync(kTaskBarrier, threads);
    if (me < 32) {
      const std::uint32_t use = m_use;
      const std::uint32_t words = mailbox_payload_words(size <= kMax ? size : 0u);
      if (me >= 1 && me <= words) {
        // relaxed: published by word 0's release below (after the __syncwarp).
        cuda::atomic_ref<unsigned long long, cuda::thread_scope_system>(result[me])
            .store(mailbox_word(use, reinterpret_cast<const std::uint32_t*>(payload)[me - 1]),
                   cuda::memory_order_relaxed);
      }
      __syncwarp();  // the lanes' result words before lane 0's release
      if (me == 0) {
        // release, system scope: pairs with the collector's acquire load of result word 0;
        // the results and the body's writes (ordered before by the barrier) are visible.
        cuda::atomic_ref<unsigned long long, cuda::thread_scope_system>(result[0]).store(
            mailbox_word(use, static_cast<std::uint32_t>(status)), cuda::memory_order_release);
      }
    }
    // The task barrier before handing the request back, as in a ring block (without it
    // racecheck reported the first task warp's reads against the next writes there).
    named_sync(kTaskBarrier, threads);
    named_arrive(kFreeBarrier, pair);
  }
}

// The task threads, for a graph task taken from the ready queue (its payload in the extra
// slot): run it, or end it cancelled when an input did not end ok; its results back into its
// record and the successor step by the first task warp, then the report through the
// completion ring by task thread 0. Then the extra slot goes back to the loader.
template <class Types, std::size_t Capacity>
__device__ void run_graph_task(BlockShared& sh, uint4* payload, const DeviceGraphArgs& g,
                               const BlockContext& ctx, unsigned me, unsigned threads) {
  const std::uint32_t t = sh.run_graph - 1;
  const std::uint32_t size = sh.graph_size;
  TaskStatus status = TaskStatus::cancelled;
  if (sh.graph_runs != 0u) {
    status = size <= Capacity ? Types::dispatch(sh.graph_type, payload, size, ctx)
                              : TaskStatus::bad_payload_size;
  }
  // Every task thread's result words and global-memory writes happen before the copy.
  named_sync(kTaskBarrier, threads);
  if (me < 32) {
    const std::uint32_t words =
        status != TaskStatus::cancelled && size <= Capacity ? (size + 15) / 16 : 0;
    auto* out = reinterpret_cast<uint4*>(g.records + static_cast<std::size_t>(t) * g.record_stride +
                                         kRecordPayloadOffset);
    for (std::uint32_t i = me; i < words; i += 32) out[i] = payload[i];
    __syncwarp();  // the lanes' writes happen before the warp's releases
    const int kept = graph_count_down(g, t, uniform(status), me, true);
    if (me == 0) {
      // Both published by graph_done's arrival.
      sh.graph_kept = static_cast<std::uint32_t>(kept + 1);
      if (kept >= 0) {
        sh.graph_report = t + 1;  // the loader publishes it after the kept task's handover
        sh.graph_report_status = static_cast<std::uint32_t>(status);
      } else {
        graph_publish(g, t, status);
      }
    }
  }
  // As after a ring run: the extra slot goes back to the loader once every thread left it.
  // The loader tests graph_done to learn, without waiting, that the task threads are free: it
  // takes the next graph task only then (release, block scope: a hint, the slot and the run
  // words still pass through kFreeBarrier).
  named_sync(kTaskBarrier, threads);
  if (me == 0) mbar_arrive(&sh.graph_done);
  named_arrive(kFreeBarrier, threads + 32);
}

// The resident kernel of a pool. `Graphs`: the pool has a graph table (a.graph.records not
// null) and the blocks take its ready tasks. A pool without one gets the kernel without that
// code, so that code cannot change how ptxas compiles the ring path's task bodies, which it
// made slower (docs/decisions/017-gpu-device-dependencies.md, "The graph's code out of line").
template <class Types, std::size_t Capacity, bool Graphs>
__global__ void resident_kernel(ResidentArgs a) {
  // A payload is a whole number of 16-byte words: copies move uint4s (one PCIe request per
  // 16 bytes, not per byte); bytes past the payload size are copied but never read.
  constexpr std::uint32_t kWords = (Capacity + 15) / 16;
  const unsigned depth = a.ring_depth;
  extern __shared__ __align__(16) unsigned char shared[];
  auto* payloads = reinterpret_cast<uint4*>(shared);  // slot j: kWords words at j*kWords
  // After the slots' payloads, the extra slot of a graph task's (with Graphs), then the types'
  // own space.
  unsigned char* task_shared = shared + (depth + (Graphs ? 1 : 0)) * kWords * 16;
  __shared__ BlockShared sh;
  __shared__ int placed;  // the ring this block serves (place_block)

  if (threadIdx.x < 32) {
    const int ring = place_block(a);
    if (threadIdx.x == 0) placed = ring;
  }
  __syncthreads();  // the ring is known to every thread
  if (placed < 0) {
    // Its index for the task: one past the pool's ring blocks (it is the last GPU's last).
    mailbox_loop<Types, Capacity>(a, payloads, task_shared, a.first_block + a.mailbox_block);
    return;
  }
  const int block = a.first_block + placed;
  unsigned char* ring =
      static_cast<unsigned char*>(a.rings) + static_cast<std::size_t>(block) * a.ring_stride;
  auto* states = reinterpret_cast<std::uint32_t*>(ring);
  const unsigned threads = blockDim.x - kRoleThreads;  // task threads
  if (threadIdx.x == 0) {
    for (unsigned j = 0; j < depth; ++j) {
      mbar_init(&sh.done[j], 1);  // task thread 0
      mbar_init(&sh.pub[j], 1);   // the publisher's lane 0
    }
    mbar_init(&sh.quit, 1);        // task thread 0
    mbar_init(&sh.graph_done, 1);  // task thread 0
    sh.graph_kept = 0;
    sh.graph_report = 0;
  }
  __syncthreads();  // the mbarriers are initialised (the last block-wide barrier)
  if (threadIdx.x < 32) {
    load_loop<kWords, Graphs>(sh, payloads, states, ring, a, threads,
                              a.standby != nullptr && a.standby[placed] != 0);
    return;
  }
  if (threadIdx.x < kRoleThreads) {
    publish_loop(sh, states, a);
    return;
  }
  // The task threads: run after run.
  const unsigned me = threadIdx.x - kRoleThreads;
  auto slot = [&](unsigned j) { return ring + kRingControlBytes + j * a.slot_stride; };
  const BlockContext ctx(static_cast<int>(me), static_cast<int>(threads), block, task_shared);
  for (;;) {
    named_sync(kFullBarrier, threads + 32);  // the loader's run (it arrives)
    if (sh.run_exit != 0u) {
      if (me == 0) mbar_arrive(&sh.quit);  // release: after every done arrival before it
      return;
    }
    if constexpr (Graphs) {
      if (sh.run_graph != 0u) {
        run_graph_task<Types, Capacity>(sh, payloads + depth * kWords, a.graph, ctx, me, threads);
        continue;
      }
    }
    const unsigned first = sh.run_first, count = sh.run_count;
    for (unsigned t = 0; t < count; ++t) {
      const unsigned j = (first + t) % depth;
      const std::uint32_t size = sh.size[j];
      uint4* mine = payloads + j * kWords;
      // A graph's fan-out task (a root of the pool's type id: push_graph refuses it in the
      // graph's own tasks) is empty: it ends ok, and its successors, the graph's roots, become
      // ready. Only a kernel that runs graphs meets one.
      const TaskStatus status =
          (Graphs && sh.graph_task[j] != 0 && sh.type[j] == kGraphFanOutTypeId) ? TaskStatus::ok
          : size <= Capacity ? Types::dispatch(sh.type[j], mine, size, ctx)
                             : TaskStatus::bad_payload_size;
      // Every task thread's result words and global-memory writes happen before the copy.
      named_sync(kTaskBarrier, threads);
      if (me < 32) {
        // The results back into the slot (posted writes over PCIe) by the first task warp.
        const std::uint32_t words = size <= Capacity ? (size + 15) / 16 : 0;
        auto* out = reinterpret_cast<uint4*>(slot(j) + kSlotHeaderBytes);
        for (std::uint32_t i = me; i < words; i += 32) out[i] = mine[i];
        if (me == 0)
          reinterpret_cast<SlotHeader*>(slot(j))->status = static_cast<std::uint32_t>(status);
        __syncwarp();  // the lanes' writes happen before lane 0's arrival
        // A graph's root: its successors are counted down before its slot reports it.
        if constexpr (Graphs) {
          if (sh.graph_task[j] != 0) {
            // A root keeps none: its loader takes ring runs, not a kept task.
            (void)graph_count_down(a.graph, sh.graph_task[j] - 1, uniform(status), me, false);
          }
        }
        // release, block scope: pairs with the publisher's wait; with the barrier above, every
        // task thread's writes for this task happen before the publisher's release store.
        if (me == 0) mbar_arrive(&sh.done[j]);
      }
      // The next task may reuse the types' shared memory only after every thread left this
      // one (the copy above reads only this slot's payload words).
    }
    // The run's slots go back to the loader (it waits for this). The task barrier first:
    // without it racecheck reported the first task warp's reads of the last result words
    // against the loader's next writes of that slot, although a bare read before a bar.arrive
    // is not reported (docs/decisions/006-gpu-mailbox-barriers.md); with it, none.
    named_sync(kTaskBarrier, threads);
    named_arrive(kFreeBarrier, threads + 32);
  }
}

// A kernel may have more than 48 KiB of dynamic shared memory per block only once it opts in,
// on each device it runs on (up to the device's opt-in maximum, its static shared memory
// included). Only a pool that needs it opts in: a pool within the default sets no attribute
// and keeps the launch configuration it always had.
inline constexpr std::size_t kDefaultDynamicSharedMax = 48 * 1024;
template <class Types, std::size_t Capacity, bool Graphs>
cudaError_t allow_dynamic_shared(std::size_t shared_bytes) {
  if (shared_bytes <= kDefaultDynamicSharedMax) return cudaSuccess;
  return cudaFuncSetAttribute(&resident_kernel<Types, Capacity, Graphs>,
                              cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(shared_bytes));
}

template <class Types, std::size_t Capacity, bool Graphs>
int launch_resident_as(const ResidentArgs& args, int blocks, int threads, std::size_t shared_bytes,
                       void* stream) {
  if (const cudaError_t e = allow_dynamic_shared<Types, Capacity, Graphs>(shared_bytes);
      e != cudaSuccess) {
    return static_cast<int>(e);
  }
  // `threads` task threads, plus the loader and publisher warps.
  resident_kernel<Types, Capacity, Graphs>
      <<<blocks, threads + static_cast<int>(kRoleThreads), shared_bytes,
         static_cast<cudaStream_t>(stream)>>>(args);
  return static_cast<int>(cudaGetLastError());
}

// The kernel with the graph code for a GPU with a graph table (args.graph.records), the one
// without it otherwise.
template <class Types, std::size_t Capacity>
int launch_resident(const ResidentArgs& args, int blocks, int threads, std::size_t shared_bytes,
                    void* stream) {
  return args.graph.records != nullptr ? launch_resident_as<Types, Capacity, true>(
                                             args, blocks, threads, shared_bytes, stream)
                                       : launch_resident_as<Types, Capacity, false>(
                                             args, blocks, threads, shared_bytes, stream);
}

// Resident blocks per SM on the current device of the kernel with (`graphs`) or without the
// graph code; 0 when the shared memory asked for, with the kernel's own, is past what the
// device allows a block (device_blocks.cu then names the limit).
template <class Types, std::size_t Capacity, bool Graphs>
int resident_occupancy_of(int threads, std::size_t shared_bytes, int* blocks) {
  // Past the limit, the answer is 0 blocks, found without asking for the attribute (a refused
  // cudaFuncSetAttribute is an API error that sanitizers and error hooks report).
  int device = 0, optin = 0;
  cudaFuncAttributes attributes{};
  cudaError_t e = cudaGetDevice(&device);
  if (e == cudaSuccess) {
    e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
  }
  if (e == cudaSuccess) {
    e = cudaFuncGetAttributes(&attributes, &resident_kernel<Types, Capacity, Graphs>);
  }
  if (e != cudaSuccess) return static_cast<int>(e);
  if (attributes.sharedSizeBytes + shared_bytes > static_cast<std::size_t>(optin)) {
    *blocks = 0;
    return static_cast<int>(cudaSuccess);
  }
  if (e = allow_dynamic_shared<Types, Capacity, Graphs>(shared_bytes); e != cudaSuccess) {
    return static_cast<int>(e);
  }
  return static_cast<int>(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      blocks, &resident_kernel<Types, Capacity, Graphs>, threads + static_cast<int>(kRoleThreads),
      shared_bytes));
}
template <class Types, std::size_t Capacity>
int resident_occupancy(int threads, std::size_t shared_bytes, bool graphs, int* blocks) {
  return graphs ? resident_occupancy_of<Types, Capacity, true>(threads, shared_bytes, blocks)
                : resident_occupancy_of<Types, Capacity, false>(threads, shared_bytes, blocks);
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
