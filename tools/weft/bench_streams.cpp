// weft bench streams: task streams against MPI + CUDA (bench/stream/stream_suite.hpp), in two
// MPI processes; process 0 writes the results.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "commands.hpp"

#if WEFT_TOOL_HAVE_CUDA && WEFT_TOOL_HAVE_MPI
#include "stream/stream_suite.hpp"
#endif

namespace weft::tools {

void start_under_mpirun(char** argv) {
  if (std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMIX_RANK") != nullptr) return;
  // Two processes on this host; as root too (the GPU machines and CI run as root); not bound,
  // so that each process's task-stream threads may use every core.
  char self[4096] = {};
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) {
    std::fprintf(stderr, "[bench] streams: cannot find this program (%s)\n", std::strerror(errno));
    return;
  }
  std::vector<const char*> args{"mpirun",    "-np",  "2", "--oversubscribe", "--allow-run-as-root",
                                "--bind-to", "none", self};
  for (char** a = argv + 1; *a != nullptr; ++a) args.push_back(*a);
  args.push_back(nullptr);
  std::fprintf(stderr, "[bench] streams: restarting under mpirun -np 2\n");
  execvp("mpirun", const_cast<char* const*>(args.data()));
  std::fprintf(stderr, "[bench] streams: could not start mpirun (%s)\n", std::strerror(errno));
}

bool run_stream_worker_if_asked(int argc, char** argv, int& status) {
#if WEFT_TOOL_HAVE_CUDA && WEFT_TOOL_HAVE_MPI
  return bench::stream::run_kernel_worker_if_asked(argc, argv, status);
#else
  (void)argc;
  (void)argv;
  (void)status;
  return false;
#endif
}

int run_bench_streams(const BenchStreamsArgs& args) {
#if WEFT_TOOL_HAVE_CUDA && WEFT_TOOL_HAVE_MPI
  bench::stream::StreamSuiteOptions o;
  o.quick = args.quick;
  o.samples = args.samples > 0 ? args.samples : (args.quick ? 3 : 5);
  o.only = args.only;
  char self[4096] = {};
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  o.self = n > 0 ? std::string(self, static_cast<std::size_t>(n)) : "weft";
  std::string machine = args.machine;
  if (machine.empty()) {
    const char* env = std::getenv("WEFT_MACHINE");
    machine = env != nullptr ? env : "gpu";
  }
  setenv("WEFT_MACHINE", machine.c_str(), 1);
  bool reporter = false;
  const bench::Suite suite = bench::stream::run_stream_suite(o, reporter);
  if (!reporter) return 0;
  return finish_suite(suite, args.json_path, args.command);
#else
  (void)args;
  std::fprintf(stderr, "weft bench streams: this weft was built without CUDA or without MPI\n");
  return 1;
#endif
}

}  // namespace weft::tools
