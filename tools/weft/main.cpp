// weft - the command-line tool: weft info | weft bench cpu|gpu-pool|gpu-apps|graph|split | weft
// graph explain|run | weft calibrate | weft models | weft split show|reset | weft demo
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <string>

#include "cli_options.hpp"
#include "commands.hpp"

int main(int argc, char** argv) {
  using weft::tools::add_pinning_option;
  // A kernel worker of `weft bench streams` (one process of its concurrent-kernel peer).
  if (int status = 0; weft::tools::run_stream_worker_if_asked(argc, argv, status)) return status;
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
      "CPU executor suite: BOTS, STREAM, task throughput, pipelines; vs TBB, OpenMP, StarPU "
      "(runs weft-bench, the binary that links them)");
  weft::tools::BenchCpuArgs cpu_args;
  weft::tools::add_bench_cpu_options(bench_cpu, cpu_args);

  auto* bench_gpu = bench->add_subcommand(
      "gpu-pool", "GPU thread pool: per-task cost and latency vs kernel launches and CUDA graphs");
  weft::tools::BenchGpuArgs gpu_args;
  bench_gpu->add_flag("--quick", gpu_args.quick, "Small sizes and 3 samples (a smoke run)");
  bench_gpu->add_option(
      "--json", gpu_args.json_path,
      "Write results to FILE as JSON (machine, date, commit, command, every sample) "
      "and as a table to FILE with .md");
  bench_gpu->add_option("--samples", gpu_args.samples, "Measured runs per contender (>= 1)")
      ->check(CLI::Range(1, 1000));
  bench_gpu->add_option("--machine", gpu_args.machine,
                        "Machine name recorded in the JSON (default: $WEFT_MACHINE or gpu)");

  auto* bench_apps = bench->add_subcommand(
      "gpu-apps",
      "Seed 000's GPU applications through the pool vs cuBLAS/cuSOLVER/cuSPARSE and streams");
  weft::tools::BenchGpuArgs apps_args;
  bench_apps->add_flag("--quick", apps_args.quick, "Small sizes and 3 samples (a smoke run)");
  bench_apps->add_option("--json", apps_args.json_path,
                         "Write results to FILE as JSON, a table to FILE with .md and the "
                         "speed-up chart to FILE with .svg");
  bench_apps->add_option("--samples", apps_args.samples, "Measured runs per contender (>= 1)")
      ->check(CLI::Range(1, 1000));
  bench_apps->add_option("--machine", apps_args.machine,
                         "Machine name recorded in the JSON (default: $WEFT_MACHINE or gpu)");
  bench_apps->add_option("--only", apps_args.only, "Run only these applications (repeatable)")
      ->check(CLI::IsMember(weft::tools::gpu_app_names()));

  weft::tools::GraphArgs graph_args;
  graph_args.machine = weft::tools::default_machine();
  const auto apps_check = CLI::IsMember({"factor1", "factor2", "factor3", "factor4", "factor5"});
  // A size is refused while the arguments are parsed, so that it exits 2 as other bad arguments.
  const auto size_check = CLI::Validator(
      [](std::string& v) -> std::string {
        try {
          (void)weft::tools::parse_size(v);
          return {};
        } catch (const std::exception& e) {
          return e.what();
        }
      },
      "SIZE");
  auto* bench_graph = bench->add_subcommand(
      "graph",
      "Graph layer: five factor pipelines at 32m and 320m floats, PPTM vs A-Free, D-Map, min cut, "
      "HEFT (calibrates the models first)");
  bench_graph->add_flag("--quick", graph_args.quick, "1m and 4m floats, 3 samples (a smoke run)");
  bench_graph->add_option(
      "--json", graph_args.json_path,
      "Write results to FILE as JSON (machine, date, commit, command, every sample) "
      "and as a table to FILE with .md");
  bench_graph->add_option("--samples", graph_args.samples, "Measured runs per policy (>= 1)")
      ->check(CLI::Range(1, 1000));
  bench_graph
      ->add_option("--device", graph_args.device,
                   "auto (the GPU; refused without one) or emulated (smoke runs only)")
      ->check(CLI::IsMember({"auto", "emulated"}));
  bench_graph->add_option("--app", graph_args.apps, "Only these applications (repeatable)")
      ->check(apps_check);
  bench_graph
      ->add_option("--sizes", graph_args.sizes,
                   "Floats in total per size, at least two (the models are fitted through "
                   "them), e.g. --sizes 32m 320m (default)")
      ->check(size_check)
      ->expected(2, CLI::detail::expected_max_vector_size);
  bench_graph->add_flag("--exhaustive", graph_args.exhaustive,
                        "Also time every mapping of each application at the largest size (but "
                        "those the models put over 2x the fastest policy): the best any "
                        "mapping policy could do");
  bench_graph
      ->add_option("--spin-before-sleep-us", graph_args.spin_before_sleep_us,
                   "The CPU executor's idle spin before a worker sleeps, in us (default: the "
                   "executor's, 250)")
      ->check(CLI::Range(0L, 1'000'000L));
  bench_graph
      ->add_option("--stream-min-bytes", graph_args.stream_min_bytes,
                   "The factor kernels write their outputs past the caches when a call's arguments "
                   "span N bytes or more, and those a GPU node reads next; `gpu-only`: only those "
                   "(default: the last-level cache, as `weft info` shows it, at least 4 MiB)")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            const bool digits = !v.empty() && v.size() <= 19 &&
                                std::all_of(v.begin(), v.end(), [](unsigned char ch) {
                                  return ch >= '0' && ch <= '9';
                                });
            return digits || v == "gpu-only" ? std::string()
                                             : "'" + v + "' is neither a byte count nor gpu-only";
          },
          "BYTES|gpu-only"));
  add_pinning_option(bench_graph, graph_args.pinning,
                     "Binding of the CPU workers: automatic (default), none, always");
  bench_graph->add_option("--node-log", graph_args.node_log,
                          "Write every node of every calibration and timed run as CSV (phase, app, "
                          "size, policy, run, node, kernel, device, times, prediction, share "
                          "beside copies, what it was: the node's label or the copied datum, "
                          "a GPU node's launch time on the dispatcher, and when the dispatcher "
                          "handed the node on)");
  bench_graph->add_option("--trace-dir", graph_args.trace_dir,
                          "Write a Chrome trace and an SVG timeline per app, size and policy");
  bench_graph->add_option("--machine", graph_args.machine,
                          "Machine name for the JSON and the models (default: $WEFT_MACHINE or "
                          "the host name)");

  auto* graph = app.add_subcommand("graph", "Inspect and run the factor pipelines' graphs");
  graph->require_subcommand(1);
  auto add_common = [&](CLI::App* c) {
    c->add_option("--app", graph_args.app, "The application (default factor5)")->check(apps_check);
    c->add_option("--size", graph_args.size, "Floats in total over the five series (default 32m)")
        ->check(size_check);
    c->add_option("--device", graph_args.device, "auto, cuda, emulated or none")
        ->check(CLI::IsMember({"auto", "cuda", "emulated", "none"}));
    c->add_option("--db", graph_args.db, "The calibration store (default as for `weft models`)");
    c->add_option("--machine", graph_args.machine, "The models' machine (default: host name)");
  };
  auto* explain = graph->add_subcommand(
      "explain",
      "For an application and size: each node's predicted times, and each policy's mapping, "
      "predicted time and transfer bytes");
  add_common(explain);
  auto* graph_run = graph->add_subcommand(
      "run", "Run an application once with a policy, check it, print (and trace) what ran where");
  add_common(graph_run);
  graph_run->add_option("--policy", graph_args.policy, "a_free, d_map, pptm, mincut or heft")
      ->check(CLI::IsMember({"a_free", "d_map", "pptm", "mincut", "heft"}));
  graph_run->add_option("--trace", graph_args.trace, "Write Chrome trace-event JSON to FILE");
  graph_run->add_option("--svg", graph_args.svg, "Write an SVG timeline to FILE");

  auto* calibrate = app.add_subcommand(
      "calibrate",
      "Measure every factor kernel on the CPU and the GPU and every transfer at two or more "
      "sizes, fit the cost models and store them");
  graph_args.sizes = {};
  calibrate
      ->add_option("--sizes", graph_args.sizes,
                   "Floats in total per size, at least two (default 4m 32m)")
      ->check(size_check)
      ->expected(2, CLI::detail::expected_max_vector_size);
  calibrate->add_option("--app", graph_args.apps, "Only these applications' kernels")
      ->check(apps_check);
  calibrate->add_option("--device", graph_args.device, "auto, cuda or emulated")
      ->check(CLI::IsMember({"auto", "cuda", "emulated"}));
  calibrate->add_option("--db", graph_args.db,
                        "The store, its directory made if missing (default as for `weft models`)");
  calibrate->add_option("--machine", graph_args.machine,
                        "The models' machine (default: host name)");

  auto* models = app.add_subcommand(
      "models", "List the cost models in the calibration store, with their fit error");
  weft::tools::ModelsArgs models_args;
  models->add_option("--db", models_args.db,
                     "The store (default: $WEFT_MODELS_DB, else $XDG_DATA_HOME/weft/models.db, "
                     "else ~/.local/share/weft/models.db)");
  models->add_option("--machine", models_args.machine, "Only this machine's models");

  auto* bench_split = bench->add_subcommand(
      "split",
      "Adaptive CPU/GPU splitting (seed 002) of host-resident GEMM, triad and SpMV vs GPU-only, "
      "CPU-only, the static peak split and the best static split");
  weft::tools::BenchSplitArgs split_bench_args;
  bench_split->add_flag("--quick", split_bench_args.quick, "Small sizes and 3 samples");
  bench_split->add_option("--json", split_bench_args.json_path,
                          "Write results to FILE as JSON, a table to FILE with .md and the "
                          "speed-up chart to FILE with .svg");
  bench_split->add_option("--samples", split_bench_args.samples, "Measured runs per contender")
      ->check(CLI::Range(1, 1000));
  bench_split->add_option("--machine", split_bench_args.machine,
                          "Machine name for the JSON and the stored tables (default: host name)");
  bench_split->add_option("--db", split_bench_args.db,
                          "Save the learned tables here (default as for `weft models`)");
  bench_split->add_option("--only", split_bench_args.only, "Run only these applications")
      ->check(CLI::IsMember(weft::tools::split_app_names()));
  bench_split
      ->add_option("--window", split_bench_args.window,
                   "Measurements in each rate's median (1: the seed's overwrite)")
      ->check(CLI::Range(1, 100));
  bench_split
      ->add_option("--lu-size", split_bench_args.lu_sizes,
                   "The LU's order (repeatable; default 16384, 1024 with --quick; "
                   "cpu_only is left out above 16384)")
      ->check(CLI::Range(256, 65536));
  bench_split->add_flag("--equal-core-shares", split_bench_args.equal_core_shares,
                        "Keep DB2's core shares equal instead of learning them per core");
  bench_split
      ->add_flag("--seed-core-classes", split_bench_args.seed_core_classes,
                 "Learn DB2 per class of the seed: the workers that share a cache with the "
                 "feeding thread's core, and the others (one class where all are alike)")
      ->excludes("--equal-core-shares");
  bench_split->add_flag("--take-tail,!--no-take-tail", split_bench_args.take_tail,
                        "Cores that finish their range take pieces of the ranges still running "
                        "(the default; --no-take-tail: each core runs its own range whole)");
  bench_split->add_flag("--lu-look-ahead,!--no-lu-look-ahead", split_bench_args.lu_look_ahead,
                        "The LU factors the next panel beside each trailing update (HPL's "
                        "look-ahead of depth 1; the default; --no-lu-look-ahead: each panel "
                        "waits for the update before it)");

  auto* bench_streams = bench->add_subcommand(
      "streams",
      "Task streams (seed 001): ping-pong on one GPU, two GPUs and two processes, and concurrent "
      "kernels, against MPI + CUDA (runs itself in two MPI processes)");
  weft::tools::BenchStreamsArgs streams_args;
  bench_streams->add_flag("--quick", streams_args.quick, "Fewer sizes and 3 samples");
  bench_streams->add_option("--json", streams_args.json_path,
                            "Write results to FILE as JSON, a table to FILE with .md and the "
                            "speed-up chart to FILE with .svg");
  bench_streams->add_option("--samples", streams_args.samples, "Measured runs per contender")
      ->check(CLI::Range(1, 1000));
  bench_streams->add_option("--machine", streams_args.machine,
                            "Machine name recorded in the JSON (default: $WEFT_MACHINE or gpu)");
  bench_streams->add_option("--only", streams_args.only, "Run only these benchmark families")
      ->check(CLI::IsMember({"pingpong", "bcast", "concurrent_kernels", "bmm", "nbody"}));

  auto* bench_render = bench->add_subcommand(
      "render",
      "Write a suite's .md table and charts again from the JSON it wrote (the JSON is kept)");
  std::string render_json;
  bench_render->add_option("json", render_json, "The suite's JSON file")->required();

  auto* split = app.add_subcommand(
      "split", "The adaptive CPU/GPU splitter's learned tables (DB1, DB2) in the store");
  split->require_subcommand(1);
  weft::tools::SplitArgs split_args;
  auto* split_show = split->add_subcommand(
      "show", "Each region's learned GPU share by size, predicted against measured, and DB2");
  auto* split_reset = split->add_subcommand(
      "reset", "Forget learned tables: the next regions start from the prior");
  for (auto* c : {split_show, split_reset}) {
    c->add_option("--db", split_args.db, "The store (default as for `weft models`)");
    c->add_option("--machine", split_args.machine, "Only this machine's tables");
    c->add_option("--region", split_args.region, "Only this region's tables");
  }

  auto* demo = app.add_subcommand("demo", "Run the main showcase on whatever hardware is here");
  weft::tools::DemoArgs demo_args;
  demo->add_flag("--quick", demo_args.quick, "Smaller problem sizes");
  demo->add_option("--trace", demo_args.trace,
                   "Write the factor pipeline's Chrome trace to FILE (and an SVG beside it)");

  if (const int status = weft::tools::parse_command_line(app, argc, argv, "weft"); status >= 0) {
    return status;
  }

  try {
    if (info->parsed()) return weft::tools::run_info(info_json);
    if (bench_cpu->parsed()) {
      std::string command = "weft";
      for (int i = 1; i < argc; ++i) command += std::string(" ") + argv[i];
      cpu_args.command = command;
      return weft::tools::forward_bench_cpu(cpu_args);
    }
    if (bench_gpu->parsed()) {
      std::string command = "weft";
      for (int i = 1; i < argc; ++i) command += std::string(" ") + argv[i];
      gpu_args.command = command;
      return weft::tools::run_bench_gpu_pool(gpu_args);
    }
    if (bench_apps->parsed()) {
      weft::tools::quiet_openblas_workers(argv);
      std::string command = "weft";
      for (int i = 1; i < argc; ++i) command += std::string(" ") + argv[i];
      apps_args.command = command;
      return weft::tools::run_bench_gpu_apps(apps_args);
    }
    if (bench_split->parsed()) {
      weft::tools::one_blas_thread_per_call(argv);
      std::string command = "weft";
      for (int i = 1; i < argc; ++i) command += std::string(" ") + argv[i];
      split_bench_args.command = command;
      return weft::tools::run_bench_split(split_bench_args);
    }
    if (bench_render->parsed()) return weft::tools::render_suite(render_json);
    if (bench_streams->parsed()) {
      weft::tools::start_under_mpirun(argv);
      std::string command = "weft";
      for (int i = 1; i < argc; ++i) command += std::string(" ") + argv[i];
      streams_args.command = command;
      return weft::tools::run_bench_streams(streams_args);
    }
    if (demo->parsed()) return weft::tools::run_demo(demo_args);
    std::string command = "weft";
    for (int i = 1; i < argc; ++i) command += std::string(" ") + argv[i];
    graph_args.command = command;
    if (bench_graph->parsed()) return weft::tools::run_bench_graph(graph_args);
    if (explain->parsed()) return weft::tools::run_graph_explain(graph_args);
    if (graph_run->parsed()) return weft::tools::run_graph_run(graph_args);
    if (calibrate->parsed()) {
      if (graph_args.sizes.empty()) graph_args.sizes = {"4m", "32m"};
      return weft::tools::run_calibrate(graph_args);
    }
    if (models->parsed()) return weft::tools::run_models(models_args);
    if (split_show->parsed()) return weft::tools::run_split_show(split_args);
    if (split_reset->parsed()) return weft::tools::run_split_reset(split_args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "weft: %s\n", e.what());
    return 1;
  }
  return 2;
}
