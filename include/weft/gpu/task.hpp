// weft/gpu/task.hpp - what a GPU-pool task is: a registered type with a payload and a body
// that one block runs (docs/gpu.md, docs/architecture.md).
//
//   struct Saxpy {
//     static constexpr std::uint32_t kId = 1;
//     struct Payload { float a; const float* x; float* y; int n; };
//     WEFT_HD static void run(Payload& p, const weft::gpu::BlockContext& b) {
//       for (int i = b.thread(); i < p.n; i += b.threads()) p.y[i] += p.a * p.x[i];
//     }
//   };
//   using MyTasks = weft::gpu::TaskTypes<Saxpy, OtherTask>;
//
// Bodies are __host__ __device__ so the same code runs on the GPU (a block of threads) and on
// the host backend (a block of one thread, where sync() does nothing): a body must be correct
// for any block size, including 1. Dispatch is a compile-time chain over the ids, never a
// function pointer (the device cannot call host-registered pointers); the body of a type with
// `static constexpr bool kOutOfLine = true` is called from that chain rather than inlined into
// it (docs/gpu.md).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#if defined(__CUDACC__)
#define WEFT_HD __host__ __device__
#define WEFT_NOINLINE __noinline__
#else
#define WEFT_HD
#define WEFT_NOINLINE
#endif

namespace weft::gpu {

/// How a finished task ended. Written by the block (ok, unknown_type, bad_payload_size, and
/// cancelled for a graph task whose input did not end ok) or by the host (cancelled,
/// timed_out, device_failed).
enum class TaskStatus : std::uint32_t {
  ok = 0,
  unknown_type = 1,      // no registered type has the record's id
  bad_payload_size = 2,  // the record's payload size differs from the type's Payload
  cancelled = 3,         // never ran: the pool shut down first, or an input of its graph failed
  timed_out = 4,         // exceeded the watchdog's deadline
  device_failed = 5,     // the resident kernel died (trap, fault) while the task was in flight
};

/// Human-readable name of a status. Any thread.
const char* to_string(TaskStatus s) noexcept;

/// What a task body sees of the block running it.
class BlockContext {
 public:
  WEFT_HD BlockContext(int thread, int threads, int block, void* shared) noexcept
      : thread_(thread), threads_(threads), block_(block), shared_(shared) {}
  /// This thread's index in the block, in [0, threads()).
  WEFT_HD int thread() const noexcept { return thread_; }
  /// Threads in the block (1 on the host backend).
  WEFT_HD int threads() const noexcept { return threads_; }
  /// Index of the resident block (worker) running the task.
  WEFT_HD int block() const noexcept { return block_; }
  /// The block's dynamic shared memory (on the host backend: a per-block buffer). Free at a
  /// body's start: every task thread has left the block's previous task before any starts the
  /// next, so a body need not synchronize before its first use nor after its last.
  WEFT_HD void* shared() const noexcept { return shared_; }
  /// Barrier of the task's threads (nothing on the host backend). Task bodies must use this,
  /// not __syncthreads(): a resident block has two more warps (the loader and the publisher,
  /// docs/gpu.md) that do not run tasks, so a block-wide barrier would wait for them forever.
  /// Likewise thread(), threads() and shared(), not threadIdx.x, blockDim.x or a
  /// __shared__ array sized by blockDim.x.
  WEFT_HD void sync() const noexcept {
#if defined(__CUDA_ARCH__)
    asm volatile("bar.sync %0, %1;" ::"n"(kBarrier), "r"(threads_) : "memory");
#endif
  }
  /// The named barrier (PTX bar.sync id) of the task threads; the resident kernel uses it too.
  static constexpr unsigned kBarrier = 1;

 private:
  int thread_;
  int threads_;
  int block_;
  void* shared_;
};

/// The type id the pool keeps for itself: a task graph with more roots than its first lane's
/// blocks reach gets one more task of this id, run as an empty task, whose successors are the
/// roots, so that the blocks that find them ready start them (docs/gpu.md "Task graphs"). No
/// task type may use it.
inline constexpr std::uint32_t kGraphFanOutTypeId = 0xFFFFFFFFu;

template <class T>
concept GpuTaskType = requires(typename T::Payload& p, const BlockContext& b) {
  { T::kId } -> std::convertible_to<std::uint32_t>;
  requires std::is_trivially_copyable_v<typename T::Payload>;
  T::run(p, b);
};

namespace detail {
template <class T>
constexpr std::size_t shared_bytes_of() {
  if constexpr (requires { T::kSharedBytes; }) {
    return T::kSharedBytes;
  } else {
    return 0;
  }
}
// A concept rather than a constexpr function: device code may test it (a plain constexpr
// function is host code to nvcc).
template <class T>
concept out_of_line = requires {
  requires static_cast<bool>(T::kOutOfLine);
};
// A body called, not inlined into the resident kernel (T::kOutOfLine).
template <class T>
WEFT_HD WEFT_NOINLINE void run_out_of_line(void* payload, const BlockContext& b) {
  T::run(*static_cast<typename T::Payload*>(payload), b);
}
}  // namespace detail

/// The registered task types of a pool. Ids must be distinct.
template <GpuTaskType... Ts>
struct TaskTypes {
  static constexpr std::size_t kCount = sizeof...(Ts);
  static constexpr std::size_t kMaxPayload = [] {
    std::size_t m = 0;
    ((m = std::max(m, sizeof(typename Ts::Payload))), ...);
    return m;
  }();
  static constexpr bool kDistinctIds = [] {
    const std::uint32_t ids[] = {static_cast<std::uint32_t>(Ts::kId)...};
    for (std::size_t i = 0; i < sizeof...(Ts); ++i) {
      for (std::size_t j = i + 1; j < sizeof...(Ts); ++j) {
        if (ids[i] == ids[j]) return false;
      }
    }
    return true;
  }();
  static_assert(kDistinctIds, "weft::gpu::TaskTypes: two task types share an id");
  static_assert(((static_cast<std::uint32_t>(Ts::kId) != kGraphFanOutTypeId) && ...),
                "weft::gpu::TaskTypes: a task type uses the id the pool keeps for itself "
                "(kGraphFanOutTypeId, 0xFFFFFFFF)");

  /// Runs the task with this id on `payload` (of `size` bytes). Returns unknown_type or
  /// bad_payload_size instead of running when the record does not match a type.
  WEFT_HD static TaskStatus dispatch(std::uint32_t id, void* payload, std::uint32_t size,
                                     const BlockContext& b) {
    TaskStatus status = TaskStatus::unknown_type;
    (void)((id == Ts::kId ? (status = run_one<Ts>(payload, size, b), true) : false) || ...);
    return status;
  }

  /// Dynamic shared memory a type asks for (T::kSharedBytes, default 0); the block gets the
  /// largest of its types.
  static constexpr std::size_t kSharedBytes = [] {
    std::size_t m = 0;
    ((m = std::max(m, detail::shared_bytes_of<Ts>())), ...);
    return m;
  }();

 private:
  template <class T>
  WEFT_HD static TaskStatus run_one(void* payload, std::uint32_t size, const BlockContext& b) {
    if (size != sizeof(typename T::Payload)) return TaskStatus::bad_payload_size;
    if constexpr (detail::out_of_line<T>) {
      detail::run_out_of_line<T>(payload, b);
    } else {
      T::run(*static_cast<typename T::Payload*>(payload), b);
    }
    return TaskStatus::ok;
  }
};

}  // namespace weft::gpu
