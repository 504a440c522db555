#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>

#include "commands.hpp"

#if WEFT_TOOL_HAVE_CUDA
#include "gpu/apps_suite.hpp"
#include "gpu/pool_suite.hpp"
#endif

namespace weft::tools {

int run_bench_gpu_pool(const BenchGpuArgs& args) {
#if WEFT_TOOL_HAVE_CUDA
  std::string why;
  if (!bench::gpu::gpu_available(why)) {
    std::fprintf(stderr, "weft bench gpu-pool: no usable GPU (%s); nothing measured\n",
                 why.c_str());
    return 1;
  }
  std::string machine = args.machine;
  if (machine.empty()) {
    const char* env = std::getenv("WEFT_MACHINE");
    machine = env != nullptr ? env : "gpu";
  }
  setenv("WEFT_MACHINE", machine.c_str(), 1);
  bench::gpu::GpuPoolSuiteOptions o;
  o.quick = args.quick;
  o.samples = args.samples > 0 ? args.samples : (args.quick ? 3 : 5);
  const bench::Suite suite = bench::gpu::run_gpu_pool_suite(o);
  std::printf("%s", suite.to_markdown(args.command).c_str());
  if (!args.json_path.empty()) {
    suite.write(args.json_path, args.command);
    std::fprintf(stderr, "[bench] wrote %s and its .md table\n", args.json_path.c_str());
  }
  for (const auto& c : suite.comparisons()) {
    if (!c.verified) return 1;
  }
  return 0;
#else
  (void)args;
  std::fprintf(stderr, "weft bench gpu-pool: this weft was built without CUDA\n");
  return 1;
#endif
}

int run_bench_gpu_apps(const BenchGpuArgs& args) {
#if WEFT_TOOL_HAVE_CUDA
  std::string why;
  if (!bench::gpu::gpu_available(why)) {
    std::fprintf(stderr, "weft bench gpu-apps: no usable GPU (%s); nothing measured\n",
                 why.c_str());
    return 1;
  }
  std::string machine = args.machine;
  if (machine.empty()) {
    const char* env = std::getenv("WEFT_MACHINE");
    machine = env != nullptr ? env : "gpu";
  }
  setenv("WEFT_MACHINE", machine.c_str(), 1);
  bench::gpu::GpuAppsSuiteOptions o;
  o.quick = args.quick;
  o.samples = args.samples > 0 ? args.samples : (args.quick ? 3 : 5);
  const bench::Suite suite = bench::gpu::run_gpu_apps_suite(o);
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
#else
  (void)args;
  std::fprintf(stderr, "weft bench gpu-apps: this weft was built without CUDA\n");
  return 1;
#endif
}

}  // namespace weft::tools
