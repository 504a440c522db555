// bench/graph/graph_suite.hpp - `weft bench graph`: the five factor pipelines at
// two sizes, each run with the mappings of PPTM (weft's), A-Free, D-Map, the minimum cut and
// HEFT, alternating in one process, every run checked against the sequential reference; the
// cost models calibrated first in the same process, their prediction error reported.
#pragma once

#include <cstddef>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "factor_kernels.hpp"
#include "harness/harness.hpp"
#include "weft/cpu/options.hpp"
#include "weft/graph/runtime.hpp"

namespace weft::bench::graph {

struct GraphSuiteOptions {
  /// Floats in total over the five input series; each gives a label "<n/1e6>m".
  std::vector<std::size_t> totals = {32'000'000, 320'000'000};
  int samples = 5;
  /// "auto" (the CUDA device; refused without one), "emulated" (smoke runs; figures meaningless).
  std::string device = "auto";
  std::vector<std::string> apps;  // empty: all five
  std::string trace_dir;          // non-empty: a Chrome trace and an SVG per app, size and policy
  std::string models_db;          // non-empty: store the models there after the run
  std::string machine;            // the models' machine key
  /// Also time every mapping of each application at the largest size (nodes without a GPU
  /// implementation stay on the CPU), skipping those whose simulated makespan is over
  /// kExhaustivePrune times the fastest policy's measured time: the best measured mapping
  /// there is, which bounds what any mapping policy can gain over D-Map.
  bool exhaustive = false;
  int exhaustive_samples = 3;
  /// The CPU executor's workers' binding (ExecutorOptions::pinning).
  weft::cpu::Pinning pinning = weft::cpu::Pinning::automatic;
  /// The CPU executor's idle spin (ExecutorOptions::spin_before_sleep); negative: its default.
  long spin_before_sleep_us = -1;
  /// The factor kernels' threshold for writing outputs past the caches
  /// (kernels::set_stream_min_bytes; SIZE_MAX: only outputs going to the GPU); unset: the
  /// default, kernels::default_stream_min_bytes().
  std::optional<std::size_t> stream_min_bytes;
  /// Non-empty: every node of every calibration and timed run, one CSV row each (NodeLog).
  std::string node_log;
};

/// Every node and copy of the runs it is given, as CSV: phase (calibrate-cold, calibrate,
/// warmup, sample), app, size, policy, the run's sequence number, the node ("-" for a copy),
/// its kernel (transfer:h2d or transfer:d2h for a copy) and device, the bytes its arguments
/// span (a copy's bytes), start, end and measured ms, the models' predicted ms and its share of
/// time beside copies (empty for a copy), the run's ms, what it was (the node's label or
/// the copied datum's name, quoted), and the ms its launch held the dispatcher (GPU nodes; 0 for
/// a CPU node, empty for a copy). The figures the suite prints are
/// medians; this is for looking at single runs (a tail, a calibration that measured otherwise than
/// the timed runs).
class NodeLog {
 public:
  /// Throws weft::Error naming the file when it cannot be created.
  explicit NodeLog(const std::string& path);
  void add(const char* phase, const std::string& app, std::size_t total, const char* policy,
           const weft::graph::Graph& graph, const weft::graph::RunReport& report);

 private:
  struct Close {
    void operator()(std::FILE* f) const noexcept { std::fclose(f); }
  };
  std::unique_ptr<std::FILE, Close> file_;
  std::size_t runs_ = 0;
};

/// Mappings whose simulated makespan (schedule.hpp, from the calibrated models) is over this
/// many times the fastest policy's measured time are not timed by the exhaustive search. The
/// models' per-kernel errors are within ~10% and a makespan already counts the CPU and the
/// GPU overlapping, so such a mapping cannot be the fastest.
inline constexpr double kExhaustivePrune = 2.0;

/// Calibrates `runtime`'s cost models: each application at each size (floats in total) with
/// every node on the CPU, then every GPU-capable node on the GPU; the first (cold) run of each
/// teaches nothing, the next two are measured, and at the end every model measured at two sizes
/// is the least-squares fit of all its measurements (weft::graph::Calibration). Prints progress
/// on stderr.
void calibrate(weft::graph::Runtime& runtime, const std::vector<std::string>& apps,
               std::vector<std::size_t> totals, NodeLog* log = nullptr);

/// Runs the suite. Throws weft::Error when the device asked for is not there.
Suite run_graph_suite(const GraphSuiteOptions& options);

/// One letter per node: C (CPU) or G (GPU).
std::string mapping_string(const std::vector<weft::graph::Device>& mapping);

/// "32m" for 32'000'000.
std::string size_label(std::size_t total);

}  // namespace weft::bench::graph
