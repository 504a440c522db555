// weft/gpu/graph_shape.hpp - a task graph's shape: how many tasks it has, its edges and its
// priorities, checked and laid out once by Pool::prepare_graph, then pushed with new records
// any number of times (Pool::push_graph), as a CUDA graph is instantiated once and launched
// many times. A device pool whose table still holds the shape (the last graph it ran was
// this shape) copies the records and the per-run counts to the GPU, not the successors.
//
//   const weft::gpu::GraphShape shape = pool.prepare_graph(tasks, edges, priorities);
//   for (const auto& records : runs) pool.push_graph(shape, records, out);
#pragma once

#include <cstddef>
#include <memory>

namespace weft::gpu {

namespace detail {
struct GraphLayout;
class Scheduler;
}  // namespace detail

/// Immutable and cheap to copy (copies share the layout); usable from any thread on any pool
/// whose graph table holds it (graph_capacity() tasks and, on the device backend, 8 edges a
/// task on average). A shape prepared with a fan-out task for its roots (docs/gpu.md "Task
/// graphs") runs without it on a pool whose table has no room for one more task.
class GraphShape {
 public:
  /// The empty shape: no tasks (pushed with no records, it is accepted and delivers nothing).
  /// Explicit, so that push_graph({}, {}) still means the records-and-edges overload.
  explicit GraphShape() = default;
  [[nodiscard]] std::size_t tasks() const noexcept { return tasks_; }
  [[nodiscard]] std::size_t edges() const noexcept { return edges_; }

 private:
  friend class detail::Scheduler;
  GraphShape(std::shared_ptr<const detail::GraphLayout> layout, std::size_t tasks,
             std::size_t edges) noexcept
      : layout_(std::move(layout)), tasks_(tasks), edges_(edges) {}

  std::shared_ptr<const detail::GraphLayout> layout_;
  std::size_t tasks_ = 0;
  std::size_t edges_ = 0;
};

}  // namespace weft::gpu
