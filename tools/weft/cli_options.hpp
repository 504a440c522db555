// Command-line options that two binaries share: `weft` (every command) and `weft-bench` (the
// CPU suite against the peers, which `weft bench cpu` runs), so that both parse `bench cpu`'s
// options alike and a bad one exits 2 from `weft` before anything runs.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "commands.hpp"

namespace weft::tools {

/// --pinning (automatic, none, always), stored in `to`.
void add_pinning_option(CLI::App* command, cpu::Pinning& to, const std::string& help);

/// The options of `weft bench cpu` (and `weft-bench cpu`), stored in `args`.
void add_bench_cpu_options(CLI::App* command, BenchCpuArgs& args);

/// Parses the command line into `app`. Returns -1 when the program goes on; else the exit
/// status to return now: 0 after --help or --version, 2 for a bad command line (said on
/// stderr, naming `tool`).
int parse_command_line(CLI::App& app, int argc, char** argv, const char* tool);

/// `args` as `weft-bench cpu` arguments (after the subcommand), `--command` included: parsed by
/// add_bench_cpu_options they give back `args`.
std::vector<std::string> bench_cpu_arguments(const BenchCpuArgs& args);

}  // namespace weft::tools
