// The exact two-device mapper (include/weft/graph/mapping/mincut.hpp): Stone's construction (a
// source for the CPU, a sink for the GPU, each node cut from one of them at its cost on the other,
// each data flow cut at its transfer) solved by Dinic's maximum flow (E. A. Dinitz, 1970).
// Hand-written: the graphs are small (tens to thousands of nodes), the dependency list has no graph
// library (Boost is not among them), and ~80 lines of a textbook algorithm with a brute-force test
// beat pulling one in.
#include "weft/graph/mapping/mincut.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <queue>
#include <string>

#include "dag.hpp"
#include "weft/error.hpp"

namespace weft::graph {

namespace {

class MaxFlow {
 public:
  explicit MaxFlow(std::size_t n) : first_(n, kNone), level_(n), next_(n) {}

  void add_arc(std::size_t from, std::size_t to, double capacity) {
    arcs_.push_back({to, first_[from], capacity});
    first_[from] = arcs_.size() - 1;
    arcs_.push_back({from, first_[to], 0.0});  // the residual arc
    first_[to] = arcs_.size() - 1;
  }

  double run(std::size_t s, std::size_t t) {
    double flow = 0;
    while (levels(s, t)) {
      next_ = first_;
      for (double f; (f = push(s, t, std::numeric_limits<double>::infinity())) > 0;) flow += f;
    }
    return flow;
  }

  /// After run(): whether v is reachable from s in the residual graph (the source side of a
  /// minimum cut; the smallest such side).
  std::vector<bool> source_side(std::size_t s) const {
    std::vector<bool> seen(first_.size(), false);
    std::vector<std::size_t> stack{s};
    seen[s] = true;
    while (!stack.empty()) {
      const std::size_t v = stack.back();
      stack.pop_back();
      for (std::size_t a = first_[v]; a != kNone; a = arcs_[a].next) {
        if (arcs_[a].capacity > kEps && !seen[arcs_[a].to]) {
          seen[arcs_[a].to] = true;
          stack.push_back(arcs_[a].to);
        }
      }
    }
    return seen;
  }

 private:
  static constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  // Residual capacities below this are zero: costs are seconds of ~1e-6 and up, and the flows
  // subtract them from one another.
  static constexpr double kEps = 1e-12;
  struct Arc {
    std::size_t to;
    std::size_t next;
    double capacity;
  };

  bool levels(std::size_t s, std::size_t t) {
    std::fill(level_.begin(), level_.end(), -1);
    std::queue<std::size_t> q;
    level_[s] = 0;
    q.push(s);
    while (!q.empty()) {
      const std::size_t v = q.front();
      q.pop();
      for (std::size_t a = first_[v]; a != kNone; a = arcs_[a].next) {
        if (arcs_[a].capacity > kEps && level_[arcs_[a].to] < 0) {
          level_[arcs_[a].to] = level_[v] + 1;
          q.push(arcs_[a].to);
        }
      }
    }
    return level_[t] >= 0;
  }

  double push(std::size_t v, std::size_t t, double limit) {
    if (v == t) return limit;
    for (std::size_t& a = next_[v]; a != kNone; a = arcs_[a].next) {
      Arc& arc = arcs_[a];
      if (arc.capacity <= kEps || level_[arc.to] != level_[v] + 1) continue;
      const double f = push(arc.to, t, std::min(limit, arc.capacity));
      if (f > 0) {
        arc.capacity -= f;
        arcs_[a ^ 1].capacity += f;  // arcs come in pairs: 2k and 2k+1
        return f;
      }
    }
    return 0;
  }

