// Mapping policies (include/weft/graph/mapping/policies.hpp).
#include "weft/graph/mapping/policies.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "dag.hpp"
#include "weft/error.hpp"

namespace weft::graph {

namespace {

bool gpu_capable(const MappingProblem::Node& v) { return std::isfinite(v.gpu); }

}  // namespace

std::vector<Device> map_a_free(const MappingProblem& problem) {
  detail::check_costs(problem, "map_a_free");
  for (std::size_t i = 0; i < problem.nodes.size(); ++i) {
    if (!std::isfinite(problem.nodes[i].cpu)) {
      throw InvalidArgument("weft::graph::map_a_free: node " + std::to_string(i) +
                            " has no CPU implementation");
    }
  }
  return std::vector<Device>(problem.nodes.size(), Device::cpu);
}

std::vector<Device> map_d_map(const MappingProblem& problem) {
  detail::check_costs(problem, "map_d_map");
  std::vector<Device> d(problem.nodes.size());
  for (std::size_t i = 0; i < d.size(); ++i) {
    d[i] = gpu_capable(problem.nodes[i]) ? Device::gpu : Device::cpu;
  }
  return d;
}

std::vector<Device> map_pptm(const MappingProblem& problem) {
  detail::check_costs(problem, "map_pptm");
  const std::size_t n = problem.nodes.size();
  const detail::Dag g = detail::make_dag(problem, "map_pptm");
  const auto& order = g.topo;
  const auto& in = g.in;
  const auto& out = g.out;
  // A shared graph input is copied once for all its readers on the GPU: each GPU-capable reader
  // is charged an equal share of it (PPTM decides node by node, so the copy is amortised over
  // the readers that may take it; with a single reader this is the reader's own input cost).
  std::vector<double> input_share(n, 0.0);
  for (const auto& in : problem.inputs) {
    std::size_t capable = 0;
    for (std::size_t r : in.readers) capable += gpu_capable(problem.nodes[r]) ? 1 : 0;
    for (std::size_t r : in.readers) {
      if (gpu_capable(problem.nodes[r])) input_share[r] += in.to_gpu / static_cast<double>(capable);
    }
  }
  // Accumulated gains, producers first: chain_gain[v] is what v's chain (v and the producers
  // that feed it alone, transitively) saves on the GPU over the CPU, less the copies into it.
  std::vector<double> chain_gain(n, 0.0);
  for (const std::size_t v : order) {
    const auto& node = problem.nodes[v];
    if (!gpu_capable(node)) continue;  // a fence gains nothing and passes nothing on
    double gain = node.cpu - node.gpu - input_share[v];
    for (const auto* e : in[v]) {
      if (gpu_capable(problem.nodes[e->from])) {
        // A chain continues through a producer that feeds this node alone. A shared producer's
        // placement does not hang on any one consumer: its gain is its own, passed to none.
        if (out[e->from].size() == 1) gain += chain_gain[e->from];
      } else {
        gain -= e->to_gpu;  // data from a fence must cross to the GPU
      }
    }
    chain_gain[v] = gain;
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
      d[v] = chain_gain[v] > 0 ? Device::gpu : Device::cpu;
      continue;
    }
    double back = 0;                       // device-to-host transfers to the consumers on the CPU
    std::map<std::size_t, double> shared;  // a datum read by several: copied back once
    for (const auto* e : out[v]) {
      if (d[e->to] != Device::cpu) continue;
      if (e->datum == MappingProblem::kNoDatum) {
        back += e->to_cpu;
      } else {
        shared[e->datum] = std::max(shared[e->datum], e->to_cpu);
      }
    }
    for (const auto& [datum, cost] : shared) back += cost;
    if (back == 0) {
      d[v] = Device::gpu;  // every consumer is on the GPU: the chain keeps this node
    } else {
      d[v] = chain_gain[v] >= back ? Device::gpu : Device::cpu;
    }
  }
  return d;
}

}  // namespace weft::graph
