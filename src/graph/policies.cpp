// Mapping policies (include/weft/graph/policies.hpp).
#include "weft/graph/policies.hpp"

#include <cmath>
#include <string>

#include "weft/error.hpp"

namespace weft::graph {

namespace {

bool gpu_capable(const MappingProblem::Node& v) { return std::isfinite(v.gpu); }

void check_edges(const MappingProblem& p, const char* who) {
  for (const auto& e : p.edges) {
    if (e.from >= p.nodes.size() || e.to >= p.nodes.size()) {
      throw InvalidArgument(std::string("weft::graph::") + who + ": an edge names node " +
                            std::to_string(std::max(e.from, e.to)) + " of " +
                            std::to_string(p.nodes.size()));
    }
  }
}

// Kahn's algorithm: producers before consumers. Throws on a cycle, naming a node on it.
std::vector<std::size_t> topological_order(const MappingProblem& p) {
  const std::size_t n = p.nodes.size();
  std::vector<std::size_t> indegree(n, 0), order;
  std::vector<std::vector<std::size_t>> out(n);
  for (const auto& e : p.edges) {
    out[e.from].push_back(e.to);
    ++indegree[e.to];
  }
  order.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (indegree[i] == 0) order.push_back(i);
  }
  for (std::size_t k = 0; k < order.size(); ++k) {
    for (const std::size_t c : out[order[k]]) {
      if (--indegree[c] == 0) order.push_back(c);
    }
  }
  if (order.size() != n) {
    std::size_t on_cycle = 0;
    while (indegree[on_cycle] == 0) ++on_cycle;
    throw InvalidArgument("weft::graph::map_pptm: the graph has a cycle (through node " +
                          std::to_string(on_cycle) + ")");
  }
  return order;
}

}  // namespace

std::vector<Device> map_a_free(const MappingProblem& problem) {
  for (std::size_t i = 0; i < problem.nodes.size(); ++i) {
    if (!std::isfinite(problem.nodes[i].cpu)) {
      throw InvalidArgument("weft::graph::map_a_free: node " + std::to_string(i) +
                            " has no CPU implementation");
    }
  }
  return std::vector<Device>(problem.nodes.size(), Device::cpu);
}

std::vector<Device> map_d_map(const MappingProblem& problem) {
  std::vector<Device> d(problem.nodes.size());
  for (std::size_t i = 0; i < d.size(); ++i) {
    d[i] = gpu_capable(problem.nodes[i]) ? Device::gpu : Device::cpu;
  }
  return d;
}

std::vector<Device> map_pptm(const MappingProblem& problem) {
  check_edges(problem, "map_pptm");
  const std::size_t n = problem.nodes.size();
  const std::vector<std::size_t> order = topological_order(problem);
  std::vector<std::vector<const MappingProblem::Edge*>> in(n), out(n);
  for (const auto& e : problem.edges) {
    in[e.to].push_back(&e);
    out[e.from].push_back(&e);
  }
  // Accumulated gains, producers first.
  std::vector<double> acc(n, 0.0);
  for (const std::size_t v : order) {
    const auto& node = problem.nodes[v];
    if (!gpu_capable(node)) continue;  // a fence gains nothing and passes nothing on
    double a = node.cpu - node.gpu;
    for (const auto* e : in[v]) {
      if (gpu_capable(problem.nodes[e->from])) {
        a += acc[e->from];  // the producer's chain continues into this node
      } else {
        a -= e->to_gpu;  // data from a fence must cross to the GPU
      }
    }
    acc[v] = a;
  }
  // Decisions, consumers first.
  std::vector<Device> d(n, Device::cpu);
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const std::size_t v = *it;
    if (!gpu_capable(problem.nodes[v])) {
      d[v] = Device::cpu;  // a fence
      continue;
    }
    if (!std::isfinite(problem.nodes[v].cpu)) {
      d[v] = Device::gpu;  // nothing to decide
      continue;
    }
    if (out[v].empty()) {  // an output: its read-back is in its GPU time
      d[v] = acc[v] > 0 ? Device::gpu : Device::cpu;
      continue;
    }
    double back = 0;  // device-to-host transfers to the consumers on the CPU
    for (const auto* e : out[v]) {
      if (d[e->to] == Device::cpu) back += e->to_cpu;
    }
    if (back == 0) {
      d[v] = Device::gpu;  // every consumer is on the GPU: the chain keeps this node
    } else {
      d[v] = acc[v] >= back ? Device::gpu : Device::cpu;
    }
  }
  return d;
}

}  // namespace weft::graph
