#pragma once

#include <string>
#include <vector>

namespace weft::tools {

int run_info(bool json);

struct BenchCpuArgs {
  bool quick = false;
  std::string json_path;
  int samples = 0;  // 0: 5 (3 with --quick)
  int workers = 0;
  std::vector<std::string> only;
  std::string machine;
  std::string command;
};
std::vector<std::string> cpu_benchmark_names();
int run_bench_cpu(const BenchCpuArgs& args);

struct BenchGpuArgs {
  bool quick = false;
  std::string json_path;
  int samples = 0;  // 0: 5 (3 with --quick)
  std::string machine;
  std::string command;
};
int run_bench_gpu_pool(const BenchGpuArgs& args);

int run_demo(bool quick);

struct ModelsArgs {
  std::string db;       // empty: default_models_path()
  std::string machine;  // empty: every machine
};
/// $WEFT_MODELS_DB, else $XDG_DATA_HOME/weft/models.db, else ~/.local/share/weft/models.db.
std::string default_models_path();
int run_models(const ModelsArgs& args);

}  // namespace weft::tools
