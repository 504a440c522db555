// weft/graph/runtime.hpp - runs a Graph on the CPU executor and one device: maps each node to the
// CPU or the GPU with a policy and the cost models, then runs it as a scoreboard - a node starts
// when its producers are done (a GPU node as soon as its GPU producers are enqueued: streams and
// events order them), data are copied where a node needs them (each copy modified, shared or
// invalid, as in a cache-coherence protocol: detail/coherence.hpp), and every measured node and
// transfer refines the models.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "weft/graph/device/bfc_allocator.hpp"
#include "weft/graph/graph.hpp"
#include "weft/graph/mapping/cost_models.hpp"
#include "weft/graph/mapping/mincut.hpp"

namespace weft::cpu {
class Executor;
}

namespace weft::graph {

namespace detail {
class DeviceBackend;
struct DeviceMemory;
struct GraphImpl;
}  // namespace detail

/// How nodes are mapped (the names are those of the CLI and of the benchmark outputs).
///   a_free  CPU only: every node on the CPU (map_a_free);
///   d_map   accelerator first: every node with a GPU implementation on the GPU (map_d_map);
///   pptm    gains predicted and accumulated along chains of GPU-capable nodes, each node then
///           placed against the copies its placement costs (map_pptm, policies.hpp);
///   mincut  the cheapest mapping under the additive model (min_cut_mapping, mincut.hpp);
///   heft    earliest-finish-time list scheduling (heft_schedule, schedule.hpp).
enum class Policy { a_free, d_map, pptm, mincut, heft };
inline constexpr Policy kAllPolicies[] = {Policy::a_free, Policy::d_map, Policy::pptm,
                                          Policy::mincut, Policy::heft};
[[nodiscard]] const char* to_string(Policy p) noexcept;
/// "a_free", "a-free", "d_map", "d-map", "pptm", "mincut", "heft". Throws InvalidArgument
/// listing the choices.
[[nodiscard]] Policy parse_policy(std::string_view name);

/// The device a runtime drives. automatic: CUDA device `cuda_device` if one is usable, else
/// none; emulated: host memory and threads standing in for a GPU (tests, CI).
enum class DeviceKind { automatic, cuda, emulated, none };

struct RuntimeOptions {
  DeviceKind device = DeviceKind::automatic;
  int cuda_device = 0;
  /// Streams GPU nodes are spread over (a GPU node takes its first GPU producer's stream).
  /// Copies have streams of their own (in, out, and a copy-back stream beside each compute
  /// stream for outputs the host needs, enqueued with their kernel), so they overlap the
  /// kernels. The default,
  /// one, runs GPU nodes one at a time, as the cost models and the schedulers assume (a bulk
  /// kernel fills the GPU; two at once would each measure the other's time). At most
  /// kMaxComputeStreams (64).
  int compute_streams = 1;
  /// CPU nodes running at once; 0: no limit. The default, one, gives each CPU node every
  /// worker for its parallel loops, as the models assume: nodes measured while sharing the
  /// workers would teach the models times that depend on what ran beside them.
  int cpu_nodes_at_once = 1;
  /// Refine the cost models from every run's measurements.
  bool learn = true;
  /// The device memory allocator's regions.
  BfcOptions memory;
};

/// One executed node. Times are seconds since the run started (GPU nodes: from CUDA events,
/// placed on the host clock by an event recorded when the run started).
struct NodeRecord {
  std::size_t node = 0;
  Device device = Device::cpu;
  int lane = 0;  // CPU: the executor worker (or -1: the dispatcher); GPU: the stream
  double start = 0, end = 0;
  /// The models' time for the node on its device (0 without a model). A CPU node's allows for
  /// the copies its mapping's previous run had in flight beside it (CostModels::predict_cpu;
  /// the first run of a mapping predicts it alone).
  double predicted = 0;
  std::size_t size = 0;  // the bytes its arguments span (the models' size)
  /// The share of [start, end] with at least one host<->device copy in flight (0..1): a CPU
  /// kernel then shares host memory bandwidth with the copy engines (cost_models.hpp).
  double copy_overlap = 0;
  /// GPU: how long the runtime's dispatcher thread spent in the kernel's launch function. It
  /// should be microseconds: a launch that synchronizes (waits for the GPU) holds the dispatch
  /// and completion of every other node meanwhile. Milliseconds from a launch that does not
  /// synchronize mean the dispatcher was off its core, waiting behind CPU nodes that keep every
  /// worker busy (which is why GPU nodes are launched before the CPU nodes ready with them are
  /// submitted). 0 on the CPU.
  double launch_seconds = 0;
  /// When the dispatcher handed the node on, in seconds since the run started: a CPU node
  /// submitted to the executor, a GPU node's launch function called. Of the nodes ready at
  /// once, the GPU nodes are enqueued before the CPU nodes are submitted.
  double issued = 0;
};

struct TransferRecord {
  std::size_t data = 0;
  bool to_device = true;
  std::size_t bytes = 0;
  int stream = 0;
  double start = 0, end = 0;
};

struct RunReport {
  /// Graph::id() of the graph that ran: its nodes are that graph's indices. 0 in a report made
  /// by hand, which Calibration::add and the traces take for whichever graph they are given.
  std::uint64_t graph = 0;
  std::string policy;  // the policy's name, or "forced"
  std::vector<Device> mapping;
  double seconds = 0;         // the whole run, wall clock, including the final copies back
  double predicted_cost = 0;  // the additive model's cost of the mapping (0 without models)
  std::size_t bytes_to_device = 0;
  std::size_t bytes_to_host = 0;
  std::vector<NodeRecord> nodes;  // in completion order
  std::vector<TransferRecord> transfers;
};

/// The share of [start, end] during which at least one of `transfers` was in flight: 0 for an
/// empty span. NodeRecord::copy_overlap.
[[nodiscard]] double share_beside_transfers(double start, double end,
                                            const std::vector<TransferRecord>& transfers);

/// Runs graphs. One run at a time (run() is not reentrant; calls from several threads are
/// serialised by the caller). The executor must outlive the runtime; a graph run on a device
/// keeps device copies of its data between runs (released with the graph, or by release()).
///
/// @code
///   weft::cpu::Executor ex;
///   weft::graph::Runtime rt(ex);
///   auto report = rt.run(graph, weft::graph::Policy::pptm);
/// @endcode
/// The most compute streams a runtime may have (RuntimeOptions::compute_streams).
inline constexpr int kMaxComputeStreams = 64;

class Runtime {
 public:
  explicit Runtime(cpu::Executor& executor, RuntimeOptions options = {});
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  [[nodiscard]] bool has_device() const noexcept;
  /// "cuda:0 NVIDIA H100 ...", "emulated device", or "none (<why>)".
  [[nodiscard]] std::string device_name() const;

