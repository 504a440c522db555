// weft bench split: the adaptive splitter's suite (bench/split/split_suite.hpp).
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "commands.hpp"
#include "split/split_suite.hpp"
#include "weft/split/store.hpp"

namespace weft::tools {

void one_blas_thread_per_call(char** argv) {
  // OpenBLAS reads the variable when it is loaded, before main: hence the new image. Each core
  // of the CPU's part calls BLAS on its own rows; a BLAS that started threads of its own on
  // every call would put several threads on each core.
  if (std::getenv("OPENBLAS_NUM_THREADS") != nullptr) return;
  setenv("OPENBLAS_NUM_THREADS", "1", 1);
  std::fprintf(stderr, "[bench] split: restarting with OPENBLAS_NUM_THREADS=1\n");
  execv("/proc/self/exe", argv);
  std::fprintf(stderr, "[bench] split: could not restart (%s); OpenBLAS may oversubscribe\n",
               std::strerror(errno));
}

int run_bench_split(const BenchSplitArgs& args) {
  bench::split::SplitSuiteOptions o;
  o.quick = args.quick;
  o.samples = args.samples > 0 ? args.samples : (args.quick ? 3 : 5);
  o.only = args.only;
  o.window = args.window;
  o.equal_core_shares = args.equal_core_shares;
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
  std::printf("%s", suite.to_markdown(args.command).c_str());
  if (!args.json_path.empty()) {
    suite.write(args.json_path, args.command);
    std::string svg = args.json_path;
    if (const auto dot = svg.rfind(".json"); dot != std::string::npos) svg.erase(dot);
    svg += ".svg";
    std::ofstream(svg) << suite.to_speedup_svg();
    std::fprintf(stderr, "[bench] wrote %s, its .md table and %s\n", args.json_path.c_str(),
                 svg.c_str());
  }
  for (const auto& c : suite.comparisons()) {
    if (!c.verified) return 1;
  }
  return 0;
}

std::vector<std::string> split_app_names() { return bench::split::split_app_names(); }

}  // namespace weft::tools
