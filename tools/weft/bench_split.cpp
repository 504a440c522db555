// weft bench split: the adaptive splitter's suite (bench/split/split_suite.hpp).
#include <cstdlib>
#include <filesystem>
#include <string>

#include "commands.hpp"
#include "split/split_suite.hpp"
#include "weft/split/store.hpp"

namespace weft::tools {

void one_blas_thread_per_call(char** argv) {
  // OpenBLAS reads the variable when it is loaded, before main: hence the new image. Each core
  // of the CPU's part calls BLAS on its own rows; a BLAS that started threads of its own on
  // every call would put several threads on each core.
  restart_with_env(argv, "OPENBLAS_NUM_THREADS", "1", "split");
}

int run_bench_split(const BenchSplitArgs& args) {
  bench::split::SplitSuiteOptions o;
  o.quick = args.quick;
  o.samples = args.samples > 0 ? args.samples : (args.quick ? 3 : 5);
  o.only = args.only;
  o.window = args.window;
  o.equal_core_shares = args.equal_core_shares;
  o.seed_core_classes = args.seed_core_classes;
  o.take_tail = args.take_tail;
  o.lu_look_ahead = args.lu_look_ahead;
  o.lu_sizes = args.lu_sizes;
  o.machine = args.machine.empty() ? default_machine() : args.machine;
  if (weft::split::SplitStore::available()) {
    o.db = args.db.empty() ? weft::split::SplitStore::default_path() : args.db;
    // The store's directory, made if missing, as `weft calibrate` does.
    const std::filesystem::path dir = std::filesystem::path(o.db).parent_path();
    std::error_code ec;
    if (!dir.empty()) std::filesystem::create_directories(dir, ec);
  }
  setenv("WEFT_MACHINE", o.machine.c_str(), 1);
  const bench::Suite suite = bench::split::run_split_suite(o);
  return finish_suite(suite, args.json_path, args.command);
}

std::vector<std::string> split_app_names() { return bench::split::split_app_names(); }

}  // namespace weft::tools
