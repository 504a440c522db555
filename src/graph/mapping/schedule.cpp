// Two-device list scheduling and HEFT (include/weft/graph/mapping/schedule.hpp).
#include "weft/graph/mapping/schedule.hpp"

#include <algorithm>
#include <cmath>
#include <queue>
#include <string>

#include "dag.hpp"
#include "weft/error.hpp"

namespace weft::graph {

namespace {

using detail::Dag;
using detail::make_dag;

double cost_on(const MappingProblem::Node& v, Device d) { return d == Device::cpu ? v.cpu : v.gpu; }

// Mean over the devices the node can run on (HEFT's w-bar).
double mean_time(const MappingProblem::Node& v) {
  if (!std::isfinite(v.gpu)) return v.cpu;
  if (!std::isfinite(v.cpu)) return v.gpu;
  return 0.5 * (v.cpu + v.gpu);
}

// Upward ranks, outputs first.
std::vector<double> upward_ranks(const MappingProblem& p, const Dag& g) {
  std::vector<double> rank(p.nodes.size(), 0.0);
  for (auto it = g.topo.rbegin(); it != g.topo.rend(); ++it) {
    double tail = 0;
    for (const auto* e : g.out[*it]) {
      tail = std::max(tail, 0.5 * (e->to_gpu + e->to_cpu) + rank[e->to]);
    }
    rank[*it] = mean_time(p.nodes[*it]) + tail;
  }
  return rank;
}

// List scheduling: `choose(node, ready time on each device, extra time on each device)` picks
// the device.
template <class Choose>
Schedule list_schedule(const MappingProblem& p, const Dag& g, Choose choose) {
  const std::size_t n = p.nodes.size();
  const std::vector<double> rank = upward_ranks(p, g);
  Schedule s;
  s.device.assign(n, Device::cpu);
  s.start.assign(n, 0.0);
  s.finish.assign(n, 0.0);
  std::vector<std::size_t> waiting(n);
  for (std::size_t i = 0; i < n; ++i) waiting[i] = g.in[i].size();
  auto lower = [&](std::size_t a, std::size_t b) {
    return rank[a] < rank[b] || (rank[a] == rank[b] && a > b);
  };
  std::priority_queue<std::size_t, std::vector<std::size_t>, decltype(lower)> ready(lower);
  for (std::size_t i = 0; i < n; ++i) {
    if (waiting[i] == 0) ready.push(i);
  }
  // Shared graph inputs: the first reader placed on the GPU copies one in (its time counts
  // in that reader's duration, as an unshared input's does in its gpu cost); later GPU
  // readers find it there.
  std::vector<std::vector<std::size_t>> inputs_of(n);
  for (std::size_t k = 0; k < p.inputs.size(); ++k) {
    for (std::size_t r : p.inputs[k].readers) inputs_of[r].push_back(k);  // checked by make_dag
  }
  std::vector<bool> input_on_gpu(p.inputs.size(), false);
  auto copy_in = [&](std::size_t v) {
    double t = 0;
    for (std::size_t k : inputs_of[v]) t += input_on_gpu[k] ? 0.0 : p.inputs[k].to_gpu;
    return t;
  };
  double free_at[2] = {0.0, 0.0};  // when the CPU and the GPU are next free
  while (!ready.empty()) {
    const std::size_t v = ready.top();
    ready.pop();
    // When v's inputs are there, on each device.
    double inputs[2] = {0.0, 0.0};
    for (const auto* e : g.in[v]) {
      const Device from = s.device[e->from];
      inputs[0] = std::max(inputs[0], s.finish[e->from] + (from == Device::gpu ? e->to_cpu : 0.0));
      inputs[1] = std::max(inputs[1], s.finish[e->from] + (from == Device::cpu ? e->to_gpu : 0.0));
    }
    const double at[2] = {std::max(inputs[0], free_at[0]), std::max(inputs[1], free_at[1])};
    const double extra[2] = {0.0, copy_in(v)};
    const Device d = choose(v, at, extra);
    const int k = d == Device::cpu ? 0 : 1;
    s.device[v] = d;
    s.start[v] = at[k];
    s.finish[v] = at[k] + cost_on(p.nodes[v], d) + extra[k];
    if (d == Device::gpu) {
      for (std::size_t i : inputs_of[v]) input_on_gpu[i] = true;
    }
    free_at[k] = s.finish[v];
    s.makespan = std::max(s.makespan, s.finish[v]);
    for (const auto* e : g.out[v]) {
      if (--waiting[e->to] == 0) ready.push(e->to);
    }
  }
  return s;
}

}  // namespace

Schedule simulate_schedule(const MappingProblem& problem, const std::vector<Device>& device) {
  if (device.size() != problem.nodes.size()) {
    throw InvalidArgument("weft::graph::simulate_schedule: " + std::to_string(device.size()) +
                          " devices for " + std::to_string(problem.nodes.size()) + " nodes");
  }
  detail::check_costs(problem, "simulate_schedule");
  for (std::size_t i = 0; i < device.size(); ++i) {
    if (!std::isfinite(cost_on(problem.nodes[i], device[i]))) {
      throw InvalidArgument("weft::graph::simulate_schedule: node " + std::to_string(i) +
                            " is mapped to a device it has no implementation for");
    }
  }
  const Dag g = make_dag(problem, "simulate_schedule");
  return list_schedule(problem, g,
                       [&](std::size_t v, const double*, const double*) { return device[v]; });
}

Schedule heft_schedule(const MappingProblem& problem) {
  detail::check_costs(problem, "heft_schedule");
  const Dag g = make_dag(problem, "heft_schedule");
  for (std::size_t i = 0; i < problem.nodes.size(); ++i) {
    const auto& v = problem.nodes[i];
    if (std::isinf(v.cpu) && std::isinf(v.gpu)) {
      throw InvalidArgument("weft::graph::heft_schedule: node " + std::to_string(i) +
                            " has no implementation on either device");
    }
  }
  return list_schedule(problem, g, [&](std::size_t v, const double* at, const double* extra) {
    const auto& node = problem.nodes[v];
    // Earliest finish times (a shared input not yet on the GPU is copied in first).
    const double cpu = at[0] + node.cpu + extra[0], gpu = at[1] + node.gpu + extra[1];
    return gpu < cpu ? Device::gpu : Device::cpu;
  });
}

}  // namespace weft::graph
