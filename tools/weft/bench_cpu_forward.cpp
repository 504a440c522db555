// `weft bench cpu` in the `weft` binary: runs `weft-bench cpu` with the same options. The peers
// the CPU suite compares against (TBB, OpenMP, StarPU) are linked into weft-bench only, so that
// every other command of weft runs without their libraries (and without their threads).
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "cli_options.hpp"
#include "commands.hpp"

namespace weft::tools {

namespace {

// The directory of this process's executable, empty when it cannot be read (not Linux).
std::filesystem::path own_directory() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return {};
  buf[n] = '\0';
  return std::filesystem::path(buf).parent_path();
}

}  // namespace

int forward_bench_cpu(const BenchCpuArgs& args) {
  std::vector<std::string> words{kBenchBinary, "cpu"};
  for (std::string& a : bench_cpu_arguments(args)) words.push_back(std::move(a));
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  std::fflush(nullptr);
  // Beside this weft first (the build tree and an installation both put it there), then PATH.
  const std::filesystem::path dir = own_directory();
  const std::string beside = dir.empty() ? std::string() : (dir / kBenchBinary).string();
  if (!beside.empty()) execv(beside.c_str(), argv.data());
  execvp(kBenchBinary, argv.data());
  const int e = errno;  // exec returns only when it failed
  std::fprintf(stderr,
               "weft bench cpu: cannot run %s (%s; looked beside weft%s%s and on PATH): it is "
               "built with the benchmarks (cmake -DWEFT_BUILD_BENCH=ON, target weft_bench_cli)\n",
               kBenchBinary, std::strerror(e), beside.empty() ? "" : " in ", dir.string().c_str());
  return 1;
}

}  // namespace weft::tools
