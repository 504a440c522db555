// The scheduler's side of task graphs (Pool::push_graph) on a backend with a graph table
// (docs/decisions/017-gpu-device-dependencies.md): the graphs accepted and waiting for the
// table, and the one in it, whose roots the pool's first lane loads into its blocks' rings and
// whose other tasks' completions it collects from the table, staging both like finished slots.
//
//   auto node = feed.make_node(layout, records, out);  // a pusher, before it is accepted
//   feed.add(node);                                    // once it is accepted (never throws)
//   // the first lane, each round:
//   ended += feed.collect(lane.outbox, max);     // completions of queue-taken tasks
//   feed.roots_ended(lane.outbox.graph_roots()); // roots its rings collected
//   if (!pausing) feed.load_next();              // the next graph, once the table is free
//   feed.take_roots(lane.batch, room, input);    // roots, as entries for the lane's rings
//
// One graph is in the table at a time (GraphTable's contract): the next is loaded once every
// task of the last was delivered. Graphs are loaded in the order they were added.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <vector>

#include "gpu/graph_layout.hpp"
#include "gpu/graph_table.hpp"
#include "gpu/input_queue.hpp"
#include "gpu/outbox.hpp"
#include "gpu/record_buffer.hpp"

namespace weft::gpu::detail {

class GraphFeed {
 public:
  /// A graph accepted for output queue `out`: its layout (shared by every push of one
  /// GraphShape) and its tasks' records (TaskRecord bytes, record_stride apart, in task order).
  struct Graph {
    std::shared_ptr<const GraphLayout> layout;
    std::vector<unsigned char> records;
    std::size_t out = 0;
  };
  /// A graph ready to be added: allocated before it is accepted, so that add() cannot fail.
  using Node = std::list<Graph>;
  /// Any thread: a node holding a copy of the graph's records (layout->tasks() of them, at
  /// least one), and the fan-out task's where the layout has one. The copy goes into the buffer of
  /// a graph delivered before, where one is spare: a graph pushed again and again touches no fresh
  /// pages.
  Node make_node(std::shared_ptr<const GraphLayout> layout, const unsigned char* records,
                 std::size_t out);

  /// `table`: the blocks' graph table, or null when the backend has none (then present() is
  /// false and nothing else may be called).
  GraphFeed(GraphTable* table, std::size_t record_stride) : table_(table), stride_(record_stride) {
    spares_.reserve(kSpareBuffers);  // recycle() never allocates
  }

  [[nodiscard]] bool present() const noexcept { return table_ != nullptr; }
  /// The most tasks, and edges, one graph may have.
  [[nodiscard]] std::size_t capacity() const noexcept { return table_->capacity(); }
  [[nodiscard]] std::size_t edge_capacity() const noexcept { return table_->edge_capacity(); }

  /// Any thread: queues an accepted graph (at least one task) for the lane to load. Never
  /// throws (it links the node in): the graph's tasks were counted before.
  void add(Node& node) noexcept;

  // ---- the first lane's thread only ----
  /// Loads the next waiting graph when the table is free. Returns whether it loaded one.
  bool load_next();
  /// Appends up to `max` of the loaded graph's roots not yet handed out to `batch`, as input
  /// entries (kGraphTaskFlag | index in the callback field). Returns how many.
  std::size_t take_roots(RecordBuffer& batch, std::size_t max, const InputQueue& input);
  /// Stages up to `max` of the completions the table published so far for its output queue,
  /// with the task's results. Returns how many.
  std::size_t collect(Outbox& outbox, std::size_t max);
  /// The roots whose slots the lane's rings collected (staged by them, but the fan-out task,
  /// which the outbox kept out of its queues): counted delivered. Clears `roots`. Returns how
  /// many of them were the fan-out task (0 or 1), which the lane does not count as a task.
  std::size_t roots_ended(std::vector<std::uint32_t>& roots);
  /// The loaded graph's fan-out task (GraphLayout::fan_out), or GraphLayout::kNoFanOut.
  [[nodiscard]] std::uint32_t fan_out() const noexcept {
    return current_.layout == nullptr ? GraphLayout::kNoFanOut : current_.layout->fan_out;
  }
  /// Whether a graph is in the table with tasks not yet delivered.
  [[nodiscard]] bool in_table() const noexcept { return left_ > 0; }
  /// Whether roots of the graph in the table wait to be loaded.
  [[nodiscard]] bool roots_waiting() const noexcept { return next_root_ < current_roots(); }
  /// Shutdown: the graph in the table drains without running its tasks taken from now on
  /// (each still ends, as cancelled, through collect(); its roots still go through the rings),
  /// and every waiting graph's tasks are staged as cancelled. Returns how many were staged.
  std::size_t cancel(Outbox& outbox);
  /// The blocks died: every task of the graph in the table not yet delivered is staged as
  /// `status` (after roots_ended() for the roots the rings failed), and every waiting graph's
  /// as cancelled; the fan-out task is counted delivered, unstaged. Returns how many staged.
  std::size_t fail(Outbox& outbox, TaskStatus status);

 private:
  static void stage(Outbox& outbox, const unsigned char* record, std::size_t out,
                    TaskStatus status);
  [[nodiscard]] std::size_t current_roots() const noexcept {
    return current_.layout == nullptr ? 0 : current_.layout->roots.size();
  }
  // Keeps a delivered graph's record buffer for a later make_node (at most kSpareBuffers).
  void recycle(std::vector<unsigned char>&& records) noexcept;
  static constexpr std::size_t kSpareBuffers = 2;
  // Completions collect() takes before it stages them (their records prefetched meanwhile).
  static constexpr std::size_t kCollectRun = 16;
  void prefetch_record(const unsigned char* record) const noexcept;
  void delivered(std::uint32_t t);
  std::size_t cancel_waiting(Outbox& outbox);

  GraphTable* table_;
  std::size_t stride_;
  std::mutex mutex_;
  std::list<Graph> waiting_;                        // under mutex_
  std::vector<std::vector<unsigned char>> spares_;  // under mutex_: emptied record buffers
  // The lane's alone: the graph in the table.
  Graph current_;
  std::vector<std::uint8_t> done_;  // per task: delivered
  std::size_t next_root_ = 0;       // roots handed out so far
  std::size_t left_ = 0;            // tasks not yet delivered
};

}  // namespace weft::gpu::detail
