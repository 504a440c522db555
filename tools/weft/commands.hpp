#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "weft/cpu/options.hpp"

namespace weft::cpu {
class Executor;
}

namespace weft::bench {
class Suite;
}

namespace weft::tools {

/// One application's comparisons (their benchmarks start with one of `prefixes`), charted on
/// their own as <json stem>-<name>.svg.
struct ChartGroup {
  std::string name;
  std::vector<std::string> prefixes;
};

/// How `weft bench <suite>` charts its results: the whole suite as <json stem>.svg or not, and
/// a chart per group.
struct SuiteCharts {
  bool suite_chart = false;
  std::vector<ChartGroup> groups;
};
/// The charts of the suite named `suite` (none for a suite without any).
SuiteCharts charts_of(const std::string& suite);

/// A suite's end: its table on stdout, and with `json_path` the JSON, the .md table beside it
/// and the suite's charts (charts_of) that have comparisons. Returns 1 when a comparison failed
/// its check or a chart could not be written, else 0 (a JSON or table that cannot be written
/// throws std::runtime_error).
int finish_suite(const bench::Suite& suite, const std::string& json_path,
                 const std::string& command);
/// `weft bench render FILE.json`: writes FILE.md and the suite's charts again from the JSON a
/// suite wrote (for a run whose other files were lost), leaving the JSON as it is. Returns 1
/// when the file is not named .json, cannot be read, is not a suite's JSON, or a file cannot be
/// written.
int render_suite(const std::string& json_path);
/// Unless `name` is set, sets it to `value` and runs this program again with the same
/// arguments (`what` names the command in the messages); returns only when that could not be
/// done, or when `name` was set already.
void restart_with_env(char** argv, const char* name, const char* value, const char* what);

int run_info(bool json);

struct BenchCpuArgs {
  bool quick = false;
  std::string json_path;
  int samples = 0;  // 0: 5 (3 with --quick)
  int workers = 0;
  cpu::Pinning pinning = cpu::Pinning::automatic;  // weft's executor
  std::vector<std::string> only;
  std::string machine;
  std::string command;
};
std::vector<std::string> cpu_benchmark_names();
/// The binary that runs the CPU suite against the peers: the only one that links them.
inline constexpr const char* kBenchBinary = "weft-bench";
/// Runs the CPU suite here (weft-bench).
int run_bench_cpu(const BenchCpuArgs& args);
/// Runs kBenchBinary with `args` in place of this process (weft); returns only when it could
/// not be started (1, with the reason on stderr).
int forward_bench_cpu(const BenchCpuArgs& args);

struct BenchGpuArgs {
  bool quick = false;
  std::string json_path;
  int samples = 0;  // 0: 5 (3 with --quick)
  std::string machine;
  std::string command;
  std::vector<std::string> only;  // gpu-apps: these applications (gpu_app_names()); empty: all
};
/// The applications `weft bench gpu-apps --only` selects from.
inline std::vector<std::string> gpu_app_names() {
  return {"batched_gemm", "cholesky", "spmv_bs", "tnn", "kmeans", "multi_gpu_gemm"};
}
int run_bench_gpu_pool(const BenchGpuArgs& args);
/// weft bench gpu-apps: the same arguments; also writes the speed-up chart beside the JSON.
int run_bench_gpu_apps(const BenchGpuArgs& args);
/// Before `weft bench gpu-apps`: unless OPENBLAS_THREAD_TIMEOUT is set, sets it to 4 and runs
/// this program again with the same arguments (returns only when it could not).
void quiet_openblas_workers(char** argv);

/// The graph layer's commands: weft bench graph, weft graph explain|run, weft calibrate.
struct GraphArgs {
  bool quick = false;
  std::string json_path;
  int samples = 0;
  std::string device = "auto";  // auto, cuda, emulated, none
  std::vector<std::string> apps;
  std::string app = "factor5";
  std::string size = "32m";
  std::vector<std::string> sizes;
  std::string policy = "pptm";
  bool exhaustive = false;  // bench graph: also time every mapping at the largest size
  cpu::Pinning pinning = cpu::Pinning::automatic;  // bench graph: the executor's binding
  long spin_before_sleep_us = -1;                  // bench graph: the executor's idle spin
  std::string stream_min_bytes;  // bench graph: the kernels' streaming threshold (empty: default)
  std::string trace, svg, trace_dir;
  std::string node_log;  // bench graph: every node of every run as CSV
  std::string db;        // empty: default_models_path()
  std::string machine;   // the models' key: $WEFT_MACHINE, else the host name
  std::string command;
};
/// "32m" -> 32'000'000; "4000000" -> 4'000'000. Throws InvalidArgument otherwise.
std::size_t parse_size(const std::string& text);
std::string default_machine();
int run_bench_graph(const GraphArgs& args);
int run_graph_explain(const GraphArgs& args);
int run_graph_run(const GraphArgs& args);
int run_calibrate(const GraphArgs& args);

struct DemoArgs {
  bool quick = false;
  std::string trace;  // the factor pipeline's Chrome trace (and .svg beside it)
};
int run_demo(const DemoArgs& args);
/// The demo's graph section: factor5 calibrated, mapped by PPTM (each node with why), run against
/// D-Map, verified. Returns whether both results matched the reference.
bool run_graph_demo(cpu::Executor& ex, bool quick, const std::string& trace);

struct ModelsArgs {
  std::string db;       // empty: default_models_path()
  std::string machine;  // empty: every machine
};
/// $WEFT_MODELS_DB, else $XDG_DATA_HOME/weft/models.db, else ~/.local/share/weft/models.db.
std::string default_models_path();
int run_models(const ModelsArgs& args);

/// weft split show|reset: the adaptive splitter's tables in the calibration store.
struct SplitArgs {
  std::string db;       // empty: default_models_path()
  std::string machine;  // empty: every machine
  std::string region;   // empty: every region
};
int run_split_show(const SplitArgs& args);

struct BenchSplitArgs {
  bool quick = false;
  std::string json_path;
  int samples = 0;      // 0: 5 (3 with --quick)
  std::string machine;  // the JSON's and the stored tables' machine (default: host name)
  std::string db;       // where the learned tables are saved (default: default_models_path())
  std::vector<std::string> only;
  int window = 5;
  bool equal_core_shares = false;
  bool seed_core_classes = false;
  bool take_tail = true;
  bool lu_look_ahead = true;
  std::vector<int> lu_sizes;
  std::string command;
};
/// The applications `weft bench split --only` selects from.
std::vector<std::string> split_app_names();
int run_bench_split(const BenchSplitArgs& args);
/// Before `weft bench split`: unless OPENBLAS_NUM_THREADS is set, sets it to 1 and runs this
/// program again with the same arguments (returns only when it could not).
void one_blas_thread_per_call(char** argv);
int run_split_reset(const SplitArgs& args);

/// weft bench streams: task streams against MPI + CUDA (bench/stream/stream_suite.hpp).
struct BenchStreamsArgs {
  bool quick = false;
  std::string json_path;
  int samples = 0;  // 0: 5 (3 with --quick)
  std::string machine;
  std::vector<std::string> only;
  std::string command;
};
/// Unless an MPI launcher started this process, runs this program again under
/// `mpirun -np 2` with the same arguments (returns only when it could not).
void start_under_mpirun(char** argv);
int run_bench_streams(const BenchStreamsArgs& args);
/// True when argv asks for a kernel worker of `weft bench streams` (run, status in `status`).
bool run_stream_worker_if_asked(int argc, char** argv, int& status);

}  // namespace weft::tools
