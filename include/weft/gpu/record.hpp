// weft/gpu/record.hpp - a task as the pool's users push and pop it, the pool's counters, and
// the input queue's order.
//
//   auto r = weft::gpu::TaskRecord<64>::make<Saxpy>({2.0f, x, y, n}, /*tag=*/7);
//   pool.push_record(r);
//   auto done = pool.pop();          // done.tag == 7, done.status says how it ended
//   auto p = done.as<Saxpy>();       // the payload after the body ran
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "weft/error.hpp"
#include "weft/gpu/task.hpp"

namespace weft::gpu {

enum class QueueOrder : std::uint8_t { fifo, priority };

/// A task as pushed and as popped: type id, payload bytes, a user tag, and (popped) how it
/// ended. The payload holds the task's inputs when pushed and its results when popped; its
/// bytes past payload_size are unspecified in a popped record (small payloads travel whole).
template <std::size_t Capacity>
struct TaskRecord {
  static_assert(Capacity >= 8 && Capacity <= 256,
                "weft::gpu: payload capacity must be between 8 and 256 bytes");
  std::uint32_t type = 0;
  std::uint32_t payload_size = 0;
  std::uint64_t tag = 0;
  TaskStatus status = TaskStatus::ok;
  alignas(16) unsigned char payload[Capacity] = {};

  template <GpuTaskType T>
  static TaskRecord make(const typename T::Payload& p, std::uint64_t tag = 0) {
    static_assert(sizeof(typename T::Payload) <= Capacity,
                  "weft::gpu: this task type's Payload exceeds the pool's payload capacity");
    TaskRecord r;
    r.type = T::kId;
    r.payload_size = sizeof(typename T::Payload);
    r.tag = tag;
    std::memcpy(r.payload, &p, sizeof p);
    return r;
  }
  /// The payload as T's Payload. Throws weft::InvalidState when the record is of another type.
  template <GpuTaskType T>
  typename T::Payload as() const {
    static_assert(sizeof(typename T::Payload) <= Capacity);
    if (type != T::kId || payload_size != sizeof(typename T::Payload)) {
      throw InvalidState("weft::gpu::TaskRecord::as: the record holds type " +
                         std::to_string(type) + ", not " + std::to_string(T::kId));
    }
    typename T::Payload p;
    std::memcpy(&p, payload, sizeof p);
    return p;
  }
  [[nodiscard]] bool ok() const noexcept { return status == TaskStatus::ok; }
};

/// An edge of a task graph (Pool::push_graph): task `to` waits for task `from`, both indices
/// into the graph's tasks. An edge given twice is waited for twice, and both are satisfied by
/// the one end of `from`.
struct Edge {
  std::uint32_t from = 0;
  std::uint32_t to = 0;
};

/// Counters of a pool's life (approximate while it runs).
struct PoolStats {
  std::uint64_t pushed = 0;
  std::uint64_t completed = 0;  // delivered with any status
  std::uint64_t failed = 0;     // delivered with a status other than ok
  std::uint64_t timed_out = 0;  // delivered as timed_out by the watchdog
  std::uint64_t scheduler_sleeps = 0;
  std::uint64_t slots_lost = 0;     // slots whose task passed the deadline and has not ended yet
  std::uint64_t host_polls = 0;     // device backend: reads of host memory by the blocks
  std::uint64_t mailbox_tasks = 0;  // single pushes that went through the lone-task mailbox
  std::uint64_t mailbox_taken = 0;  // ... of which a consumer collected itself (the rest: a lane)
};

namespace detail {

/// The compiled scheduler sees a TaskRecord<C> as bytes: these fields at fixed offsets, then
/// the payload at kRecordPayloadOffset, in a record of record_stride(C) bytes. Checked against
/// the template by PoolCore.
struct RecordHead {
  std::uint32_t type;
  std::uint32_t payload_size;
  std::uint64_t tag;
  TaskStatus status;
};
inline constexpr std::size_t kRecordPayloadOffset = 32;
/// Payload bytes a record, queue entry or staged result reserves: the capacity rounded up to
/// 16, so that small payloads are copied whole as fixed-size moves.
constexpr std::size_t payload_room(std::size_t capacity) noexcept {
  return (capacity + 15) / 16 * 16;
}
constexpr std::size_t record_stride(std::size_t capacity) noexcept {
  return kRecordPayloadOffset + payload_room(capacity);
}

}  // namespace detail
}  // namespace weft::gpu
