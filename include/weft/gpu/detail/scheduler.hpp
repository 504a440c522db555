// weft/gpu/detail/scheduler.hpp - the host half of the GPU pool: input queue, scheduler lanes,
// the lone-task mailbox, the watchdog and the output queues, compiled once in the library
// (src/gpu/). It sees a task record as bytes: a TaskRecord<C> of the pool's payload capacity
// C, of record_stride(C) bytes (weft/gpu/record.hpp). Pool<Types, Capacity> is the typed
// facade over it; docs/gpu.md says how the parts work together.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "weft/gpu/detail/block_runtime.hpp"
#include "weft/gpu/graph_shape.hpp"
#include "weft/gpu/record.hpp"
#include "weft/gpu/scheduler_observer.hpp"

namespace weft::gpu::detail {

/// How the scheduler lanes and consumers behave (from PoolOptions; validated by Pool).
struct SchedulerConfig {
  std::size_t lanes = 0;  // 0: automatic
  std::chrono::nanoseconds idle_spin{std::chrono::microseconds(1000)};
  std::chrono::nanoseconds consumer_spin{std::chrono::microseconds(50)};
  std::chrono::nanoseconds task_deadline{0};  // 0: no watchdog
  // Device backend: ring the doorbell after loading a slot whose block has been idle at least
  // this long (it may be in deep idle); 0: after every batch.
  std::chrono::nanoseconds ring_after{0};
  // Device backend: each lane's first block is a standby block (never in deep idle), and the
  // lane gives it a task before any other block while it is free.
  bool standby = false;
  // A single push is a lone task (it may take the mailbox) when its thread pushed nothing for
  // this long.
  std::chrono::nanoseconds lone_gap{std::chrono::microseconds(2)};
  // Watches the lanes' rounds (null: nobody).
  SchedulerObserver* observer = nullptr;
  // Where every block's counts of loaded and collected tasks start. Only tests set it: near
  // 2^32, so that a short run crosses the counts' wrap-around.
  std::uint32_t count_origin = 0;
  // Under a backlog, a lane with more blocks than this listed fills each block's whole ring at
  // once instead of one level at a time. Tests set 0, so that the host backend's few blocks
  // take that path too.
  std::size_t whole_ring_blocks = 256;
};

/// A callback for one task: called on a scheduler thread with the finished record's bytes.
using RecordCallback = std::function<void(void* record)>;

class Scheduler {
 public:
  /// Starts the blocks and the lanes. Records have `payload_capacity` bytes of payload.
  /// Throws weft::InvalidArgument for bad arguments.
  Scheduler(std::unique_ptr<BlockRuntime> blocks, std::size_t payload_capacity,
            std::size_t output_queues, QueueOrder order, SchedulerConfig config);
  /// shutdown().
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  /// Queues `count` records (TaskRecord bytes, consecutive) for output queue `out`, or, with
  /// `callback`, for it (count 1). Any thread. Throws weft::ShutDown once closed,
  /// weft::InvalidArgument for a bad queue or payload size.
  void push(const void* records, std::size_t count, std::size_t out, int priority,
            RecordCallback callback = nullptr);
  /// Checks and lays out a graph of `count` tasks, `edge_count` edges and `priority_count`
  /// priorities (0 or `count`; Pool::prepare_graph). Throws weft::InvalidArgument for a bad
  /// graph, one larger than the table, or a pool that runs no graphs, naming Pool::`who`.
  [[nodiscard]] GraphShape prepare_graph(std::size_t count, const Edge* edges,
                                         std::size_t edge_count, const int* priorities,
                                         std::size_t priority_count, const char* who) const;
  /// Queues a prepared graph's `count` records (TaskRecord bytes, consecutive), every task for
  /// output queue `out` (Pool::push_graph). Throws weft::ShutDown once closed,
  /// weft::InvalidArgument for a bad queue or payload size, a count other than the shape's, or a
  /// shape larger than the table.
  void push_graph(const GraphShape& shape, const void* records, std::size_t count, std::size_t out);
  /// Waits for a finished record of queue `out` and copies it into `record`.
  void pop(std::size_t out, void* record);
  bool try_pop(void* record, std::size_t out);
  /// Waits for at least one finished record and copies up to `max` into `records`.
  std::size_t pop_batch(void* records, std::size_t max, std::size_t out);
  [[nodiscard]] std::size_t unfinished(std::size_t out) const;
  void no_more_tasks();
  void synchronize();
  /// Pool::pause(), Pool::resume(), Pool::paused() (docs/gpu.md "Pausing").
  void pause();
  void resume();
  [[nodiscard]] bool paused() const;
  /// Tasks not yet in a slot are cancelled, tasks in slots finish (or time out), the blocks
  /// exit and the lanes join. Idempotent.
  void shutdown();

  [[nodiscard]] PoolStats stats() const;
  [[nodiscard]] std::string describe() const;
  [[nodiscard]] std::size_t num_blocks() const;
  [[nodiscard]] std::size_t ring_depth() const;
  [[nodiscard]] std::size_t num_slots() const;
  [[nodiscard]] std::size_t num_lanes() const;
  /// The most tasks one graph may have (0: the pool runs no graphs).
  [[nodiscard]] std::size_t graph_capacity() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace weft::gpu::detail
