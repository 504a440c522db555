#include "weft/graph/runtime.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <vector>

#include "common/flag_claim.hpp"
#include "device/device_backend.hpp"
#include "dispatcher.hpp"
#include "graph_impl.hpp"
#include "weft/cpu/executor.hpp"
#include "weft/error.hpp"
#include "weft/graph/mapping/policies.hpp"
#include "weft/graph/mapping/schedule.hpp"

namespace weft::graph {

const char* to_string(Policy p) noexcept {
  switch (p) {
    case Policy::a_free:
      return "a_free";
    case Policy::d_map:
      return "d_map";
    case Policy::pptm:
      return "pptm";
    case Policy::mincut:
      return "mincut";
    case Policy::heft:
      return "heft";
  }
  return "?";
}

double share_beside_transfers(double start, double end,
                              const std::vector<TransferRecord>& transfers) {
  if (!(end > start)) return 0;
  std::vector<std::pair<double, double>> spans;  // the transfers' parts inside [start, end]
  for (const TransferRecord& t : transfers) {
    const double a = std::max(start, t.start), b = std::min(end, t.end);
    if (b > a) spans.emplace_back(a, b);
  }
  std::sort(spans.begin(), spans.end());
  double covered = 0, reached = start;  // the union: copies on two streams may overlap
  for (const auto& [a, b] : spans) {
    if (b <= reached) continue;
    covered += b - std::max(a, reached);
    reached = b;
  }
  return std::min(1.0, covered / (end - start));
}

Policy parse_policy(std::string_view name) {
  for (Policy p : kAllPolicies) {
    std::string n = to_string(p);
    if (name == n) return p;
    for (char& c : n) c = c == '_' ? '-' : c;
    if (name == n) return p;
  }
  throw InvalidArgument("weft::graph: unknown policy '" + std::string(name) +
                        "' (choose a_free, d_map, pptm, mincut or heft)");
}

Runtime::Runtime(cpu::Executor& executor, RuntimeOptions options)
    : executor_(executor), options_(options) {
  if (options_.compute_streams < 1 || options_.compute_streams > kMaxComputeStreams) {
    throw InvalidArgument("weft::graph::RuntimeOptions::compute_streams must be in [1, " +
                          std::to_string(kMaxComputeStreams) + "] (got " +
                          std::to_string(options_.compute_streams) + ")");
  }
  if (options_.cpu_nodes_at_once < 0) {
    throw InvalidArgument("weft::graph::RuntimeOptions::cpu_nodes_at_once must be >= 0 (got " +
                          std::to_string(options_.cpu_nodes_at_once) + ")");
  }
  // The compute streams, one each for copies in and out, and a copy-back stream beside each
  // compute stream (the copies issued as a GPU node is enqueued: Dispatcher::start_gpu).
  const int streams = 2 * options_.compute_streams + 2;
  switch (options_.device) {
    case DeviceKind::none:
      no_device_why_ = "none asked for";
      break;
    case DeviceKind::emulated:
      device_ = detail::make_emulated_device(streams);
      break;
    case DeviceKind::cuda:
    case DeviceKind::automatic:
      device_ = detail::make_cuda_device(options_.cuda_device, streams, no_device_why_);
      if (!device_ && options_.device == DeviceKind::cuda) {
        throw InvalidArgument("weft::graph::Runtime: DeviceKind::cuda, but " + no_device_why_);
      }
      break;
  }
  if (device_) {
    auto memory = std::make_shared<detail::DeviceMemory>();
    memory->allocator = std::make_shared<BfcAllocator>(device_->backing(), options_.memory);
    detail::DeviceBackend* dev = device_.get();
    memory->copy_to_host = [dev](void* host, const void* device, std::size_t bytes) {
      dev->copy_to_host_now(host, device, bytes);
    };
    memory->pin = [dev](void* host, std::size_t bytes) { return dev->pin(host, bytes); };
    memory->unpin = dev->unpinner();
    memory_ = memory;
  }
}

Runtime::~Runtime() {
  // Graphs may outlive the runtime: their device copies are then freed with them, but nothing
  // can bring a value back from the device any more.
  if (memory_) {
    memory_->copy_to_host = [](void*, const void*, std::size_t) {
      throw InvalidState(
          "weft::graph::Graph::fetch: the value lives only on the device of a runtime that no "
          "longer exists (release() the graph before destroying its runtime)");
    };
  }
}

bool Runtime::has_device() const noexcept { return device_ != nullptr; }

std::string Runtime::device_name() const {
  return device_ ? device_->name() : "none (" + no_device_why_ + ")";
}

BfcStats Runtime::memory_stats() const {
  if (!memory_) return {};
  return memory_->allocator->stats();
}

MappingProblem Runtime::problem(const Graph& graph) const {
  const auto& g = detail::GraphAccess::impl(graph);
  const double inf = MappingProblem::kNoImplementation;
  auto h2d = [&](std::size_t bytes) { return models_.predict("gpu", kTransferToDevice, bytes); };
  auto d2h = [&](std::size_t bytes) { return models_.predict("gpu", kTransferToHost, bytes); };
  // A node reads a graph input when it reads a datum no earlier node wrote (no flow brings
  // it). Read by several GPU-capable nodes, the input is copied once for all of them (the
  // runtime keeps one device copy): a shared input of the problem. Read by one, its copy is
  // part of that node's GPU cost.
  auto is_graph_input = [&](const detail::NodeEntry& n, const Arg& a) {
    if (a.access == Access::write) return false;
    for (const auto& [producer, data] : n.flows) {
      if (data == a.data.index()) return false;
    }
    return true;
  };
  std::map<std::size_t, std::vector<std::size_t>> input_readers;  // datum -> GPU-capable readers
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    if (!g.nodes[i].kernel.gpu) continue;
    for (const Arg& a : g.nodes[i].args) {
      if (!is_graph_input(g.nodes[i], a)) continue;
      auto& readers = input_readers[a.data.index()];
      if (readers.empty() || readers.back() != i) readers.push_back(i);  // once per node
    }
  }
  MappingProblem p;
  for (const auto& [datum, readers] : input_readers) {
    if (readers.size() > 1) p.inputs.push_back({readers, h2d(g.data[datum].bytes)});
  }
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const detail::NodeEntry& n = g.nodes[i];
    const auto size = static_cast<double>(n.bytes);
    MappingProblem::Node node;
    node.cpu = n.kernel.cpu ? models_.predict("cpu", n.kernel.name, size) : inf;
    node.gpu = inf;
    if (n.kernel.gpu) {
      node.gpu = models_.predict("gpu", n.kernel.name, size);
      std::vector<std::size_t> charged;  // a datum passed twice to one node is copied once
      for (const Arg& a : n.args) {
        const detail::DataEntry& d = g.data[a.data.index()];
        if (is_graph_input(n, a) && input_readers.at(a.data.index()).size() == 1 &&
            std::find(charged.begin(), charged.end(), a.data.index()) == charged.end()) {
          node.gpu += h2d(d.bytes);  // an input only this node reads
          charged.push_back(a.data.index());
        }
        if (a.access != Access::read && !d.owned &&
            d.last_writer == static_cast<std::ptrdiff_t>(i)) {
          node.gpu += d2h(d.bytes);  // a final output, back to its host buffer
        }
      }
    }
    p.nodes.push_back(node);
    for (std::size_t producer : n.producers) {
      bool flows = false;
      for (const auto& [from, data] : n.flows) {
        if (from != producer) continue;
        // One edge per datum, grouped by it: read by several nodes on the other device, it is
        // copied (and paid for) once.
        p.edges.push_back({producer, i, h2d(g.data[data].bytes), d2h(g.data[data].bytes), data});
        flows = true;
      }
      if (!flows) p.edges.push_back({producer, i, 0.0, 0.0});  // ordering only: costs nothing
    }
  }
  return p;
}

