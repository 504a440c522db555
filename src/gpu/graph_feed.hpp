// The scheduler's side of task graphs (Pool::push_graph) on a backend with a graph table
// (docs/decisions/017-gpu-device-dependencies.md): the graphs accepted and waiting for the
// table, the one in it, and its completions, which the pool's first lane collects and stages
// like finished slots.
//
//   auto node = GraphFeed::make_node(std::move(graph));  // a pusher, before it is accepted
//   feed.add(node);                                      // once it is accepted (never throws)
//   // the first lane, each round:
//   ended += feed.collect(lane.outbox);              // completions, staged for their queue
//   if (!pausing) feed.load_next();                  // the next graph, once the table is free
//
// One graph is in the table at a time (HostGraphTable's contract): the next is loaded once
// every completion of the last was collected. Graphs are loaded in the order they were added.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>
#include <vector>

#include "gpu/graph_layout.hpp"
#include "gpu/graph_table.hpp"
#include "gpu/outbox.hpp"

namespace weft::gpu::detail {

class GraphFeed {
 public:
  /// A graph accepted for output queue `out`: its layout and its tasks' records (TaskRecord
  /// bytes, record_stride apart, in task order).
  struct Graph {
    GraphLayout layout;
    std::vector<unsigned char> records;
    std::size_t out = 0;
  };

  /// `table`: the blocks' graph table, or null when the backend has none (then present() is
  /// false and nothing else may be called).
  GraphFeed(HostGraphTable* table, std::size_t record_stride) noexcept
      : table_(table), stride_(record_stride) {}

  [[nodiscard]] bool present() const noexcept { return table_ != nullptr; }
  /// The most tasks one graph may have.
  [[nodiscard]] std::size_t capacity() const noexcept { return table_->capacity(); }

  /// A graph ready to be added: allocated before it is accepted, so that add() cannot fail.
  using Node = std::list<Graph>;
  static Node make_node(Graph graph) {
    Node node;
    node.push_back(std::move(graph));
    return node;
  }

  /// Any thread: queues an accepted graph (at least one task) for the lane to load. Never
  /// throws (it links the node in): the graph's tasks were counted before.
  void add(Node& node) noexcept;

  // ---- the first lane's thread only ----
  /// Loads the next waiting graph when the table is free: its records and counts, then its
  /// roots into the ready queue. Returns whether it loaded one.
  bool load_next();
  /// Stages every completion published so far for its output queue, with the task's results.
  /// Returns how many.
  std::size_t collect(Outbox& outbox);
  /// Whether a graph is in the table with completions not yet collected.
  [[nodiscard]] bool in_table() const noexcept { return left_ > 0; }
  /// Shutdown: the graph in the table drains without running its tasks (each still ends, as
  /// cancelled, through collect()), and every waiting graph's tasks are staged as cancelled.
  /// Returns how many were staged.
  std::size_t cancel(Outbox& outbox);

 private:
  static void stage(Outbox& outbox, const unsigned char* record, std::size_t out,
                    TaskStatus status);

  HostGraphTable* table_;
  std::size_t stride_;
  std::mutex mutex_;
  std::list<Graph> waiting_;  // under mutex_
  // The lane's alone: the graph in the table.
  std::size_t out_ = 0;
  std::size_t left_ = 0;  // its completions not yet collected
};

}  // namespace weft::gpu::detail