  std::vector<Arc> arcs_;
  std::vector<std::size_t> first_;
  std::vector<int> level_;
  std::vector<std::size_t> next_;
};

}  // namespace

double mapping_cost(const MappingProblem& problem, const std::vector<Device>& device) {
  if (device.size() != problem.nodes.size()) {
    throw InvalidArgument("weft::graph::mapping_cost: " + std::to_string(device.size()) +
                          " devices for " + std::to_string(problem.nodes.size()) + " nodes");
  }
  detail::check_costs(problem, "mapping_cost");
  double cost = 0;
  for (std::size_t i = 0; i < device.size(); ++i) {
    cost += device[i] == Device::cpu ? problem.nodes[i].cpu : problem.nodes[i].gpu;
  }
  // Per shared datum: the largest crossing cost each way, paid once.
  std::map<std::pair<std::size_t, std::size_t>, std::pair<double, double>> shared;
  for (const auto& e : problem.edges) {
    if (e.from >= device.size() || e.to >= device.size()) {
      throw InvalidArgument("weft::graph::mapping_cost: an edge names a node that does not exist");
    }
    const bool in = device[e.from] == Device::cpu && device[e.to] == Device::gpu;
    const bool back = device[e.from] == Device::gpu && device[e.to] == Device::cpu;
    if (e.datum == MappingProblem::kNoDatum) {
      cost += in ? e.to_gpu : back ? e.to_cpu : 0.0;
      continue;
    }
    auto& [paid_in, paid_back] = shared[{e.from, e.datum}];
    if (in) paid_in = std::max(paid_in, e.to_gpu);
    if (back) paid_back = std::max(paid_back, e.to_cpu);
  }
  for (const auto& [key, paid] : shared) cost += paid.first + paid.second;
  detail::check_inputs(problem, "mapping_cost");
  for (const auto& in : problem.inputs) {
    if (std::any_of(in.readers.begin(), in.readers.end(),
                    [&](std::size_t r) { return device[r] == Device::gpu; })) {
      cost += in.to_gpu;  // copied once for every reader on the GPU
    }
  }
  return cost;
}

Mapping min_cut_mapping(const MappingProblem& problem) {
  detail::check_costs(problem, "min_cut_mapping");
  const std::size_t n = problem.nodes.size();
  // Infinite capacities become one more than everything finite together: no minimum cut
  // crosses such an arc while a finite cut exists, and one always does (every node has a
  // device it can run on).
  double finite = 1.0;
  for (std::size_t i = 0; i < n; ++i) {
    const auto& v = problem.nodes[i];
    if (std::isinf(v.cpu) && std::isinf(v.gpu)) {
      throw InvalidArgument("weft::graph::min_cut_mapping: node " + std::to_string(i) +
                            " has no implementation on either device");
    }
    if (std::isfinite(v.cpu)) finite += v.cpu;
    if (std::isfinite(v.gpu)) finite += v.gpu;
  }
  for (const auto& e : problem.edges) {
    if (e.from >= n || e.to >= n) {
      throw InvalidArgument("weft::graph::min_cut_mapping: an edge names node " +
                            std::to_string(std::max(e.from, e.to)) + " of " + std::to_string(n));
    }
    finite += e.to_gpu + e.to_cpu;  // finite: check_costs
  }
  detail::check_inputs(problem, "min_cut_mapping");
  for (const auto& in : problem.inputs) finite += in.to_gpu;
  auto cap = [&](double c) { return std::isinf(c) ? finite : c; };
  // Source = CPU, sink = GPU. A node on the sink side (GPU) cuts source -> node: its GPU time;
  // on the source side (CPU) it cuts node -> sink: its CPU time. An edge from -> to with `from`
  // on the CPU and `to` on the GPU cuts the arc from -> to (host to device); the other way
  // round, the arc to -> from (device to host).
  //
  // A datum shared by several edges of one producer p gets two auxiliary nodes, so that each
  // direction is cut once: "a host copy is needed" A (consumer c -> A infinite: a CPU consumer
  // puts A on the source side; A -> p with the device-to-host cost: cut when p is on the GPU)
  // and "a device copy is needed" B (B -> c infinite: a GPU consumer puts B on the sink side;
  // p -> B with the host-to-device cost: cut when p is on the CPU).
  std::map<std::pair<std::size_t, std::size_t>, std::vector<const MappingProblem::Edge*>> groups;
  for (const auto& e : problem.edges) {
    if (e.datum != MappingProblem::kNoDatum && e.from != e.to)
      groups[{e.from, e.datum}].push_back(&e);
  }
  // A shared graph input is a datum whose producer is the host itself, i.e. the source: one
  // auxiliary node C per input, source -> C with the host-to-device cost and C -> reader
  // infinite. A reader on the GPU side puts C there too, cutting source -> C once.
  const std::size_t s = n, t = n + 1;
  MaxFlow flow(n + 2 + 2 * groups.size() + problem.inputs.size());
  for (std::size_t i = 0; i < n; ++i) {
    flow.add_arc(s, i, cap(problem.nodes[i].gpu));
    flow.add_arc(i, t, cap(problem.nodes[i].cpu));
  }
  for (const auto& e : problem.edges) {
    if (e.from == e.to || e.datum != MappingProblem::kNoDatum) continue;  // never cut / grouped
    flow.add_arc(e.from, e.to, cap(e.to_gpu));
    flow.add_arc(e.to, e.from, cap(e.to_cpu));
  }
  std::size_t aux = n + 2;
  for (const auto& [key, edges] : groups) {
    const std::size_t host_copy = aux++, device_copy = aux++;
    double in = 0, back = 0;
    for (const auto* e : edges) {
      in = std::max(in, e->to_gpu);
      back = std::max(back, e->to_cpu);
      flow.add_arc(e->to, host_copy, finite);
      flow.add_arc(device_copy, e->to, finite);
    }
    flow.add_arc(host_copy, key.first, cap(back));
    flow.add_arc(key.first, device_copy, cap(in));
  }
  for (const auto& in : problem.inputs) {
    const std::size_t device_copy = aux++;
    flow.add_arc(s, device_copy, cap(in.to_gpu));
    for (std::size_t r : in.readers) flow.add_arc(device_copy, r, finite);
  }
  flow.run(s, t);
  // The residual source side is the smallest minimum cut's source side: nodes not reachable
  // from the source go to the GPU, so ties go to the GPU.
  const std::vector<bool> cpu_side = flow.source_side(s);
  Mapping m;
  m.device.resize(n);
  for (std::size_t i = 0; i < n; ++i) m.device[i] = cpu_side[i] ? Device::cpu : Device::gpu;
  m.cost = mapping_cost(problem, m.device);
  return m;
}

}  // namespace weft::graph