namespace {

void check_mapping_size(const detail::GraphImpl& g, const std::vector<Device>& mapping,
                        const char* who) {
  if (mapping.size() != g.nodes.size()) {
    throw InvalidArgument(std::string("weft::graph::Runtime::") + who + ": a mapping of " +
                          std::to_string(mapping.size()) + " nodes for a graph of " +
                          std::to_string(g.nodes.size()));
  }
}

}  // namespace

std::vector<Device> Runtime::map(const Graph& graph, Policy policy) const {
  if (std::find(std::begin(kAllPolicies), std::end(kAllPolicies), policy) ==
      std::end(kAllPolicies)) {
    throw InvalidArgument("weft::graph::Runtime::map: unknown policy " +
                          std::to_string(static_cast<int>(policy)));
  }
  const auto& g = detail::GraphAccess::impl(graph);
  if (!device_ || policy == Policy::a_free || policy == Policy::d_map) {
    std::vector<Device> m;
    for (std::size_t i = 0; i < g.nodes.size(); ++i) {
      const Kernel& k = g.nodes[i].kernel;
      const bool gpu = device_ && (policy == Policy::d_map ? static_cast<bool>(k.gpu) : !k.cpu);
      if (!gpu && !k.cpu) {
        throw InvalidArgument("weft::graph::Runtime::map: " + g.describe(i) +
                              " has no CPU implementation and there is no device (" +
                              device_name() + ")");
      }
      m.push_back(gpu ? Device::gpu : Device::cpu);
    }
    return m;
  }
  const MappingProblem p = problem(graph);
  switch (policy) {
    case Policy::pptm:
      return map_pptm(p);
    case Policy::mincut:
      return min_cut_mapping(p).device;
    case Policy::heft:
      return heft_schedule(p).device;
    default:
      break;
  }
  return {};  // a_free and d_map returned above; the policies are checked at the top
}

