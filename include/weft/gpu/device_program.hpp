// weft/gpu/device_program.hpp - the handle a CUDA translation unit gives the pool so that it
// can launch the resident kernel of a task-type list (plain C++: no CUDA types here).
#pragma once

#include <cstddef>
#include <cstdint>

namespace weft::gpu {

/// A GPU's graph table (Pool::push_graph), as its blocks see it (device addresses).
/// `records` null: this GPU runs no graphs.
struct DeviceGraphArgs {
  unsigned char* records = nullptr;  // mapped host memory: per task a TaskRecord, stride apart
  // Device memory: the same records as the host wrote them, which the blocks read the tasks
  // from (no read over PCIe on a graph's critical path); the results go to `records`.
  const unsigned char* device_records = nullptr;
  std::size_t record_stride = 0;
  std::uint32_t* inputs = nullptr;           // device memory: per task, inputs not yet final
  std::uint32_t* poisoned = nullptr;         // device memory: per task, an input did not end ok
  std::uint32_t* successor_start = nullptr;  // device memory: per task + 1, into successors
  std::uint32_t* successors = nullptr;       // device memory
  std::uint32_t* urgent = nullptr;           // device memory: per task, 1 for the urgent level
  // Device memory: the two ready queues (Vyukov's; kGraphNormal, then kGraphUrgent), `slots`
  // cells each, two words a cell: its sequence, its task.
  unsigned long long* cells = nullptr;
  // Device memory, a 128-byte line each: each ready queue's enqueue and dequeue positions, and
  // the completions claimed (see kGraphQueueWords; kGraphClaimed).
  unsigned long long* counters = nullptr;
  // Mapped host memory: the completion ring, two words an entry: its sequence, then the task
  // in the low half and its TaskStatus in the high half.
  unsigned long long* completions = nullptr;
  std::uint32_t slots = 0;             // cells and entries: a power of two, >= the capacity
  std::uint32_t* cancelled = nullptr;  // device memory: 1 once the pool shuts down
};
inline constexpr int kGraphNormal = 0;
inline constexpr int kGraphUrgent = 1;
// Queue q's counters are words kGraphQueueWords * q + kGraphEnqueueAt, kGraphDequeueAt and
// kGraphAvailable (its tasks put and not yet claimed by a take, as a signed count).
inline constexpr std::size_t kGraphQueueWords = 48;
inline constexpr std::size_t kGraphEnqueueAt = 0;
inline constexpr std::size_t kGraphDequeueAt = 16;
inline constexpr std::size_t kGraphAvailable = 32;
inline constexpr std::size_t kGraphClaimed = 96;
inline constexpr std::size_t kGraphCounterWords = 112;

/// Everything the resident kernel of one GPU gets (addresses are device addresses).
struct ResidentArgs {
  void* rings = nullptr;                // the pool's rings (pinned host memory, mapped)
  std::size_t ring_stride = 0;          // bytes between blocks' rings
  std::size_t slot_stride = 0;          // bytes between the slots of a ring
  unsigned ring_depth = 1;              // slots per block (1..kMaxRingDepth)
  int first_block = 0;                  // this GPU serves rings [first_block, first_block + blocks)
  std::uint32_t* doorbell = nullptr;    // host word the scheduler bumps after loading slots
  void* idle = nullptr;                 // this GPU's DeviceIdle (device memory, zeroed, watcher -1)
  unsigned long long* polls = nullptr;  // per block: reads of host memory (device memory)
  unsigned long long warm_idle_ns = 0;  // a block idle this long stops polling its slot
  // Per ring of this GPU (device memory; null: none): 1 for a standby block, which never
  // goes into deep idle and polls its ring with a short back-off (single-task latency).
  const unsigned char* standby = nullptr;
  // Placement (docs/gpu.md "Placement"): each block's SM, then a count of the blocks that
  // wrote theirs (device memory, blocks + 1 ints, zeroed before the launch); and, per ring
  // of this GPU, the SM of the block serving it, written once by that block (mapped host
  // memory, all ones before the launch).
  int* placement = nullptr;
  std::uint32_t* ring_sms = nullptr;
  bool watchdog = false;  // FINISHED by CAS (an EXIT stored over a lost task must stay)
  // The lone-task mailbox (detail/mailbox_record.hpp; mapped host memory; null: none), and
  // whether a block of this launch serves it instead of a ring (-1: none; else the launch's
  // rings, which is also the mailbox's block index for its tasks past first_block): the last
  // block in the placement's (SM, block index) order, on the last GPU only.
  unsigned long long* mailbox = nullptr;
  int mailbox_block = -1;
  DeviceGraphArgs graph{};  // this GPU's graph table (records null: none)
};

/// Made by weft::gpu::device_program<Types, Capacity>() in a .cu file (weft/gpu/device.cuh).
struct DeviceProgram {
  /// Launches the resident kernel: `blocks` blocks of `threads` threads serving rings
  /// [args.first_block, args.first_block + blocks); the kernel with the graph code where
  /// args.graph has a table, the one without it otherwise. `stream` is a cudaStream_t. Returns
  /// a cudaError_t (0 = success).
  int (*launch)(const ResidentArgs& args, int blocks, int threads, std::size_t shared_bytes,
                void* stream) = nullptr;
  /// Resident blocks per SM for this block shape (cudaOccupancyMaxActiveBlocksPerMultiprocessor)
  /// on the current device, of the kernel with (`graphs`) or without the graph code; returns a
  /// cudaError_t, the count in *blocks.
  int (*max_blocks_per_sm)(int threads, std::size_t shared_bytes, bool graphs,
                           int* blocks) = nullptr;
  std::size_t payload_capacity = 0;      // must equal the pool's Capacity
  std::size_t payload_shared_bytes = 0;  // dynamic shared memory per ring slot (a payload copy)
  std::size_t task_shared_bytes = 0;     // dynamic shared memory the task types ask for
  /// Dynamic shared memory per block for a ring of `depth` slots: a payload copy per slot and,
  /// in the kernel that runs graphs, one for a graph task taken from the ready queue, then the
  /// task types' own.
  [[nodiscard]] std::size_t shared_bytes(std::size_t depth, bool graphs) const noexcept {
    return (depth + (graphs ? 1 : 0)) * payload_shared_bytes + task_shared_bytes;
  }
  std::size_t idle_bytes = 0;  // device memory per GPU for ResidentArgs::idle
  [[nodiscard]] bool valid() const noexcept { return launch != nullptr; }
};

}  // namespace weft::gpu
