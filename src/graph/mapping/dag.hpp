// The graph view the mapping policies and the schedulers share (src/graph only): each node's
// incoming and outgoing edges and a topological order, with the problem's edges checked; and the
// check of its costs every mapper starts with.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "weft/error.hpp"
#include "weft/graph/mapping/problem.hpp"

namespace weft::graph::detail {

struct Dag {
  std::vector<std::vector<const MappingProblem::Edge*>> in, out;
  std::vector<std::size_t> topo;  // producers first (Kahn's algorithm)
};

/// Whether a cost is one no mapper can weigh: NaN (it compares false with everything, so a
/// mapper that took one would return some mapping, silently), negative, or infinite where only a
/// node's time may be (MappingProblem::kNoImplementation).
inline bool bad_cost(double cost, bool may_be_infinite) {
  return !(cost >= 0) || (!may_be_infinite && std::isinf(cost));
}

[[noreturn]] inline void refuse_cost(const char* who, const std::string& what, double cost) {
  char value[32];
  std::snprintf(value, sizeof value, "%g", cost);
  throw InvalidArgument(std::string("weft::graph::") + who + ": " + what + " is " + value +
                        " (a cost is a number >= 0; only a node's time may be infinite: no "
                        "implementation)");
}

/// Throws InvalidArgument, naming `who` and the cost, for a bad_cost anywhere in `p`. Every
/// mapping entry point calls it first.
inline void check_costs(const MappingProblem& p, const char* who) {
  for (std::size_t i = 0; i < p.nodes.size(); ++i) {
    const auto& v = p.nodes[i];
    if (bad_cost(v.cpu, true)) refuse_cost(who, "node " + std::to_string(i) + "'s CPU time", v.cpu);
    if (bad_cost(v.gpu, true)) refuse_cost(who, "node " + std::to_string(i) + "'s GPU time", v.gpu);
  }
  for (const auto& e : p.edges) {
    for (const auto& [cost, way] :
         {std::pair{e.to_gpu, "host-to-device"}, std::pair{e.to_cpu, "device-to-host"}}) {
      if (bad_cost(cost, false)) {
        refuse_cost(who,
                    "edge " + std::to_string(e.from) + " -> " + std::to_string(e.to) + "'s " + way +
                        " transfer",
                    cost);
      }
    }
  }
  for (std::size_t k = 0; k < p.inputs.size(); ++k) {
    if (bad_cost(p.inputs[k].to_gpu, false)) {
      refuse_cost(who, "shared input " + std::to_string(k) + "'s host-to-device transfer",
                  p.inputs[k].to_gpu);
    }
  }
}

/// Throws InvalidArgument, naming `who`, for a shared input whose reader does not exist.
inline void check_inputs(const MappingProblem& p, const char* who) {
  for (const auto& in : p.inputs) {
    for (std::size_t r : in.readers) {
      if (r >= p.nodes.size()) {
        throw InvalidArgument(std::string("weft::graph::") + who + ": a shared input names node " +
                              std::to_string(r) + " of " + std::to_string(p.nodes.size()));
      }
    }
  }
}

/// Throws InvalidArgument, naming `who`, for an edge to a node that does not exist, a shared
/// input read by one that does not, or a cycle (naming a node on it).
inline Dag make_dag(const MappingProblem& p, const char* who) {
  check_inputs(p, who);
  const std::size_t n = p.nodes.size();
  Dag g;
  g.in.resize(n);
  g.out.resize(n);
  std::vector<std::size_t> indegree(n, 0);
  for (const auto& e : p.edges) {
    if (e.from >= n || e.to >= n) {
      throw InvalidArgument(std::string("weft::graph::") + who + ": an edge names node " +
                            std::to_string(std::max(e.from, e.to)) + " of " + std::to_string(n));
    }
    g.out[e.from].push_back(&e);
    g.in[e.to].push_back(&e);
    ++indegree[e.to];
  }
  g.topo.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (indegree[i] == 0) g.topo.push_back(i);
  }
  for (std::size_t k = 0; k < g.topo.size(); ++k) {
    for (const auto* e : g.out[g.topo[k]]) {
      if (--indegree[e->to] == 0) g.topo.push_back(e->to);
    }
  }
  if (g.topo.size() != n) {
    std::size_t on_cycle = 0;
    while (indegree[on_cycle] == 0) ++on_cycle;
    throw InvalidArgument(std::string("weft::graph::") + who +
                          ": the graph has a cycle (through node " + std::to_string(on_cycle) +
                          ")");
  }
  return g;
}

}  // namespace weft::graph::detail
