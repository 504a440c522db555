#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "commands.hpp"

#if WEFT_TOOL_HAVE_CUDA
#include "gpu/apps_suite.hpp"
#include "gpu/pool_suite.hpp"
#endif

namespace weft::tools {

namespace {

#if WEFT_TOOL_HAVE_CUDA
// What `weft bench gpu-pool` and `weft bench gpu-apps` share: the GPU check, the machine's name,
// the samples, the table on stdout and the files (the suite's charts: charts_of). Returns 1
// when there is no GPU or a comparison failed its check.
int run_gpu_suite(const char* name, const BenchGpuArgs& args,
                  const std::function<bench::Suite(bool quick, int samples)>& run) {
  std::string why;
  if (!bench::gpu::gpu_available(why)) {
    std::fprintf(stderr, "weft bench %s: no usable GPU (%s); nothing measured\n", name,
                 why.c_str());
    return 1;
  }
  std::string machine = args.machine;
  if (machine.empty()) {
    const char* env = std::getenv("WEFT_MACHINE");
    machine = env != nullptr ? env : "gpu";
  }
  setenv("WEFT_MACHINE", machine.c_str(), 1);
  const bench::Suite suite =
      run(args.quick, args.samples > 0 ? args.samples : (args.quick ? 3 : 5));
  return finish_suite(suite, args.json_path, args.command);
}
#endif

}  // namespace

int run_bench_gpu_pool(const BenchGpuArgs& args) {
#if WEFT_TOOL_HAVE_CUDA
  return run_gpu_suite("gpu-pool", args, [](bool quick, int samples) {
    bench::gpu::GpuPoolSuiteOptions o;
    o.quick = quick;
    o.samples = samples;
    return bench::gpu::run_gpu_pool_suite(o);
  });
#else
  (void)args;
  std::fprintf(stderr, "weft bench gpu-pool: this weft was built without CUDA\n");
  return 1;
#endif
}

void quiet_openblas_workers(char** argv) {
#if WEFT_TOOL_HAVE_CUDA
  // OpenBLAS reads the variable when it is loaded, before main: hence the new image. Its idle
  // workers otherwise spin (yielding) on every core for about 2^28 cycles after each call;
  // the suite's references and CPU peers call it between the pool's runs, whose scheduler
  // threads then shared their cores with the spinners (docs/decisions/018-gpu-app-bodies.md).
  restart_with_env(argv, "OPENBLAS_THREAD_TIMEOUT", "4", "gpu-apps");
#else
  (void)argv;  // nothing to measure without CUDA
#endif
}

int run_bench_gpu_apps(const BenchGpuArgs& args) {
#if WEFT_TOOL_HAVE_CUDA
  return run_gpu_suite("gpu-apps", args, [&args](bool quick, int samples) {
    bench::gpu::GpuAppsSuiteOptions o;
    o.quick = quick;
    o.samples = samples;
    o.only = args.only;
    return bench::gpu::run_gpu_apps_suite(o);
  });
#else
  (void)args;
  std::fprintf(stderr, "weft bench gpu-apps: this weft was built without CUDA\n");
  return 1;
#endif
}

}  // namespace weft::tools
