// `weft bench split` (split_suite.hpp). For each application: the peak rates (each side alone on
// its own memory), a cold adaptive run from them to convergence, a sweep of static splits around
// the converged one (the oracle), then the comparison of the converged adaptive splitter with
// GPU-only, CPU-only, the static split from peak rates and the oracle, in the same rounds.
#include "split/split_suite.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <memory>
#include <set>
#include <thread>

#include "split_apps.hpp"
#include "weft/cpu/executor.hpp"
#include "weft/cpu/topology.hpp"
#include "weft/split/splitter.hpp"
#include "weft/split/store.hpp"

namespace weft::bench::split {

namespace {

namespace ws = weft::split;
using apps::split::SplitApp;

// Regions of a cold run before its split is taken as final.
constexpr int kColdRegions = 10;
// The oracle's sweep: steps of 2% around the converged split.
constexpr double kSweepStep = 0.02;
constexpr int kSweepHalfWidth = 3;

struct Setup {
  std::unique_ptr<weft::cpu::Executor> ex;
  std::unique_ptr<ws::GpuSide> gpu;
};

// One worker per allowed unit but the last, bound; the calling thread (the GPU's feeder) on the
// last unit, as the seed keeps the feeding core out of the CPU's part.
Setup make_setup() {
  Setup s;
  const std::vector<std::size_t> units = weft::cpu::allowed_processing_units();
  const std::size_t n = std::max<std::size_t>(units.size(), weft::cpu::allowed_hardware_threads());
  weft::cpu::ExecutorOptions o;
  o.workers = std::max<std::size_t>(n, 2) - 1;
  o.pinning = n >= 2 ? weft::cpu::Pinning::always : weft::cpu::Pinning::none;
  s.ex = std::make_unique<weft::cpu::Executor>(o);
  if (!units.empty() && n >= 2) weft::cpu::pin_this_thread_to_pu(units.back());
  s.gpu = ws::GpuSide::best_available();
  return s;
}

std::unique_ptr<SplitApp> make_app(const std::string& name, bool quick) {
  if (name == "gemm_rows") {
    const int n = quick ? 1024 : 8192;
    return apps::split::make_gemm_rows(n, n, n, 7);
  }
  if (name == "triad_host") return apps::split::make_triad(quick ? (1 << 22) : (1 << 27), 7);
  if (name == "spmv_host") return apps::split::make_spmv(quick ? (1 << 16) : (1 << 22), 256, 7);
  return nullptr;
}

std::string benchmark_name(const std::string& app, bool quick) {
  if (app == "gemm_rows") return quick ? "gemm_rows_1024" : "gemm_rows_8192";
  return app;
}

struct Timed {
  double seconds = 0;
  bool verified = false;
};

// Runs one region (adaptive when gsplit < 0) and checks its result.
Timed run_region(ws::Splitter& s, SplitApp& app, double gsplit,
                 const std::vector<double>& core_shares = {}) {
  app.clear_output();
  const ws::RegionReport r =
      gsplit < 0 ? s.run(app.work(), app.gpu(), app.cpu())
                 : s.run_fixed(app.work(), gsplit, app.gpu(), app.cpu(), core_shares);
  return {r.seconds, app.verify()};
}

double median_seconds(ws::Splitter& s, SplitApp& app, double gsplit, int runs) {
  std::vector<double> t;
  for (int i = 0; i < runs; ++i) t.push_back(run_region(s, app, gsplit).seconds);
  return median(t);
}

// The peak prior: the GPU's rate with its data in device memory, the cores' rate together on
// host memory (a CPU-only region). On the emulated device the "GPU" is one more core.
ws::PeakRates peak_rates(Setup& setup, SplitApp& app) {
  ws::Splitter probe(*setup.ex, *setup.gpu, app.name() + "-probe", {1, 1});
  const double cpu = app.work().work / median_seconds(probe, app, 0.0, 3);
  const double gpu = setup.gpu->is_emulated() ? cpu / static_cast<double>(setup.ex->num_workers())
                                              : app.gpu_local_rate(0);
  return {gpu, cpu};
}

// Regions until the split used stays within 2% of the final one (1: the cold split was final).
int regions_to_converge(const std::vector<double>& used, double final_split) {
  int last_off = 0;
  for (std::size_t i = 0; i < used.size(); ++i) {
    if (std::abs(used[i] - final_split) > 0.02) last_off = static_cast<int>(i + 1);
  }
  return last_off + 1;
}

void add(Suite& suite, const std::string& name, const std::string& unit, double v) {
  suite.add_metric(Metric{name, unit, Better::lower, {v}});
}

void save_tables(const SplitSuiteOptions& o, const ws::Splitter& s) {
  if (o.db.empty() || !ws::SplitStore::available()) return;
  ws::SplitStore store(o.db);
  store.save({o.machine, s.region(), s.gpu_side().description()}, s.tables());
}

void run_app(Suite& suite, Setup& setup, const std::string& app_name, const SplitSuiteOptions& o) {
  std::unique_ptr<SplitApp> app = make_app(app_name, o.quick);
  const std::string bench = benchmark_name(app_name, o.quick);
  std::fprintf(stderr, "[split] %s: peak rates\n", bench.c_str());
  const ws::PeakRates prior = peak_rates(setup, *app);
  ws::SplitOptions so;
  so.buckets = 100;
  so.window = 5;
  ws::Splitter s(*setup.ex, *setup.gpu, bench, prior, so);

  std::fprintf(stderr, "[split] %s: cold run from the peak split %.3f\n", bench.c_str(),
               s.tables().prior_gsplit());
  std::vector<double> used;
  double cold_seconds = 0;
  bool cold_ok = true;
  std::size_t bucket = 0;
  for (int i = 0; i < kColdRegions; ++i) {
    app->clear_output();
    const ws::RegionReport r = s.run(app->work(), app->gpu(), app->cpu());
    cold_ok = cold_ok && app->verify();
    if (i == 0) cold_seconds = r.seconds;
    used.push_back(r.gsplit);
    bucket = r.bucket;
  }
  const double converged = s.tables().gsplit(bucket);
  std::fprintf(stderr, "[split] %s: converged to %.3f; sweeping the oracle\n", bench.c_str(),
               converged);
  std::set<double> sweep;
  for (int k = -kSweepHalfWidth; k <= kSweepHalfWidth; ++k) {
    sweep.insert(std::clamp(converged + kSweepStep * k, 0.0, 1.0));
  }
  double oracle = converged;
  double oracle_seconds = 1e300;
  for (double g : sweep) {
    const double t = median_seconds(s, *app, g, 3);
    if (t < oracle_seconds) {
      oracle_seconds = t;
      oracle = g;
    }
  }
  const double peak = s.tables().prior_gsplit();
  auto contender = [&](const char* name, double gsplit) {
    return Contender{name, [&s, &app, gsplit] {
                       const Timed t = run_region(s, *app, gsplit);
                       return Outcome{t.seconds * 1e3, t.verified};
                     }};
  };
  suite.compare(bench, "ms", Better::lower,
                {contender("weft", -1), contender("gpu_only", 1), contender("cpu_only", 0),
                 contender("static_peak", peak), contender("oracle", oracle)});
  add(suite, "gsplit_adaptive_" + app_name, "share", s.tables().gsplit(bucket));
  add(suite, "gsplit_oracle_" + app_name, "share", oracle);
  add(suite, "gsplit_static_peak_" + app_name, "share", peak);
  add(suite, "converge_regions_" + app_name, "regions", regions_to_converge(used, converged));
  add(suite, "cold_first_region_ms_" + app_name, "ms", cold_seconds * 1e3);
  if (!cold_ok) std::fprintf(stderr, "[split] %s: a cold region failed its check\n", bench.c_str());
  save_tables(o, s);
}

}  // namespace

std::vector<std::string> split_app_names() { return {"gemm_rows", "triad_host", "spmv_host"}; }

Suite run_split_suite(const SplitSuiteOptions& o) {
  SuiteOptions so;
  so.samples = o.samples;
  so.warmups = 1;
  so.settle_ms = 20;
  Suite suite("split", so);
  Setup setup = make_setup();
  if (!setup.gpu->is_emulated()) suite.set_gpu(setup.gpu->description(), 1);
  std::fprintf(stderr, "[split] %zu workers for the CPU's part, GPU side: %s\n",
               setup.ex->num_workers(), setup.gpu->description().c_str());
  for (const std::string& name : split_app_names()) {
    if (!o.only.empty() && std::find(o.only.begin(), o.only.end(), name) == o.only.end()) continue;
    run_app(suite, setup, name, o);
  }
  return suite;
}

}  // namespace weft::bench::split
