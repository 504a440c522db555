// src/gpu/graph_table.hpp - the graph table of device-side dependencies
// (docs/decisions/017-gpu-device-dependencies.md): what the scheduler's graph feed sees of it
// (GraphTable), and the host backend's (HostGraphTable): the protocol of spec/device_graph.pml
// with std::atomic, for host threads standing in for a GPU's blocks and a scheduler lane.
//
//   HostGraphTable table(capacity);
//   table.load(std::make_shared<const GraphLayout>(lay_out_graph(n, edges, capacity)));
//   for (auto r : layout.roots) table.enqueue(r);    // (the pool loads them into rings instead;
//                                                    //  their blocks then call count_down)
//   // a block:  if (auto t = table.take()) { run *t unless !table.runnable(*t); table.finish(*t,
//   status); }
//   // the lane: while (auto c = table.collect()) deliver(c->task, c->status);
//
// One graph at a time: load() after every completion of the last graph was collected (by the
// lane's thread, or one it hands over to). With a record stride, the table also holds each
// task's record (TaskRecord bytes): the host writes it before load(), the block runs the task
// on its payload in place, and the lane reads the results after collect(). Completions come in
// the order blocks claimed them, not in dependency order: a block may enqueue a successor
// before it publishes the task, and the successor's completion may then be claimed first. A
// full queue or ring (a broken invariant: a graph larger than the table, or load() too early)
// throws std::logic_error and leaves the table unusable.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>

#include "gpu/graph_layout.hpp"
#include "weft/gpu/task.hpp"

namespace weft::gpu::detail {

/// A graph table as the scheduler's graph feed sees it, whoever runs the blocks (host threads
/// here, a GPU's blocks in device_blocks.cu). The feed loads a graph, puts its roots into its
/// lane's rings (each slot carrying the root's index: SlotHeader::graph_task), and collects
/// the completions of the other tasks, which the blocks take from the ready queue.
class GraphTable {
 public:
  struct Completion {
    std::uint32_t task;
    TaskStatus status;
  };
  virtual ~GraphTable() = default;
  /// The most tasks a graph may have.
  [[nodiscard]] virtual std::size_t capacity() const noexcept = 0;
  /// The most edges a graph may have.
  [[nodiscard]] virtual std::size_t edge_capacity() const noexcept {
    return std::numeric_limits<std::size_t>::max();
  }
  /// Writes a graph: its records (record_stride bytes apart, in task order), counts and
  /// successors. Only once every completion of the last graph was collected. The table may keep
  /// `layout` (a table that still holds the same layout need not write its successors again).
  virtual void load_graph(const std::shared_ptr<const GraphLayout>& layout,
                          const unsigned char* records) = 0;
  /// The next completion of a task taken from the ready queue (never a root), once published.
  virtual std::optional<Completion> collect() = 0;
  /// A collected task's record, its payload holding the task's results.
  [[nodiscard]] virtual const unsigned char* result(std::uint32_t t) const = 0;
  /// Shutdown: the tasks taken from the ready queue from now on end as cancelled, unrun (best
  /// effort: a block that has not seen it yet runs the task). For good.
  virtual void cancel_unrun() noexcept = 0;
};

class HostGraphTable final : public GraphTable {
 public:
  /// A table of `capacity` tasks (at least 1), with room for a record of `record_stride` bytes
  /// per task (0: none).
  explicit HostGraphTable(std::size_t capacity, std::size_t record_stride = 0);

  [[nodiscard]] std::size_t capacity() const noexcept override { return capacity_; }
  /// Task t's record (record_stride bytes, 16-byte aligned). Written by the host before load();
  /// read and written by the block that takes t; read by the lane after it collected t.
  [[nodiscard]] unsigned char* record(std::uint32_t t) const noexcept {
    return records_.get() + t * record_stride_;
  }

