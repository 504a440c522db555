// weft - the command-line tool: weft info | weft bench cpu | weft bench gpu-pool | weft models |
// weft demo
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>

#include "commands.hpp"

int main(int argc, char** argv) {
  CLI::App app{"weft: task-parallel runtime for CPU+GPU machines", "weft"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("weft ") + WEFT_VERSION);

  auto* info = app.add_subcommand(
      "info",
      "Show the CPU topology, the GPUs with the default pool on them, and MPI availability");
  bool info_json = false;
  info->add_flag("--json", info_json, "Print as JSON");

  auto* bench = app.add_subcommand("bench", "Run a benchmark suite against weft's peers");
  bench->require_subcommand(1);
  auto* bench_cpu = bench->add_subcommand(
      "cpu",
      "CPU executor suite: BOTS, STREAM, task throughput, pipelines; vs TBB, OpenMP, StarPU");
  weft::tools::BenchCpuArgs cpu_args;
  bench_cpu->add_flag("--quick", cpu_args.quick, "Small sizes and 3 samples (a smoke run)");
  bench_cpu->add_option("--json", cpu_args.json_path,
                        "Write results to FILE (schema of RESULTS.md) and FILE with .md");
  bench_cpu->add_option("--samples", cpu_args.samples, "Measured runs per contender (>= 1)")
      ->check(CLI::Range(1, 1000));
  bench_cpu
      ->add_option("--workers", cpu_args.workers,
                   "Threads for weft and every peer (default: hardware threads)")
      ->check(CLI::Range(1, 4096));
  bench_cpu->add_option("--only", cpu_args.only, "Run only these benchmarks (repeatable)")
      ->check(CLI::IsMember(weft::tools::cpu_benchmark_names()));
  bench_cpu->add_option("--machine", cpu_args.machine,
                        "Machine name recorded in the JSON (default: $WEFT_MACHINE or cpu<N>)");

  auto* bench_gpu = bench->add_subcommand(
      "gpu-pool", "GPU thread pool: per-task cost and latency vs kernel launches and CUDA graphs");
  weft::tools::BenchGpuArgs gpu_args;
  bench_gpu->add_flag("--quick", gpu_args.quick, "Small sizes and 3 samples (a smoke run)");
  bench_gpu->add_option("--json", gpu_args.json_path,
                        "Write results to FILE (schema of RESULTS.md) and FILE with .md");
  bench_gpu->add_option("--samples", gpu_args.samples, "Measured runs per contender (>= 1)")
      ->check(CLI::Range(1, 1000));
  bench_gpu->add_option("--machine", gpu_args.machine,
                        "Machine name recorded in the JSON (default: $WEFT_MACHINE or gpu)");

  auto* models = app.add_subcommand(
      "models", "List the cost models in the calibration store, with their fit error");
  weft::tools::ModelsArgs models_args;
  models->add_option("--db", models_args.db,
                     "The store (default: $WEFT_MODELS_DB, else $XDG_DATA_HOME/weft/models.db, "
                     "else ~/.local/share/weft/models.db)");
  models->add_option("--machine", models_args.machine, "Only this machine's models");

  auto* demo = app.add_subcommand("demo", "Run the main showcase on whatever hardware is here");
  bool demo_quick = false;
  demo->add_flag("--quick", demo_quick, "Smaller problem sizes");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "weft: %s (see 'weft --help')\n", e.what());
    return 2;
  }

  try {
    if (info->parsed()) return weft::tools::run_info(info_json);
    if (bench_cpu->parsed()) {
      std::string command = "weft";
      for (int i = 1; i < argc; ++i) command += std::string(" ") + argv[i];
      cpu_args.command = command;
      return weft::tools::run_bench_cpu(cpu_args);
    }
    if (bench_gpu->parsed()) {
      std::string command = "weft";
      for (int i = 1; i < argc; ++i) command += std::string(" ") + argv[i];
      gpu_args.command = command;
      return weft::tools::run_bench_gpu_pool(gpu_args);
    }
    if (demo->parsed()) return weft::tools::run_demo(demo_quick);
    if (models->parsed()) return weft::tools::run_models(models_args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "weft: %s\n", e.what());
    return 1;
  }
  return 2;
}
