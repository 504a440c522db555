// `weft bench split` (split_suite.hpp). For each application: the peak rates (each side alone on
// its own memory), a cold adaptive run from them to convergence, a sweep of static splits around
// the converged one (the oracle), then the comparison of the converged adaptive splitter with
// GPU-only, CPU-only, the static split from peak rates and the oracle, in the same rounds.
#include "split/split_suite.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <map>
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
  std::size_t feeding_unit = 0;           // the calling thread's unit, where it is bound
  std::vector<std::size_t> seed_classes;  // with --seed-core-classes: each worker's
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
  if (!units.empty() && n >= 2) {
    s.feeding_unit = units.back();
    weft::cpu::pin_this_thread_to_pu(s.feeding_unit);
  }
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

// The splitter's options for the suite: 100 buckets, and the window and DB2 sharing asked for.
ws::SplitOptions split_options(const SplitSuiteOptions& o, const Setup& setup) {
  ws::SplitOptions so;
  so.buckets = 100;
  so.window = static_cast<std::size_t>(o.window);
  so.take_tail = o.take_tail;
  if (o.equal_core_shares) {  // one class: DB2 stays equal
    so.core_shares = ws::CoreShares::per_class;
    so.core_class.assign(setup.ex->num_workers(), 0);
  } else if (o.seed_core_classes) {
    so.core_shares = ws::CoreShares::per_class;
    so.core_class = setup.seed_classes;
  }
  return so;
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

// The splitter that measures a prior: the defaults, but the tail taken or not as the suite's
// splitters take it, so that both arms of an A/B start from rates measured their own way.
ws::SplitOptions probe_options(const SplitSuiteOptions& o) {
  ws::SplitOptions so;
  so.take_tail = o.take_tail;
  return so;
}

// The peak prior: the GPU's rate with its data in device memory, the cores' rate together on
// host memory (a CPU-only region). On the emulated device the "GPU" is one more core.
ws::PeakRates peak_rates(Setup& setup, SplitApp& app, const SplitSuiteOptions& o) {
  ws::Splitter probe(*setup.ex, *setup.gpu, app.name() + "-probe", {1, 1}, probe_options(o));
  const double cpu = app.work().work / median_seconds(probe, app, 0.0, 3);
  const double gpu = setup.gpu->is_emulated() ? cpu / static_cast<double>(setup.ex->num_workers())
                                              : app.gpu_local_rate(0);
  return {gpu, cpu};
}

// The cold regions' splits in the log, each as the GPU's share it ran with and its time
// (bucket:share@ms where regions fall in several buckets), so that a convergence count can be
// read back region by region.
void log_cold_splits(const std::string& bench, const std::vector<ws::RegionReport>& regions) {
  bool several = false;
  for (const ws::RegionReport& r : regions) several = several || r.bucket != regions[0].bucket;
  std::string line = "[split] " + bench + ": cold regions (GPU share@ms):";
  char cell[64];
  for (const ws::RegionReport& r : regions) {
    if (several) {
      std::snprintf(cell, sizeof cell, " %zu:%.3f@%.2f", r.bucket, r.gsplit, r.seconds * 1e3);
    } else {
      std::snprintf(cell, sizeof cell, " %.3f@%.2f", r.gsplit, r.seconds * 1e3);
    }
    line += cell;
  }
  std::fprintf(stderr, "%s\n", line.c_str());
}

// Regions until every later one ran within 2% of its bucket's final split (1: the cold split was
// already final).
int regions_to_converge(const std::vector<ws::RegionReport>& regions, const ws::SplitTables& t) {
  std::vector<double> used, final_split;
  for (const ws::RegionReport& r : regions) {
    used.push_back(r.gsplit);
    final_split.push_back(t.gsplit(r.bucket));
  }
  int last_off = 0;
  for (std::size_t i = 0; i < used.size(); ++i) {
    if (std::abs(used[i] - final_split[i]) > 0.02) last_off = static_cast<int>(i + 1);
  }
  return last_off + 1;
}

// The most regions any one bucket ran until every later region of that bucket ran within 2%
// of its final split: where regions fall in many buckets (the LU's trailing updates shrink
// through them), each bucket learns from its own regions only, and regions_to_converge counts
// the others' too.
int regions_per_bucket_to_converge(const std::vector<ws::RegionReport>& regions,
                                   const ws::SplitTables& t) {
  std::map<std::size_t, std::vector<ws::RegionReport>> by_bucket;
  for (const ws::RegionReport& r : regions) by_bucket[r.bucket].push_back(r);
  int most = 0;
  for (const auto& [bucket, own] : by_bucket) most = std::max(most, regions_to_converge(own, t));
  return most;
}

// The GPU's share of the work over a factorisation's regions.
double work_weighted_split(const std::vector<ws::RegionReport>& regions,
                           const apps::split::HplLu& lu) {
  double work = 0, gpu_work = 0;
  for (std::size_t i = 0; i < regions.size(); ++i) {
    const double w = lu.update_work(static_cast<int>(i) * lu.nb()).work;
    work += w;
    gpu_work += w * regions[i].gsplit;
  }
  return work > 0 ? gpu_work / work : 0;
}

void add(Suite& suite, const std::string& name, const std::string& unit, double v) {
  suite.add_metric(Metric{name, unit, Better::lower, {v}});
}

// Saves what a run learned for `weft split show`; a store that cannot take it is reported, and
// the measurements go on.
void save_tables(const SplitSuiteOptions& o, const ws::Splitter& s) {
  if (o.db.empty() || !ws::SplitStore::available()) return;
  try {
    ws::SplitStore store(o.db);
    store.save({o.machine, s.region(), s.gpu_side().description()}, s.tables());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[split] %s: tables not saved: %s\n", s.region().c_str(), e.what());
  }
}

void run_app(Suite& suite, Setup& setup, const std::string& app_name, const SplitSuiteOptions& o) {
  std::unique_ptr<SplitApp> app = make_app(app_name, o.quick);
  const std::string bench = benchmark_name(app_name, o.quick);
  std::fprintf(stderr, "[split] %s: peak rates\n", bench.c_str());
  const ws::PeakRates prior = peak_rates(setup, *app, o);
  ws::Splitter s(*setup.ex, *setup.gpu, bench, prior, split_options(o, setup));

  std::fprintf(stderr, "[split] %s: cold run from the peak split %.3f\n", bench.c_str(),
               s.tables().prior_gsplit());
  std::vector<ws::RegionReport> cold;
  bool cold_ok = true;
  for (int i = 0; i < kColdRegions; ++i) {
    app->clear_output();
    cold.push_back(s.run(app->work(), app->gpu(), app->cpu()));
    cold_ok = cold_ok && app->verify();
  }
  log_cold_splits(bench, cold);
  const double cold_seconds = cold.front().seconds;
  const std::size_t bucket = cold.back().bucket;
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
  add(suite, "converge_regions_" + app_name, "regions", regions_to_converge(cold, s.tables()));
  add(suite, "cold_first_region_ms_" + app_name, "ms", cold_seconds * 1e3);
  if (!cold_ok) std::fprintf(stderr, "[split] %s: a cold region failed its check\n", bench.c_str());
  save_tables(o, s);
}

// A thread that shares worker 0's core for its life, spinning: the slow core of the per-core case.
class CoreHog {
 public:
  explicit CoreHog(const weft::cpu::Executor& ex) {
    thread_ = std::thread([this] {
      while (!stop_.load(std::memory_order_relaxed)) {
      }
    });
    if (!ex.pinned_units().empty())
      pinned_ = weft::cpu::pin_thread_to_pu(thread_, ex.pinned_units()[0]);
  }
  ~CoreHog() {
    stop_.store(true, std::memory_order_relaxed);
    thread_.join();
  }
  [[nodiscard]] bool pinned() const noexcept { return pinned_; }

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
  bool pinned_ = false;
};

// The per-core case: the triad with worker 0's core shared with a spinning thread, learned from
// cold; the oracle sweeps the GPU's share with the learned core shares, equal_shares runs the
// converged GPU share with every core given the same share.
void run_percore(Suite& suite, Setup& setup, const SplitSuiteOptions& o) {
  const std::string app_name = "triad_host";
  std::unique_ptr<SplitApp> app = make_app(app_name, o.quick);
  const std::string bench = "percore_" + app_name;
  CoreHog hog(*setup.ex);
  if (!hog.pinned()) {
    std::fprintf(stderr, "[split] %s: skipped (the workers are not bound to cores)\n",
                 bench.c_str());
    return;
  }
  const ws::PeakRates prior = peak_rates(setup, *app, o);
  ws::SplitOptions so = split_options(o, setup);
  so.core_shares = ws::CoreShares::per_core;
  so.core_class.clear();
  ws::Splitter s(*setup.ex, *setup.gpu, bench, prior, so);
  std::vector<ws::RegionReport> cold;
  for (int i = 0; i < kColdRegions; ++i) cold.push_back(s.run(app->work(), app->gpu(), app->cpu()));
  log_cold_splits(bench, cold);
  const double converged = s.tables().gsplit(cold.back().bucket);
  const std::vector<double> shares = s.tables().csplit();
  std::fprintf(stderr, "[split] %s: converged to %.3f, worker 0's share %.3f of %zu cores\n",
               bench.c_str(), converged, shares[0], shares.size());
  double oracle = converged;
  double oracle_seconds = 1e300;
  for (int k = -kSweepHalfWidth; k <= kSweepHalfWidth; ++k) {
    const double g = std::clamp(converged + kSweepStep * k, 0.0, 1.0);
    const double t = median_seconds(s, *app, g, 3);
    if (t < oracle_seconds) {
      oracle_seconds = t;
      oracle = g;
    }
  }
  const std::vector<double> equal(shares.size(), 1.0 / static_cast<double>(shares.size()));
  auto contender = [&](const char* name, double gsplit, std::vector<double> core_shares) {
    return Contender{name, [&s, &app, gsplit, core_shares] {
                       const Timed t = run_region(s, *app, gsplit, core_shares);
                       return Outcome{t.seconds * 1e3, t.verified};
                     }};
  };
  // gpu_only and cpu_only as in the other applications (cpu_only with the learned core shares:
  // the best the cores do alone with one of them slowed).
  suite.compare(
      bench, "ms", Better::lower,
      {contender("weft", -1, {}), contender("gpu_only", 1, {}), contender("cpu_only", 0, {}),
       contender("oracle", oracle, {}), contender("equal_shares", converged, equal),
       contender("static_peak", s.tables().prior_gsplit(), equal)});
  add(suite, "slow_core_share_" + app_name, "share", s.tables().csplit()[0]);
  add(suite, "mean_core_share_" + app_name, "share", 1.0 / static_cast<double>(shares.size()));
  add(suite, "converge_regions_percore_" + app_name, "regions",
      regions_to_converge(cold, s.tables()));
  add(suite, "cold_first_region_ms_percore_" + app_name, "ms", cold.front().seconds * 1e3);
}

// The HPL-style LU: each contender a whole factorisation, its trailing updates split at a fixed
// share (or learned, for weft), checked by HPL's scaled residual.
void run_lu(Suite& suite, Setup& setup, const SplitSuiteOptions& o, int n) {
  constexpr int kLargestWithCpuOnly = 16384;
  const int nb = n <= 2048 ? 128 : 512;
  const std::string bench = "hpl_lu_" + std::to_string(n);
  std::unique_ptr<apps::split::HplLu> made;
  try {
    made = std::make_unique<apps::split::HplLu>(n, nb, 11);
  } catch (const std::runtime_error& e) {
    std::fprintf(stderr, "[split] %s: skipped (%s)\n", bench.c_str(), e.what());
    return;
  }
  apps::split::HplLu& lu = *made;
  lu.set_look_ahead(o.lu_look_ahead);
  std::fprintf(stderr, "[split] %s: peak rates%s\n", bench.c_str(),
               o.lu_look_ahead ? "" : " (look-ahead off)");
  ws::Splitter probe(*setup.ex, *setup.gpu, bench + "-probe", {1, 1}, probe_options(o));
  const ws::PeakRates prior = lu.peak_rates(probe, *setup.gpu);
  ws::SplitOptions so = split_options(o, setup);
  so.size_min = 0;
  so.size_max = lu.update_work(0).work;
  ws::Splitter s(*setup.ex, *setup.gpu, bench, prior, so);
  std::fprintf(stderr, "[split] %s: cold runs from the peak split %.3f\n", bench.c_str(),
               s.tables().prior_gsplit());
  std::vector<ws::RegionReport> cold, last;
  double cold_seconds = 0;
  double worst_residual = 0;
  constexpr int kColdRuns = 3;
  for (int i = 0; i < kColdRuns; ++i) {
    lu.reset();
    last.clear();
    const double t = lu.factor(s, *setup.gpu, -1, &last);
    if (i == 0) cold_seconds = t;
    worst_residual = std::max(worst_residual, lu.scaled_residual());
    cold.insert(cold.end(), last.begin(), last.end());
  }
  log_cold_splits(bench, cold);
  const double converged = work_weighted_split(last, lu);
  std::fprintf(stderr, "[split] %s: converged to %.3f of the work; sweeping the oracle\n",
               bench.c_str(), converged);
  double oracle = converged;
  double oracle_seconds = 1e300;
  std::set<double> sweep;
  for (int k = -kSweepHalfWidth; k <= kSweepHalfWidth; ++k) {
    sweep.insert(std::clamp(converged + kSweepStep * k, 0.0, 1.0));
  }
  for (double g : sweep) {
    lu.reset();
    const double t = lu.factor(s, *setup.gpu, g);
    if (t < oracle_seconds) {
      oracle_seconds = t;
      oracle = g;
    }
  }
  const double peak = s.tables().prior_gsplit();
  auto contender = [&](const char* name, double gsplit) {
    return Contender{name, [&s, &lu, &setup, gsplit] {
                       lu.reset();
                       const double t = lu.factor(s, *setup.gpu, gsplit);
                       return Outcome{t, lu.scaled_residual() < 16};
                     }};
  };
  std::vector<Contender> contenders = {contender("weft", -1), contender("gpu_only", 1)};
  if (n <= kLargestWithCpuOnly) {
    contenders.push_back(contender("cpu_only", 0));
  } else {
    std::fprintf(stderr, "[split] %s: cpu_only left out above n = %d\n", bench.c_str(),
                 kLargestWithCpuOnly);
  }
  contenders.push_back(contender("static_peak", peak));
  contenders.push_back(contender("oracle", oracle));
  suite.compare(bench, "s", Better::lower, std::move(contenders));
  const double weft_seconds = suite.comparisons().back().weft;
  suite.add_metric(
      Metric{"gflops_" + bench, "GFLOPS", Better::higher, {lu.flops() / weft_seconds / 1e9}});
  add(suite, "scaled_residual_" + bench, "", worst_residual);
  add(suite, "gsplit_adaptive_" + bench, "share", converged);
  add(suite, "gsplit_oracle_" + bench, "share", oracle);
  add(suite, "gsplit_static_peak_" + bench, "share", peak);
  add(suite, "converge_regions_" + bench, "regions", regions_to_converge(cold, s.tables()));
  add(suite, "converge_regions_per_bucket_" + bench, "regions",
      regions_per_bucket_to_converge(cold, s.tables()));
  add(suite, "cold_first_run_s_" + bench, "s", cold_seconds);
  save_tables(o, s);
}

}  // namespace