  void load_graph(const std::shared_ptr<const GraphLayout>& layout,
                  const unsigned char* records) override;
  [[nodiscard]] const unsigned char* result(std::uint32_t t) const override { return record(t); }

  /// The host: writes a graph's counts and keeps its layout (no block may be taking from it).
  void load(std::shared_ptr<const GraphLayout> layout);
  /// Puts task t into the ready queue of its level (the host for the roots; finish() for the
  /// rest). Wakes no one: a block that found the queues empty looks again (see take()).
  void enqueue(std::uint32_t t);
  /// A block: a task whose inputs are all final, an urgent one first (GraphLayout::urgent), or
  /// none.
  std::optional<std::uint32_t> take();
  /// Whether every input of t ended ok and the table is not cancelled; if not, t is to be
  /// finished as cancelled, unrun.
  [[nodiscard]] bool runnable(std::uint32_t t) const;
  /// Any thread (shutdown): every task taken from now on is finished as cancelled, unrun, so
  /// that the graph in the table drains without running. Its completions still come through
  /// collect(), exactly once each. For good: the table is not loaded again.
  void cancel_unrun() noexcept override;
  /// Whether cancel_unrun() was called (for tests that wait for a shutdown to reach the table).
  [[nodiscard]] bool cancelled() const noexcept;
  /// A block, once t ended with `status` (cancelled when !runnable(t)): count_down(t, status),
  /// then publishes t's completion for the lane.
  void finish(std::uint32_t t, TaskStatus status);
  /// A block, once t ended with `status`: poisons t's successors unless it ended ok, then
  /// counts each one's input as final, enqueueing those it completes. Alone (without the
  /// publication) for a root, which its slot reports.
  void count_down(std::uint32_t t, TaskStatus status);
  /// The lane: the next completion, in the order blocks claimed them, once it is published.
  std::optional<Completion> collect() override;

 private:
  struct alignas(64) Cell {  // a ready queue's (Vyukov's bounded MPMC queue)
    std::atomic<std::uint64_t> sequence;
    std::uint32_t task;
  };
  // A ready queue: one per level, each with a cell for every task of the table. Positions are
  // claimed by fetch_add; `available` counts the tasks put and not yet claimed by a take
  // (below 0 while takes that found none back out): spec/device_graph.pml's queue.
  struct ReadyQueue {
    std::unique_ptr<Cell[]> cells;
    alignas(64) std::atomic<std::uint64_t> enqueue_at{0};
    alignas(64) std::atomic<std::uint64_t> dequeue_at{0};
    alignas(64) std::atomic<std::int64_t> available{0};
  };
  static constexpr int kNormal = 0, kUrgent = 1;
  void enqueue(ReadyQueue& q, std::uint32_t t);
  std::optional<std::uint32_t> take(ReadyQueue& q);
  struct alignas(64) Entry {  // the completion ring
    std::atomic<std::uint64_t> sequence;
    std::uint32_t task;
    TaskStatus status;
  };
  void publish(std::uint32_t t, TaskStatus status);

  std::size_t capacity_;
  std::size_t record_stride_;
  std::size_t slots_;  // cells and entries: a power of two >= capacity
  std::unique_ptr<std::atomic<std::uint32_t>[]> inputs_;
  std::unique_ptr<std::atomic<std::uint8_t>[]> poisoned_;
  std::shared_ptr<const GraphLayout> layout_;  // the graph loaded last (null: none)
  ReadyQueue queues_[2];                       // kNormal, kUrgent
  std::unique_ptr<Entry[]> entries_;
  struct FreeAligned {
    void operator()(unsigned char* p) const noexcept;
  };
  std::unique_ptr<unsigned char[], FreeAligned> records_;
  std::atomic<bool> cancelled_{false};
  alignas(64) std::atomic<std::uint64_t> claimed_{0};
  alignas(64) std::uint64_t collected_ = 0;  // the lane's alone
};

}  // namespace weft::gpu::detail
