#include "cli_options.hpp"

#include <cstdio>
#include <map>

#include "cpu/suite.hpp"

namespace weft::tools {

namespace {

const std::map<std::string, cpu::Pinning>& pinning_names() {
  static const std::map<std::string, cpu::Pinning> names{{"automatic", cpu::Pinning::automatic},
                                                         {"none", cpu::Pinning::none},
                                                         {"always", cpu::Pinning::always}};
  return names;
}

}  // namespace

std::vector<std::string> cpu_benchmark_names() { return bench::cpu::cpu_benchmark_names(); }

void add_pinning_option(CLI::App* command, cpu::Pinning& to, const std::string& help) {
  command
      ->add_option_function<std::string>(
          "--pinning", [&to](const std::string& w) { to = pinning_names().at(w); }, help)
      ->check(CLI::IsMember({"automatic", "none", "always"}));
}

void add_bench_cpu_options(CLI::App* command, BenchCpuArgs& args) {
  command->add_flag("--quick", args.quick, "Small sizes and 3 samples (a smoke run)");
  command->add_option(
      "--json", args.json_path,
      "Write results to FILE as JSON (machine, date, commit, command, every sample) "
      "and as a table to FILE with .md");
  command->add_option("--samples", args.samples, "Measured runs per contender (>= 1)")
      ->check(CLI::Range(1, 1000));
  command
      ->add_option(
          "--workers", args.workers,
          "Threads for weft and every peer (default: the hardware threads this process may run on)")
      ->check(CLI::Range(1, 4096));
  add_pinning_option(command, args.pinning,
                     "Binding of weft's workers: automatic (default: bound when one worker per "
                     "allowed hardware thread), none, always; the peers keep their own defaults");
  command->add_option("--only", args.only, "Run only these benchmarks (repeatable)")
      ->check(CLI::IsMember(cpu_benchmark_names()));
  command->add_option("--machine", args.machine,
                      "Machine name recorded in the JSON (default: $WEFT_MACHINE or cpu<N>)");
}

std::vector<std::string> bench_cpu_arguments(const BenchCpuArgs& args) {
  std::vector<std::string> a;
  if (args.quick) a.emplace_back("--quick");
  if (!args.json_path.empty()) a.insert(a.end(), {"--json", args.json_path});
  if (args.samples > 0) a.insert(a.end(), {"--samples", std::to_string(args.samples)});
  if (args.workers > 0) a.insert(a.end(), {"--workers", std::to_string(args.workers)});
  for (const auto& [name, pinning] : pinning_names()) {
    if (pinning == args.pinning) a.insert(a.end(), {"--pinning", name});
  }
  for (const std::string& b : args.only) a.insert(a.end(), {"--only", b});
  if (!args.machine.empty()) a.insert(a.end(), {"--machine", args.machine});
  if (!args.command.empty()) a.insert(a.end(), {"--command", args.command});
  return a;
}

int parse_command_line(CLI::App& app, int argc, char** argv, const char* tool) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "%s: %s (see '%s --help')\n", tool, e.what(), tool);
    return 2;
  }
  return -1;
}

}  // namespace weft::tools
