// weft-bench - the CPU suite against TBB, OpenMP and StarPU: `weft-bench cpu [options]`, which is
// what `weft bench cpu` runs (with the same options). A binary of its own so that it alone links
// the peers' libraries.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>

#include "cli_options.hpp"
#include "commands.hpp"

int main(int argc, char** argv) {
  CLI::App app{"weft-bench: weft's CPU suite against TBB, OpenMP and StarPU (weft bench cpu)",
               weft::tools::kBenchBinary};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("weft-bench ") + WEFT_VERSION);
  auto* cpu = app.add_subcommand(
      "cpu",
      "CPU executor suite: BOTS, STREAM, task throughput, pipelines; vs TBB, OpenMP, StarPU");
  weft::tools::BenchCpuArgs args;
  weft::tools::add_bench_cpu_options(cpu, args);
  // Set by `weft bench cpu`: the command line the user typed, recorded in the results.
  cpu->add_option("--command", args.command, "The command line recorded in the results")->group("");
  if (const int status = weft::tools::parse_command_line(app, argc, argv, "weft-bench");
      status >= 0) {
    return status;
  }
  if (args.command.empty()) {
    args.command = weft::tools::kBenchBinary;
    for (int i = 1; i < argc; ++i) args.command += std::string(" ") + argv[i];
  }
  try {
    return weft::tools::run_bench_cpu(args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "weft-bench: %s\n", e.what());
    return 1;
  }
}