std::size_t Runtime::planned_transfer_bytes(const Graph& graph,
                                            const std::vector<Device>& mapping) const {
  const auto& g = detail::GraphAccess::impl(graph);
  check_mapping_size(g, mapping, "planned_transfer_bytes");
  // The dispatcher's copy decisions depend only on each datum's accesses in program order
  // (dependencies keep that order per datum), so replaying them in node order gives its bytes.
  std::vector<detail::Coherence> copies(g.data.size(), detail::Coherence(2));
  for (std::size_t i = 0; i < g.data.size(); ++i) copies[i].reset_to(detail::Coherence::kHost);
  std::size_t bytes = 0;
  for (std::size_t n = 0; n < g.nodes.size(); ++n) {
    const std::size_t at = mapping[n] == Device::gpu ? 1 : detail::Coherence::kHost;
    for (const Arg& a : g.nodes[n].args) {
      const std::size_t i = a.data.index();
      if (a.access != Access::write &&
          copies[i].read_at(at, "data '" + g.data[i].name + "'") != detail::Coherence::kNone) {
        bytes += g.data[i].bytes;
      }
      if (a.access != Access::read) copies[i].write_at(at);
    }
  }
  for (std::size_t i = 0; i < g.data.size(); ++i) {
    if (!g.data[i].owned && g.data[i].written && !copies[i].valid(detail::Coherence::kHost)) {
      bytes += g.data[i].bytes;
    }
  }
  return bytes;
}

RunReport Runtime::run(Graph& graph, Policy policy) {
  return execute(graph, map(graph, policy), to_string(policy));
}

RunReport Runtime::run(Graph& graph, const std::vector<Device>& mapping) {
  return execute(graph, mapping, "forced");
}

