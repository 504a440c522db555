#include "gpu/graph_layout.hpp"

#include <algorithm>
#include <limits>
#include <string>

#include "weft/error.hpp"

namespace weft::gpu::detail {

namespace {

[[noreturn]] void refuse(const char* who, const std::string& why) {
  throw InvalidArgument(std::string("weft::gpu::Pool::") + who + ": " + why);
}

void check_size(std::size_t tasks, std::size_t edges, std::size_t capacity, const char* who) {
  if (tasks > capacity) {
    refuse(who, std::to_string(tasks) +
                    " tasks, more than the graph table holds "
                    "(PoolOptions::graph_capacity " +
                    std::to_string(capacity) + ")");
  }
  if (tasks > std::numeric_limits<std::uint32_t>::max() ||
      edges > std::numeric_limits<std::uint32_t>::max()) {
    refuse(who, "more than 2^32 - 1 tasks or edges");
  }
}

void check_ends(std::size_t tasks, std::span<const GraphEdge> edges, const char* who) {
  for (std::size_t e = 0; e < edges.size(); ++e) {
    if (edges[e].from >= tasks || edges[e].to >= tasks) {
      refuse(who, "edge " + std::to_string(e) + " (" + std::to_string(edges[e].from) + " -> " +
                      std::to_string(edges[e].to) + ") names a task past the last (" +
                      std::to_string(tasks) + " tasks)");
    }
  }
}

// Counts sorted into CSR: start[t] .. start[t + 1] are t's entries of `by` (from or to).
std::vector<std::uint32_t> offsets(std::size_t tasks, std::span<const GraphEdge> edges,
                                   bool by_source) {
  std::vector<std::uint32_t> start(tasks + 1, 0);
  for (const GraphEdge& e : edges) ++start[(by_source ? e.from : e.to) + 1];
  for (std::size_t t = 0; t < tasks; ++t) start[t + 1] += start[t];
  return start;
}

std::vector<std::uint32_t> grouped(std::span<const GraphEdge> edges,
                                   const std::vector<std::uint32_t>& start, bool by_source) {
  std::vector<std::uint32_t> next(start.begin(), start.end() - 1);
  std::vector<std::uint32_t> out(edges.size());
  for (const GraphEdge& e : edges) {
    out[next[by_source ? e.from : e.to]++] = by_source ? e.to : e.from;
  }
  return out;
}

// Kahn's order: how many tasks a run in dependency order reaches; `left[t]` ends as the inputs
// of t never satisfied (non-zero exactly for the tasks on or behind a cycle).
std::size_t reachable(const GraphLayout& g, std::vector<std::uint32_t>& left) {
  left = g.inputs;
  std::vector<std::uint32_t> ready = g.roots;
  std::size_t done = 0;
  while (!ready.empty()) {
    const std::uint32_t t = ready.back();
    ready.pop_back();
    ++done;
    for (std::uint32_t i = g.successor_start[t]; i < g.successor_start[t + 1]; ++i) {
      if (--left[g.successors[i]] == 0) ready.push_back(g.successors[i]);
    }
  }
  return done;
}

// A task on a cycle: from a task never reached, step back to an input never reached until a
// task comes round again (every such task has one: that is why it was never reached).
std::uint32_t task_on_cycle(std::size_t tasks, std::span<const GraphEdge> edges,
                            const std::vector<std::uint32_t>& left) {
  const std::vector<std::uint32_t> start = offsets(tasks, edges, false);
  const std::vector<std::uint32_t> inputs = grouped(edges, start, false);
  std::uint32_t t = 0;
  while (left[t] == 0) ++t;
  std::vector<bool> seen(tasks, false);
  while (!seen[t]) {
    seen[t] = true;
    for (std::uint32_t i = start[t]; i < start[t + 1]; ++i) {
      if (left[inputs[i]] != 0) {
        t = inputs[i];
        break;
      }
    }
  }
  return t;
}

// Task `tasks` becomes the one root: its successors are the roots, each of which now waits for
// it (one input).
void add_fan_out(GraphLayout& g) {
  const auto f = static_cast<std::uint32_t>(g.inputs.size());
  for (const std::uint32_t r : g.roots) g.inputs[r] = 1;
  g.inputs.push_back(0);
  g.successors.insert(g.successors.end(), g.roots.begin(), g.roots.end());
  g.successor_start.push_back(static_cast<std::uint32_t>(g.successors.size()));
  if (!g.urgent.empty()) g.urgent.push_back(0);
  g.roots.assign(1, f);
  g.fan_out = f;
}

}  // namespace

GraphLayout lay_out_graph(std::size_t tasks, std::span<const GraphEdge> edges, std::size_t capacity,
                          std::span<const int> priorities, const char* who, FanOutRule fan_out) {
  check_size(tasks, edges.size(), capacity, who);
  check_ends(tasks, edges, who);
  if (!priorities.empty() && priorities.size() != tasks) {
    refuse(who, std::to_string(priorities.size()) + " priorities for " + std::to_string(tasks) +
                    " tasks (give one per task, or none)");
  }
  GraphLayout g;
  g.inputs.assign(tasks, 0);
  for (const GraphEdge& e : edges) ++g.inputs[e.to];
  g.successor_start = offsets(tasks, edges, true);
  g.successors = grouped(edges, g.successor_start, true);
  for (std::uint32_t t = 0; t < tasks; ++t) {
    if (g.inputs[t] == 0) g.roots.push_back(t);
  }
  if (std::any_of(priorities.begin(), priorities.end(), [](int p) { return p > 0; })) {
    g.urgent.reserve(tasks);
    for (const int p : priorities) g.urgent.push_back(p > 0 ? 1 : 0);
  }
  std::vector<std::uint32_t> left;
  if (reachable(g, left) != tasks) {
    refuse(who, "the edges make a cycle (task " +
                    std::to_string(task_on_cycle(tasks, edges, left)) + " is on one)");
  }
  if (g.roots.size() > fan_out.roots_above && tasks + 1 <= capacity &&
      edges.size() + g.roots.size() <= fan_out.edge_capacity) {
    add_fan_out(g);
  }
  return g;
}

GraphLayout without_fan_out(const GraphLayout& g) {
  GraphLayout out = g;
  if (g.fan_out == GraphLayout::kNoFanOut) return out;
  const std::uint32_t f = g.fan_out;
  out.roots.assign(g.successors.begin() + g.successor_start[f],
                   g.successors.begin() + g.successor_start[f + 1]);
  for (const std::uint32_t r : out.roots) out.inputs[r] = 0;
  out.inputs.pop_back();
  out.successors.resize(g.successor_start[f]);
  out.successor_start.pop_back();
  if (!out.urgent.empty()) out.urgent.pop_back();
  out.fan_out = GraphLayout::kNoFanOut;
  return out;
}

}  // namespace weft::gpu::detail
