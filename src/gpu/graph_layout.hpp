// src/gpu/graph_layout.hpp - a task graph checked and laid out as a GPU's graph table holds it
// (docs/decisions/017-gpu-device-dependencies.md): per task the count of inputs it waits for,
// its successors in CSR form, and the roots. The host half of Pool::prepare_graph and
// push_graph: everything they refuse of the graph itself is refused here, before any task runs.
//
//   const auto layout = lay_out_graph(4, edges, capacity);   // throws InvalidArgument
//   // layout.inputs[t]: edges into t; successors of t: successors[successor_start[t] ..
//   // successor_start[t + 1]); roots: the tasks with no inputs, in index order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "weft/gpu/record.hpp"

namespace weft::gpu::detail {

/// Task `to` waits for task `from` (weft/gpu/record.hpp).
using GraphEdge = weft::gpu::Edge;

struct GraphLayout {
  std::vector<std::uint32_t> inputs;           // per task: the edges into it
  std::vector<std::uint32_t> successor_start;  // tasks + 1 offsets into successors
  std::vector<std::uint32_t> successors;       // edge targets grouped by source, in edge order
  // The tasks with no inputs, from the counts above: the ones the host enqueues. Never from
  // the table's live counts once blocks run (spec/device_graph.pml).
  std::vector<std::uint32_t> roots;
  // Per task, 1 for a task of the urgent level (a priority above 0), taken before every ready
  // task of the normal level; empty when no task has one.
  std::vector<std::uint8_t> urgent;
  // The fan-out task, when the graph has one: a task of the pool's own (after the graph's
  // tasks, index tasks()), the one root, whose successors are the graph's roots. Its record
  // has the type id kGraphFanOutTypeId; the blocks run it as an empty task, and the pool
  // never delivers it. kNoFanOut: none.
  static constexpr std::uint32_t kNoFanOut = 0xFFFFFFFFu;
  std::uint32_t fan_out = kNoFanOut;
  [[nodiscard]] bool is_urgent(std::uint32_t t) const { return !urgent.empty() && urgent[t] != 0; }
  /// The graph's own tasks (those pushed), the fan-out task not counted.
  [[nodiscard]] std::size_t tasks() const noexcept {
    return fan_out == kNoFanOut ? inputs.size() : inputs.size() - 1;
  }
};

/// When lay_out_graph gives a graph a fan-out task: more roots than `roots_above`, and room in
/// the table for one more task (`capacity`) and its edges (`edge_capacity`).
struct FanOutRule {
  std::size_t roots_above = static_cast<std::size_t>(-1);  // never
  std::size_t edge_capacity = static_cast<std::size_t>(-1);
};

/// Checks a graph of `tasks` tasks and lays it out. Throws weft::InvalidArgument, naming what
/// is wrong, for more tasks than `capacity` (the graph table's size), an edge whose end is not
/// a task, and a cycle (naming a task on it; an edge from a task to itself is one). An empty
/// graph lays out empty. `priorities`: none, or one per task (else InvalidArgument). The
/// messages name Pool::`who`. `fan_out`: when to add a fan-out task (above).
GraphLayout lay_out_graph(std::size_t tasks, std::span<const GraphEdge> edges, std::size_t capacity,
                          std::span<const int> priorities = {}, const char* who = "push_graph",
                          FanOutRule fan_out = {});

/// The same graph without its fan-out task (a copy of `g` where it has none): its successors
/// are the roots again.
GraphLayout without_fan_out(const GraphLayout& g);

}  // namespace weft::gpu::detail
