// weft/gpu/device.cuh - the resident task-multiplexed kernel (seed 000 §3.2.4). Include it in
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
// scripts/probes/latency_trace.cu: the GPU clock when the last block to run a task saw it
// READY, had read its payload, had run it, had fenced, and had stored FINISHED.
__device__ unsigned long long g_weft_trace[5];
#define WEFT_TRACE(k)                                    \
  do {                                                   \
    if (threadIdx.x == 0) g_weft_trace[k] = global_ns(); \
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

__device__ inline bool is_ready_or_exit(std::uint32_t s) {
  return s == static_cast<std::uint32_t>(SlotState::ready) ||
         s == static_cast<std::uint32_t>(SlotState::exit);
}

// Deep idle (thread 0): an eventcount on this GPU's epoch. Returns the slot's state once it
// is READY or EXIT. Reads of host memory: one per epoch change, plus the watcher's doorbell
// polls.
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
    if (is_ready_or_exit(s)) {
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
    }
  }
}

// A task of at least this many SM clock cycles (~2 us at the H100's 1.7-2 GHz) makes the block
// read its ring ahead during the next run's last task (see resident_kernel). clock64(), not the
// global timer: reading %globaltimer twice per task cost ~0.07 us per task (gap p10 at depth 32:
// 0.42 us, 0.35 with clock64, 0.32 untimed; bench/results/h100/probes/README.md).
inline constexpr long long kLongTaskCycles = 4000;

// The first back-off after a batch of tasks: the scheduler needs about this long to collect the
// slots and load the next tasks, and polling sooner only takes the line away from the CPU's
// cache while it writes it.
inline constexpr unsigned kFirstBackoffAfterTaskNs = 512;

