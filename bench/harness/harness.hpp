// bench/harness/harness.hpp - the one benchmark harness (CONVENTIONS.md "Benchmarks compare by
// construction"): named benchmarks, weft and its peers run alternately in the same process on
// the same input, warm-up, medians, a reference check, JSON in the schema of docs/benchmarks.md and
// a markdown table beside it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "host_health.hpp"

namespace weft::bench {

enum class Better { lower, higher };

/// One implementation of a benchmark: run once, return the measured value (seconds, GB/s...)
/// and whether its result matched the reference.
struct Outcome {
  double value = 0;
  bool verified = false;
};
using Runner = std::function<Outcome()>;

struct Contender {
  std::string name;  // "weft", "tbb", "openmp", "starpu", or a weft variant
  Runner run;
};

struct Metric {
  std::string name;
  std::string unit;
  Better better = Better::lower;
  std::vector<double> samples;
  [[nodiscard]] double median() const;
};

struct Comparison {
  std::string benchmark;
  std::string peer;
  double weft = 0;
  double peer_value = 0;
  std::string unit;
  Better better = Better::lower;
  bool verified = false;
  std::vector<double> weft_samples;
  std::vector<double> peer_samples;
  [[nodiscard]] double ratio() const { return peer_value == 0 ? 0 : weft / peer_value; }
};

struct SuiteOptions {
  int samples = 5;  // measured runs per contender (medians of these)
  int warmups = 1;  // unmeasured runs per contender first
  /// Pause before every run: OpenMP's and TBB's threads spin for milliseconds after their work
  /// (GOMP_SPINCOUNT defaults to 300,000 spins), so without it a contender that follows a peer
  /// starts on a machine whose cores are still busy with the peer's spinning threads.
  int settle_ms = 50;
  bool quiet = false;
};

/// Collects the results of one suite run.
class Suite {
 public:
  Suite(std::string name, SuiteOptions options) : name_(std::move(name)), options_(options) {}

  /// Runs every contender `warmups` times, then `samples` rounds in which each contender runs
  /// once, in an order rotated every round. The first contender is weft; each other one yields
  /// a comparison weft/peer. Also records weft's samples as metric `<benchmark>` + suffix.
  /// `samples` > 0 overrides the suite's count for this benchmark (close contests need more
  /// rounds for a stable median; the JSON keeps every sample).
  void compare(const std::string& benchmark, const std::string& unit, Better better,
               std::vector<Contender> contenders, int samples = 0);

  /// Records a metric of weft alone, from `samples` runs after warm-up.
  void measure(const std::string& name, const std::string& unit, Better better, const Runner& run);

  void add_metric(Metric m) { metrics_.push_back(std::move(m)); }
  /// Records `host_handoff_ns_<when>` (host_health.hpp): how fast this machine instance hands
  /// a cache line between threads, so that runs from different instances can be told apart.
  void record_host_handoff(const std::string& when) {
    add_metric(Metric{"host_handoff_ns_" + when, "ns", Better::lower, {host_handoff_ns()}});
  }
  /// Records the GPUs the suite ran on (the JSON's machine.gpu and machine.gpus).
  void set_gpu(std::string name, int count) {
    gpu_name_ = std::move(name);
    gpu_count_ = count;
  }

  [[nodiscard]] const std::string& name() const { return name_; }
  [[nodiscard]] const std::vector<Comparison>& comparisons() const { return comparisons_; }
  [[nodiscard]] const std::vector<Metric>& metrics() const { return metrics_; }
  [[nodiscard]] const SuiteOptions& options() const { return options_; }

  /// The suite a JSON file written by write() holds: its comparisons, metrics, sample counts,
  /// GPUs and commit, so that its table and charts can be written again (`weft bench render`)
  /// without running anything. Throws std::runtime_error naming what is missing or malformed.
  static Suite from_json(const std::string& text);
  /// The command line recorded in the JSON a suite was read from (empty otherwise).
  [[nodiscard]] const std::string& recorded_command() const { return recorded_command_; }

  /// JSON in the schema of docs/benchmarks.md; `command` is the exact command line that produced
  /// it.
  [[nodiscard]] std::string to_json(const std::string& command) const;
  /// A markdown table of the comparisons and metrics.
  [[nodiscard]] std::string to_markdown(const std::string& command) const;
  /// An SVG bar chart of weft's speed-up over each peer, one bar per comparison; empty when
  /// the suite has no comparison.
  [[nodiscard]] std::string to_speedup_svg() const;
  /// The same chart for the comparisons whose benchmark starts with one of `prefixes` (one
  /// application's), titled with the suite's name and `title`; empty when none does.
  [[nodiscard]] std::string to_speedup_svg(const std::string& title,
                                           const std::vector<std::string>& prefixes) const;
  /// Writes <path> (JSON) and the same path with .md (table). Creates the directory. Throws
  /// std::runtime_error when a file cannot be written.
  void write(const std::string& json_path, const std::string& command) const;
  /// Writes only the table: <json_path> with .md. Throws std::runtime_error when it cannot.
  void write_markdown(const std::string& json_path, const std::string& command) const;

 private:
  [[nodiscard]] std::string speedup_svg(const std::string& title,
                                        const std::vector<const Comparison*>& rows) const;

  std::string name_;
  SuiteOptions options_;
  std::vector<Comparison> comparisons_;
  std::vector<Metric> metrics_;
  std::string gpu_name_;
  int gpu_count_ = 0;
  // Read from a JSON file (from_json): the commit its table names, instead of this tree's.
  std::string recorded_commit_;
  std::string recorded_command_;
};

/// Monotonic seconds.
inline double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// Times f() once, in seconds.
template <class F>
double time_seconds(F&& f) {
  const double t0 = now_seconds();
  f();
  return now_seconds() - t0;
}

double median(std::vector<double> v);

/// Machine description for the JSON "machine" object.
struct MachineInfo {
  std::string name;
  std::string cpu;
  int cores = 0;
  std::string gpu;
  int gpus = 0;
};
MachineInfo describe_machine(const std::string& name);
/// Current git commit (short), or "unknown".
std::string current_commit();

}  // namespace weft::bench