RunReport Runtime::execute(Graph& graph, const std::vector<Device>& mapping, std::string policy) {
  const weft::detail::FlagClaim runtime_claim(
      busy_,
      "weft::graph::Runtime::run: a run is already in progress on this "
      "runtime (run() is not reentrant; serialise calls)");
  auto& g = detail::GraphAccess::impl(graph);
  check_mapping_size(g, mapping, "run");
  bool uses_gpu = false;
  for (std::size_t i = 0; i < mapping.size(); ++i) {
    const Kernel& k = g.nodes[i].kernel;
    if (mapping[i] == Device::gpu) {
      uses_gpu = true;
      if (!k.gpu) {
        throw InvalidArgument("weft::graph::Runtime::run: " + g.describe(i) +
                              " is mapped to the GPU, but kernel '" + k.name +
                              "' has no GPU implementation (it is a fence)");
      }
      if (!device_) {
        throw InvalidArgument("weft::graph::Runtime::run: " + g.describe(i) +
                              " is mapped to the GPU, but the runtime has no device (" +
                              device_name() + ")");
      }
    } else if (!k.cpu) {
      throw InvalidArgument("weft::graph::Runtime::run: " + g.describe(i) +
                            " is mapped to the CPU, but kernel '" + k.name +
                            "' has no CPU implementation");
    }
  }
  weft::detail::FlagClaim graph_claim(g.running,
                                      "weft::graph::Runtime::run: the graph is already running");
  if (uses_gpu) {
    if (g.memory && g.memory != memory_) {
      throw InvalidState(
          "weft::graph::Runtime::run: the graph holds device copies of another runtime; "
          "release() it there first");
    }
    g.memory = memory_;
    g.pin_host_buffers();  // once per buffer; outside the run's time
  }
  RunReport report;
  report.graph = graph.id();
  report.policy = std::move(policy);
  report.mapping = mapping;
  try {
    report.predicted_cost = mapping_cost(problem(graph), mapping);
  } catch (const InvalidState&) {
    report.predicted_cost = 0;  // no models yet
  }
  {
    detail::Dispatcher d(g, mapping, device_.get(), memory_.get(), executor_,
                         options_.compute_streams, options_.cpu_nodes_at_once);
    d.run(report);
  }
  graph_claim.release();  // the graph's nodes are done; the runtime learns from them below
  predict_and_remember(g, mapping, report);
  if (options_.learn) {
    for (const NodeRecord& n : report.nodes) {
      const std::string& kernel = g.nodes[n.node].kernel.name;
      const auto size = static_cast<double>(n.size);
      if (n.device == Device::cpu) {
        models_.observe_cpu(kernel, size, n.end - n.start, n.copy_overlap);
      } else {
        models_.observe("gpu", kernel, size, n.end - n.start);
      }
    }
    for (const TransferRecord& t : report.transfers) {
      models_.observe("gpu", t.to_device ? kTransferToDevice : kTransferToHost,
                      static_cast<double>(t.bytes), t.end - t.start);
    }
  }
  return report;
}

void Runtime::predict_and_remember(detail::GraphImpl& g, const std::vector<Device>& mapping,
                                   RunReport& report) const {
  // The models' times before this run teaches them; a CPU node's with the share beside copies
  // that this mapping's runs so far had (none yet: alone).
  auto& history = g.overlap_by_mapping;
  const auto seen = history.find(mapping);
  for (NodeRecord& n : report.nodes) {
    const std::string& kernel = g.nodes[n.node].kernel.name;
    const auto size = static_cast<double>(n.size);
    if (n.device == Device::cpu) {
      const double expected = seen == history.end() ? 0 : seen->second[n.node];
      n.predicted =
          models_.find("cpu", kernel) == nullptr ? 0 : models_.predict_cpu(kernel, size, expected);
    } else {
      const LinearCostModel* m = models_.find("gpu", kernel);
      n.predicted = m == nullptr ? 0 : m->predict(size);
    }
  }
  if (seen == history.end() && history.size() >= detail::GraphImpl::kOverlapMappings) {
    history.clear();  // a caller trying many mappings; the recent ones come back
  }
  std::vector<double>& shares = history[mapping];
  const bool first = shares.empty();
  shares.resize(g.nodes.size(), 0.0);
  for (const NodeRecord& n : report.nodes) {
    shares[n.node] = first ? n.copy_overlap : 0.5 * (shares[n.node] + n.copy_overlap);
  }
}

void Runtime::release(Graph& graph) {
  const weft::detail::FlagClaim runtime_claim(
      busy_,
      "weft::graph::Runtime::release: a run is in progress on this "
      "runtime");
  auto& g = detail::GraphAccess::impl(graph);
  const weft::detail::FlagClaim graph_claim(g.running,
                                            "weft::graph::Runtime::release: the graph is running");
  if (g.memory && g.memory == memory_) {
    g.release_device_copies();
    g.memory.reset();
  }
}

}  // namespace weft::graph