// Warp 0: waits until the slot at ring position `pos` is READY or EXIT, and returns the
// states of the ring from `pos` on (lane t: slot (pos + t) % depth; lanes past the depth read
// nothing). One poll is one coalesced read of the ring's control line. Warm idle first
// (doubling the back-off up to kMaxPollBackoffNs), deep idle (thread 0) after warm_idle_ns;
// a standby block stays in warm idle with a back-off of at most kStandbyBackoffNs.
__device__ inline std::uint32_t poll_ring(std::uint32_t* states, unsigned depth, unsigned pos,
                                          const ResidentArgs& a, unsigned long long& polls,
                                          unsigned first_backoff, bool standby) {
  const unsigned lane = threadIdx.x;  // warp 0
  unsigned backoff = first_backoff;
  unsigned long long since = global_ns();
  for (;;) {
    std::uint32_t s = static_cast<std::uint32_t>(SlotState::idle);
    if (lane < depth) {
      // acquire, system scope: pairs with the scheduler's release store of READY (or EXIT);
      // the type, size and payload it wrote before are visible to this lane after it, and to
      // every thread of the block after the barrier that follows.
      s = cuda::atomic_ref<std::uint32_t, cuda::thread_scope_system>(states[(pos + lane) % depth])
              .load(cuda::memory_order_acquire);
    }
    if (lane == 0) ++polls;  // the warp's loads share one line: one read of host memory
    const std::uint32_t first = __shfl_sync(0xFFFFFFFFu, s, 0);
    if (is_ready_or_exit(first)) return s;
    if (standby) {
      if (lane == 0) a.polls[blockIdx.x] = polls;  // it may wait here for the pool's life
      __nanosleep(kStandbyBackoffNs);
      continue;
    }
    // Lane 0's clock decides for the warp: every lane must take the same branch (the shuffle
    // above and the __syncwarp below need the whole warp).
    const int expired = __shfl_sync(0xFFFFFFFFu, global_ns() - since >= a.warm_idle_ns ? 1 : 0, 0);
    if (expired != 0) {
      if (lane == 0) {
        cuda::atomic_ref<std::uint32_t, cuda::thread_scope_system> head(states[pos]);
        (void)deep_idle(head, a, polls);
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

template <class Types, std::size_t Capacity>
__global__ void resident_kernel(ResidentArgs a) {
  // A payload is a whole number of 16-byte words: copies move uint4s (one PCIe request per
  // 16 bytes, not per byte); bytes past the payload size are copied but never read.
  constexpr std::uint32_t kWords = (Capacity + 15) / 16;
  constexpr std::uint32_t kSlotWords = 1 + kWords;  // the header, then the payload
  const unsigned depth = a.ring_depth;
  extern __shared__ __align__(16) unsigned char shared[];
  auto* payloads = reinterpret_cast<uint4*>(shared);          // depth x kWords words
  unsigned char* task_shared = shared + depth * kWords * 16;  // the types' own space
  __shared__ std::uint32_t s_count, s_exit;
  __shared__ std::uint32_t s_type[kMaxRingDepth], s_size[kMaxRingDepth];

  const int block = a.first_block + static_cast<int>(blockIdx.x);
  unsigned char* ring =
      static_cast<unsigned char*>(a.rings) + static_cast<std::size_t>(block) * a.ring_stride;
  auto* states = reinterpret_cast<std::uint32_t*>(ring);
  auto slot = [&](unsigned j) { return ring + kRingControlBytes + j * a.slot_stride; };
  unsigned long long polls = 0;
  unsigned pos = 0;  // the ring slot this block runs next
  const bool standby = a.standby != nullptr && a.standby[blockIdx.x] != 0;
  // Warp 0, lane t: the state of slot (pos + t) % depth as read early, during the last task
  // of the previous run (IDLE when not read); see "Read ahead" below.
  std::uint32_t ahead = static_cast<std::uint32_t>(SlotState::idle);
  // Warp 0: whether the last task took long enough for a read ahead to pay (its round trip
  // then overlaps the task; after a short task the publication's fence would wait for it:
  // +0.6 us of latency for one empty task, bench/results/h100/probes/latency_trace-b26538a.txt).
  bool long_tasks = false;

  for (;;) {
    if (threadIdx.x < 32) {
      std::uint32_t s = ahead;
      ahead = static_cast<std::uint32_t>(SlotState::idle);
      if (!is_ready_or_exit(__shfl_sync(0xFFFFFFFFu, s, 0))) {
        if (polls != 0) __nanosleep(kFirstBackoffAfterTaskNs);  // after a batch (see above)
        s = poll_ring(states, depth, pos, a, polls, polls == 0 ? 32 : 256, standby);
      }
      // The run of READY slots from pos (lanes past the depth are not READY).
      const unsigned ready =
          __ballot_sync(0xFFFFFFFFu, s == static_cast<std::uint32_t>(SlotState::ready));
      if (threadIdx.x == 0) {
        s_count = ~ready == 0u ? 32u : static_cast<unsigned>(__ffs(~ready)) - 1u;
        s_exit = s == static_cast<std::uint32_t>(SlotState::exit) ? 1u : 0u;
        a.polls[blockIdx.x] = polls;  // plain store: only this thread writes it; read at the end
      }
    }
    // Warp 0's acquire loads, then this barrier: every thread's reads below see what the
    // scheduler wrote before READY.
    __syncthreads();
    if (s_exit != 0u) return;
    const unsigned count = s_count;
    WEFT_TRACE(0);

    // Headers and payloads of the whole run in one coalesced pass (one round trip over PCIe).
    for (unsigned i = threadIdx.x; i < count * kSlotWords; i += blockDim.x) {
      const unsigned t = i / kSlotWords, w = i % kSlotWords;
      const uint4 word = reinterpret_cast<const uint4*>(slot((pos + t) % depth))[w];
      if (w == 0) {
        s_type[t] = word.x;  // SlotHeader: type, payload_size, status, reserved
        s_size[t] = word.y;
      } else {
        payloads[t * kWords + w - 1] = word;
      }
    }
    __syncthreads();
    WEFT_TRACE(1);

    // Each task is published as soon as it ends, by one release store of FINISHED: on the H100
    // a system-scope release store costs the block nothing it waits for, while a system-scope
    // fence stalls thread 0 ~0.7 us even with nothing written
    // (bench/results/h100/probes/fence_probe-*.txt; the pool used to publish groups of tasks
    // behind one fence). So the scheduler gets every slot back at once and refills it.
    for (unsigned t = 0; t < count; ++t) {
      const unsigned j = (pos + t) % depth;
#if !defined(WEFT_POOL_NO_READ_AHEAD)
      // Read ahead: before the run's last task, warp 0 reads the states of the slots after the
      // run (relaxed loads; an acquire fence after the task makes a READY among them usable).
      // The read's PCIe round trip overlaps the task, and a block whose scheduler refilled its
      // ring meanwhile goes on to the next run without polling.
      const bool read_ahead = long_tasks && t + 1 == count && count < depth;
      if (read_ahead && threadIdx.x < 32) {
        if (threadIdx.x + count < depth) {
          ahead = cuda::atomic_ref<std::uint32_t, cuda::thread_scope_system>(
                      states[(pos + count + threadIdx.x) % depth])
                      .load(cuda::memory_order_relaxed);
        }
        if (threadIdx.x == 0) ++polls;
      }
#else
      constexpr bool read_ahead = false;
#endif
      uint4* mine = payloads + t * kWords;
      const bool size_ok = s_size[t] <= Capacity;
      const BlockContext ctx(static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x), block,
                             task_shared);
      const long long started = threadIdx.x == 0 ? clock64() : 0;
      const TaskStatus status =
          size_ok ? Types::dispatch(s_type[t], mine, s_size[t], ctx) : TaskStatus::bad_payload_size;
      // Every thread's payload (result) words and global-memory writes happen before warp 0
      // copies and publishes them.
      __syncthreads();
      if (threadIdx.x < 32) {
        long_tasks =
            __shfl_sync(0xFFFFFFFFu, threadIdx.x == 0 && clock64() - started >= kLongTaskCycles,
                        0) != 0;
        WEFT_TRACE(2);
        const std::uint32_t n = size_ok ? (s_size[t] + 15) / 16 : 0;
        auto* out = reinterpret_cast<uint4*>(slot(j) + kSlotHeaderBytes);
        for (std::uint32_t i = threadIdx.x; i < n; i += 32) out[i] = mine[i];  // posted writes
        if (threadIdx.x == 0) {
          reinterpret_cast<SlotHeader*>(slot(j))->status = static_cast<std::uint32_t>(status);
        }
        // The lanes' result words happen before lane 0's release store below (the warp
        // barrier orders memory among its lanes; the release is cumulative).
        __syncwarp();
        WEFT_TRACE(3);
        if (threadIdx.x == 0) {
          cuda::atomic_ref<std::uint32_t, cuda::thread_scope_system> state(states[j]);
          if (a.watchdog) {
            std::uint32_t expected = static_cast<std::uint32_t>(SlotState::ready);
            // release, system scope: pairs with the scheduler's acquire load of FINISHED. A CAS
            // (a round trip over PCIe) only with a watchdog: a scheduler that gave up on this
            // task and shut down has stored EXIT meanwhile, and EXIT must stay.
            if (!state.compare_exchange_strong(
                    expected, static_cast<std::uint32_t>(SlotState::finished),
                    cuda::memory_order_release, cuda::memory_order_relaxed)) {
              s_exit = 1u;
            }
          } else {
            // release, system scope: pairs with the scheduler's acquire load of FINISHED; the
            // results (this warp's posted writes) and the task's global-memory writes (before
            // the block barrier above) are visible to it.
            state.store(static_cast<std::uint32_t>(SlotState::finished),
                        cuda::memory_order_release);
          }
        }
        WEFT_TRACE(4);
        if (read_ahead) {
          // acquire, system scope, by every lane that read ahead and saw READY or EXIT: it has
          // synchronized with the scheduler's release store of that state, so the payload
          // written before it is visible to the lane, and to every thread after the barrier
          // at the top of the next round. After the publication, so that it does not delay it;
          // skipped when nothing was refilled (the states are
          // then polled again with acquire loads).
          if (__any_sync(0xFFFFFFFFu, is_ready_or_exit(ahead))) {
            cuda::atomic_thread_fence(cuda::memory_order_acq_rel, cuda::thread_scope_system);
          }
        }
      }
      if (a.watchdog) {
        __syncthreads();  // s_exit
        if (s_exit != 0u) return;
      }
    }
    pos = (pos + count) % depth;
    __syncthreads();  // s_count, s_type and s_size are rewritten in the next round
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
  kernel<<<blocks, threads, shared_bytes, static_cast<cudaStream_t>(stream)>>>(args);
  return static_cast<int>(cudaGetLastError());
}

template <class Types, std::size_t Capacity>
int resident_occupancy(int threads, std::size_t shared_bytes, int* blocks) {
  return static_cast<int>(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      blocks, &resident_kernel<Types, Capacity>, threads, shared_bytes));
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
