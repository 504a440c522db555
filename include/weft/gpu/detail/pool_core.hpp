// weft/gpu/detail/pool_core.hpp - the compiled scheduler (detail/scheduler.hpp) seen through
// records of one payload capacity: what Pool<Types, Capacity> holds, and what tests use to
// reach SchedulerConfig's test hooks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>

#include "weft/gpu/detail/block_runtime.hpp"
#include "weft/gpu/detail/scheduler.hpp"
#include "weft/gpu/record.hpp"

namespace weft::gpu::detail {

template <std::size_t Capacity>
class PoolCore {
 public:
  using Record = TaskRecord<Capacity>;
  using Callback = std::function<void(Record&)>;

  PoolCore(std::unique_ptr<BlockRuntime> blocks, std::size_t output_queues, QueueOrder order,
           SchedulerConfig config)
      : scheduler_(std::move(blocks), Capacity, output_queues, order, config) {
    static_assert(offsetof(Record, type) == offsetof(RecordHead, type) &&
                      offsetof(Record, payload_size) == offsetof(RecordHead, payload_size) &&
                      offsetof(Record, tag) == offsetof(RecordHead, tag) &&
                      offsetof(Record, status) == offsetof(RecordHead, status) &&
                      offsetof(Record, payload) == kRecordPayloadOffset &&
                      sizeof(Record) == record_stride(Capacity),
                  "TaskRecord's layout is the one the compiled scheduler reads");
  }

  void push(const Record* records, std::size_t count, std::size_t out, int priority,
            Callback callback = nullptr) {
    if (!callback) {
      scheduler_.push(records, count, out, priority);
      return;
    }
    scheduler_.push(records, count, out, priority,
                    [cb = std::move(callback)](void* r) { cb(*static_cast<Record*>(r)); });
  }
  [[nodiscard]] GraphShape prepare_graph(std::size_t tasks, std::span<const Edge> edges,
                                         std::span<const int> priorities,
                                         const char* who = "prepare_graph") const {
    return scheduler_.prepare_graph(tasks, edges.data(), edges.size(), priorities.data(),
                                    priorities.size(), who);
  }
  void push_graph(const GraphShape& shape, std::span<const Record> tasks, std::size_t out) {
    scheduler_.push_graph(shape, tasks.data(), tasks.size(), out);
  }
  void push_graph(std::span<const Record> tasks, std::span<const Edge> edges, std::size_t out,
                  std::span<const int> priorities = {}) {
    push_graph(prepare_graph(tasks.size(), edges, priorities, "push_graph"), tasks, out);
  }
  Record pop(std::size_t out) {
    Record r;
    scheduler_.pop(out, &r);
    return r;
  }
  bool try_pop(Record& r, std::size_t out) { return scheduler_.try_pop(&r, out); }
  std::size_t pop_batch(std::span<Record> into, std::size_t out) {
    return scheduler_.pop_batch(into.data(), into.size(), out);
  }
  [[nodiscard]] std::size_t unfinished(std::size_t out) const { return scheduler_.unfinished(out); }
  void no_more_tasks() { scheduler_.no_more_tasks(); }
  void synchronize() { scheduler_.synchronize(); }
  void pause() { scheduler_.pause(); }
  void resume() { scheduler_.resume(); }
  [[nodiscard]] bool paused() const { return scheduler_.paused(); }
  void shutdown() { scheduler_.shutdown(); }

  [[nodiscard]] PoolStats stats() const { return scheduler_.stats(); }
  [[nodiscard]] std::string describe() const { return scheduler_.describe(); }
  [[nodiscard]] std::size_t num_blocks() const { return scheduler_.num_blocks(); }
  [[nodiscard]] std::size_t ring_depth() const { return scheduler_.ring_depth(); }
  [[nodiscard]] std::size_t num_slots() const { return scheduler_.num_slots(); }
  [[nodiscard]] std::size_t num_lanes() const { return scheduler_.num_lanes(); }
  [[nodiscard]] std::size_t graph_capacity() const { return scheduler_.graph_capacity(); }

 private:
  Scheduler scheduler_;
};

}  // namespace weft::gpu::detail
