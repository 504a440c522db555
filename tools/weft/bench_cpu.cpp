// `weft-bench cpu` (and so `weft bench cpu`): the CPU suite against the peers, in this process.
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "commands.hpp"
#include "cpu/suite.hpp"

namespace weft::tools {

int run_bench_cpu(const BenchCpuArgs& args) {
  bench::cpu::CpuSuiteOptions o;
  o.quick = args.quick;
  o.samples = args.samples > 0 ? args.samples : (args.quick ? 3 : 5);
  o.workers = args.workers;
  o.pinning = args.pinning;
  o.only = args.only;
  std::string machine = args.machine;
  if (machine.empty()) {
    const char* env = std::getenv("WEFT_MACHINE");
    machine = env != nullptr ? env : "cpu" + std::to_string(std::thread::hardware_concurrency());
  }
  setenv("WEFT_MACHINE", machine.c_str(), 1);
  std::string peers;
  for (const auto& p : bench::cpu::available_peers()) peers += " " + p;
  std::fprintf(stderr, "[bench] machine %s; peers:%s\n", machine.c_str(),
               peers.empty() ? " (none built in)" : peers.c_str());

  const bench::Suite suite = bench::cpu::run_cpu_suite(o);
  std::printf("%s", suite.to_markdown(args.command).c_str());
  if (!args.json_path.empty()) {
    suite.write(args.json_path, args.command);
    std::fprintf(stderr, "[bench] wrote %s and its .md table\n", args.json_path.c_str());
  }
  for (const auto& c : suite.comparisons()) {
    if (!c.verified) {
      std::fprintf(stderr, "[bench] %s vs %s: result did NOT match the reference\n",
                   c.benchmark.c_str(), c.peer.c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace weft::tools