std::vector<std::string> split_app_names() {
  return {"gemm_rows", "triad_host", "spmv_host", "hpl_lu"};
}

Suite run_split_suite(const SplitSuiteOptions& o) {
  SuiteOptions so;
  so.samples = o.samples;
  so.warmups = 1;
  so.settle_ms = 20;
  Suite suite("split", so);
  Setup setup = make_setup();
  if (!setup.gpu->is_emulated()) suite.set_gpu(setup.gpu->description(), 1);
  std::string shares = o.equal_core_shares ? "equal" : "per-core";
  if (o.seed_core_classes) {
    setup.seed_classes = ws::seed_core_classes(*setup.ex, setup.feeding_unit);
    const std::vector<std::size_t>& classes = setup.seed_classes;
    const auto apart = std::count(classes.begin(), classes.end(), std::size_t{1});
    const std::string unit = std::to_string(setup.feeding_unit);
    shares = apart == 0
                 ? "the seed's class (one: the workers alike towards the feeding unit " + unit + ")"
                 : "the seed's classes (" +
                       std::to_string(classes.size() - static_cast<std::size_t>(apart)) +
                       " workers sharing a cache with the feeding unit " + unit + ", " +
                       std::to_string(apart) + " not)";
  }
  std::fprintf(
      stderr, "[split] %zu workers for the CPU's part, GPU side: %s; window %d, %s core shares%s\n",
      setup.ex->num_workers(), setup.gpu->description().c_str(), o.window, shares.c_str(),
      o.take_tail ? ", idle cores take the tail" : "");
  for (const std::string& name : split_app_names()) {
    if (!o.only.empty() && std::find(o.only.begin(), o.only.end(), name) == o.only.end()) continue;
    if (name == "hpl_lu") {
      std::vector<int> sizes = o.lu_sizes;
      if (sizes.empty()) sizes = {o.quick ? 1024 : 16384};
      for (int n : sizes) run_lu(suite, setup, o, n);
    } else {
      run_app(suite, setup, name, o);
    }
    if (name == "triad_host" && o.percore) run_percore(suite, setup, o);
  }
  return suite;
}

}  // namespace weft::bench::split