  /// Whether runs refine the models (RuntimeOptions::learn); e.g. off for cold first runs.
  void set_learning(bool on) noexcept { options_.learn = on; }
  [[nodiscard]] bool learning() const noexcept { return options_.learn; }

  [[nodiscard]] CostModels& models() noexcept { return models_; }
  [[nodiscard]] const CostModels& models() const noexcept { return models_; }

  /// The mapping problem of `graph` under the models: per node its predicted time on each
  /// device (a graph input's transfer to the device, and a final output's back, are in its GPU
  /// time), per data flow the transfer each way. Throws InvalidState naming a missing model.
  [[nodiscard]] MappingProblem problem(const Graph& graph) const;
  /// The policy's mapping of `graph` (everything on the CPU when there is no device). Throws
  /// InvalidState for a missing model (a_free and d_map need none).
  [[nodiscard]] std::vector<Device> map(const Graph& graph, Policy policy) const;

  /// The bytes `mapping` would move between host and device in one run (graph inputs to the
  /// GPU nodes that read them, data a node needs from the other device, outputs back), exactly
  /// as a run moves them. Throws InvalidArgument for a mapping of the wrong size.
  [[nodiscard]] std::size_t planned_transfer_bytes(const Graph& graph,
                                                   const std::vector<Device>& mapping) const;

  /// Runs `graph` once with the policy's mapping and returns what happened. Graph inputs are
  /// taken from their host buffers; data the graph writes are in their host buffers when it
  /// returns (graph-owned intermediates stay where they are: Graph::fetch). When a node throws,
  /// the run stops issuing nodes, waits for those in flight, and throws weft::Error naming the
  /// node with the original exception nested; every node has then run, failed or not run.
  /// One run at a time on a runtime, and of a graph: a run started while another of this
  /// runtime, or of this graph on any runtime, is in progress (from another thread, or from a
  /// node) throws weft::InvalidState.
  RunReport run(Graph& graph, Policy policy);
  /// Runs with a given mapping. Throws InvalidArgument for a mapping of the wrong size, a node
  /// mapped to a device it has no implementation for, or the GPU without a device.
  RunReport run(Graph& graph, const std::vector<Device>& mapping);

  /// Frees `graph`'s device copies (bringing back values that live only there).
  void release(Graph& graph);

  /// The device allocator's statistics (all zero without a device).
  [[nodiscard]] BfcStats memory_stats() const;

 private:
  RunReport execute(Graph& graph, const std::vector<Device>& mapping, std::string policy);
  /// Sets each node's predicted time in `report` and remembers its share beside copies for
  /// the mapping's next run.
  void predict_and_remember(detail::GraphImpl& g, const std::vector<Device>& mapping,
                            RunReport& report) const;

  cpu::Executor& executor_;
  RuntimeOptions options_;
  std::unique_ptr<detail::DeviceBackend> device_;
  std::string no_device_why_;
  std::shared_ptr<detail::DeviceMemory> memory_;  // shared with the graphs run on the device
  CostModels models_;
  // Set while a run or release is in progress (acq_rel exchange on entry, release store on
  // exit: each run's use of the device and models happens before the next one's).
  std::atomic<bool> busy_{false};
};

}  // namespace weft::graph
