#include "suite.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <thread>

#include "kernels.hpp"
#include "weft/cpu/executor.hpp"

#if WEFT_HAVE_TBB
#include <tbb/global_control.h>
#endif
#if WEFT_HAVE_OPENMP
#include <omp.h>
#endif

// Peer runners vanish (become empty) when the peer is not built in.
#if WEFT_HAVE_TBB
#define WEFT_TBB_RUN(...) std::function<Outcome()>(__VA_ARGS__)
#else
#define WEFT_TBB_RUN(...) std::function<Outcome()>()
#endif
#if WEFT_HAVE_OPENMP
#define WEFT_OMP_RUN(...) std::function<Outcome()>(__VA_ARGS__)
#else
#define WEFT_OMP_RUN(...) std::function<Outcome()>()
#endif

namespace weft::bench::cpu {

namespace {

struct Sizes {
  int fib = 32;
  int nqueens_small = 12;
  int nqueens = 13;
  int uts_depth = 11;
  int lu_nb = 32, lu_bs = 64;
  std::size_t multisort = std::size_t{32} << 20;
  int align_seqs = 100, align_min = 200, align_max = 400;
  std::size_t stream = std::size_t{1} << 26;
  std::int64_t empty_tasks = 1'000'000;
  std::int64_t chain = 100'000;
  std::int64_t external_spawns = 200'000;
  std::int64_t external_pause_ns = 2'000;
  std::size_t is_keys = std::size_t{1} << 23;  // NAS IS class A: 2^23 keys, 2^19 buckets
  int is_max_key = 1 << 19;
  int lu_grid = 1024, lu_planes = 64;
};

Sizes quick_sizes() {
  Sizes s;
  s.fib = 25;
  s.nqueens_small = 9;
  s.nqueens = 10;
  s.uts_depth = 8;
  s.lu_nb = 12;
  s.lu_bs = 32;
  s.multisort = std::size_t{1} << 20;
  s.align_seqs = 30;
  s.align_min = 50;
  s.align_max = 100;
  s.stream = std::size_t{1} << 21;
  s.empty_tasks = 100'000;
  s.chain = 10'000;
  s.external_spawns = 20'000;
  s.is_keys = std::size_t{1} << 20;
  s.is_max_key = 1 << 16;
  s.lu_grid = 256;
  s.lu_planes = 16;
  return s;
}

bool wanted(const CpuSuiteOptions& o, const std::string& name) {
  return o.only.empty() || std::find(o.only.begin(), o.only.end(), name) != o.only.end();
}

template <class F>
Outcome timed(F&& f) {
  bool ok = false;
  const double s = time_seconds([&] { ok = f(); });
  return Outcome{s, ok};
}

}  // namespace

std::vector<std::string> available_peers() {
  std::vector<std::string> p;
#if WEFT_HAVE_TBB
  p.emplace_back("tbb");
#endif
#if WEFT_HAVE_OPENMP
  p.emplace_back("openmp");
#endif
#if WEFT_HAVE_STARPU
  p.emplace_back("starpu");
#endif
  return p;
}

Suite run_cpu_suite(const CpuSuiteOptions& o) {
  const Sizes z = o.quick ? quick_sizes() : Sizes{};
  SuiteOptions so;
  so.samples = o.samples;
  so.warmups = 1;
  Suite suite("cpu", so);
  suite.record_host_handoff("start");  // which kind of machine instance this run had
  // sparselu, multisort and alignment run the same kernels in every runtime and differ only
  // by ~1% of scheduling, far less than their run-to-run spread on a small shared machine, so
  // they get three times the rounds for a median that a lucky or unlucky run does not decide
  // (more rounds only cost time, so the factor is safe on any machine; --samples scales it).
  const int close_contest_samples = 3 * so.samples;

  weft::cpu::ExecutorOptions eo;
  eo.workers = static_cast<std::size_t>(o.workers);
  eo.pinning = o.pinning;
  auto ex = std::make_unique<weft::cpu::Executor>(eo);
  // The suite's other executors (help-first, bounded-depth) live beside `ex`, which holds the
  // automatic binding; they are bound to the same units when it is (only one of them runs at a
  // time), so that the spawn policies are compared under the same placement.
  eo.pinning = ex->pinned_units().empty() ? weft::cpu::Pinning::none : weft::cpu::Pinning::always;
  const int p = static_cast<int>(ex->num_workers());
  std::fprintf(stderr, "[bench] cpu suite: %d workers for weft and every peer%s; weft's %s\n", p,
               o.quick ? " (quick sizes)" : "",
               ex->pinned_units().empty() ? "unbound" : "bound one to each hardware thread");
#if WEFT_HAVE_TBB
  tbb::global_control tbb_threads(tbb::global_control::max_allowed_parallelism,
                                  static_cast<std::size_t>(p));
#endif
#if WEFT_HAVE_OPENMP
  omp_set_num_threads(p);
#endif

  auto with_peers = [&](std::vector<Contender> c, const std::function<Outcome()>& tbb_run,
                        const std::function<Outcome()>& omp_run) {
#if WEFT_HAVE_TBB
    if (tbb_run) c.push_back({"tbb", tbb_run});
#endif
#if WEFT_HAVE_OPENMP
    if (omp_run) c.push_back({"openmp", omp_run});
#endif
    (void)tbb_run;
    (void)omp_run;
    return c;
  };

  // ---- Fib ----
  if (wanted(o, "fib32")) {
    const long expect = fib_seq(z.fib);
    suite.compare(
        "fib32", "s", Better::lower,
        with_peers(
            {{"weft", [&] { return timed([&] { return fib_weft(*ex, z.fib) == expect; }); }}},
            WEFT_TBB_RUN([&] { return timed([&] { return fib_tbb(z.fib) == expect; }); }),
            WEFT_OMP_RUN([&] { return timed([&] { return fib_omp(z.fib) == expect; }); })));
  }
  // ---- N-Queens ----
  for (auto [name, n] : {std::pair<const char*, int>{"nqueens12", z.nqueens_small},
                         std::pair<const char*, int>{"nqueens13", z.nqueens}}) {
    if (!wanted(o, name)) continue;
    const long expect = nqueens_seq(n);
    suite.compare(
        name, "s", Better::lower,
        with_peers(
            {{"weft",
              [&, n = n] { return timed([&] { return nqueens_weft(*ex, n) == expect; }); }}},
            WEFT_TBB_RUN([&, n = n] { return timed([&] { return nqueens_tbb(n) == expect; }); }),
            WEFT_OMP_RUN([&, n = n] { return timed([&] { return nqueens_omp(n) == expect; }); })));
  }
  // ---- UTS ----
  if (wanted(o, "uts")) {
    UtsParams up;
    up.max_depth = z.uts_depth;
    const std::uint64_t expect = uts_seq(up);
    std::fprintf(stderr, "[bench] uts tree: %llu nodes\n", static_cast<unsigned long long>(expect));
    suite.compare(
        "uts", "s", Better::lower,
        with_peers({{"weft", [&] { return timed([&] { return uts_weft(*ex, up) == expect; }); }}},
                   WEFT_TBB_RUN([&] { return timed([&] { return uts_tbb(up) == expect; }); }),
                   WEFT_OMP_RUN([&] { return timed([&] { return uts_omp(up) == expect; }); })));
  }
  // ---- SparseLU ----
  if (wanted(o, "sparselu")) {
    SparseMatrix reference = sparselu_input(z.lu_nb, z.lu_bs);
    sparselu_seq(reference);
    auto run = [&](auto&& factor) {
      SparseMatrix m = sparselu_input(z.lu_nb, z.lu_bs);  // fresh input, outside the timing
      const double s = time_seconds([&] { factor(m); });
      return Outcome{s, sparselu_max_diff(reference, m) < 1e-3};
    };
    suite.compare(
        "sparselu", "s", Better::lower,
        with_peers({{"weft", [&] { return run([&](SparseMatrix& m) { sparselu_weft(*ex, m); }); }}},
                   WEFT_TBB_RUN([&] { return run([](SparseMatrix& m) { sparselu_tbb(m); }); }),
                   WEFT_OMP_RUN([&] { return run([](SparseMatrix& m) { sparselu_omp(m); }); })),
        close_contest_samples);
  }
  // ---- Multisort ----
  if (wanted(o, "multisort")) {
    const auto input = multisort_input(z.multisort, 42);
    auto sorted = input;
    std::sort(sorted.begin(), sorted.end());
    auto run = [&](auto&& sort) {
      auto data = input;
      const double s = time_seconds([&] { sort(data); });
      return Outcome{s, data == sorted};
    };
    suite.compare(
        "multisort", "s", Better::lower,
        with_peers({{"weft", [&] { return run([&](auto& d) { multisort_weft(*ex, d); }); }}},
                   WEFT_TBB_RUN([&] { return run([](auto& d) { multisort_tbb(d); }); }),
                   WEFT_OMP_RUN([&] { return run([](auto& d) { multisort_omp(d); }); })),
        close_contest_samples);
  }
  // ---- Alignment ----
  if (wanted(o, "alignment")) {
    const auto seqs = alignment_input(z.align_seqs, z.align_min, z.align_max, 7);
    const auto expect = alignment_seq(seqs);
    suite.compare(
        "alignment", "s", Better::lower,
        with_peers(
            {{"weft", [&] { return timed([&] { return alignment_weft(*ex, seqs) == expect; }); }}},
            WEFT_TBB_RUN([&] { return timed([&] { return alignment_tbb(seqs) == expect; }); }),
            WEFT_OMP_RUN([&] { return timed([&] { return alignment_omp(seqs) == expect; }); })),
        close_contest_samples);
  }
  // ---- STREAM ----
  const bool any_stream = wanted(o, "stream_copy") || wanted(o, "stream_scale") ||
                          wanted(o, "stream_add") || wanted(o, "stream_triad");
  if (any_stream) {
    StreamArrays s;
    stream_init_weft(*ex, s, z.stream);
    const double scalar = 3.0;
    for (auto [name, op] : {std::pair<const char*, StreamOp>{"stream_copy", StreamOp::copy},
                            {"stream_scale", StreamOp::scale},
                            {"stream_add", StreamOp::add},
                            {"stream_triad", StreamOp::triad}}) {
      if (!wanted(o, name)) continue;
      const double bytes = stream_bytes(op, z.stream);
      // Verification: re-derive a sample of outputs from the inputs after each run.
      auto check = [&, op = op] {
        for (std::size_t i = 0; i < s.a.size(); i += 4099) {
          double expect = 0, got = 0;
          switch (op) {
            case StreamOp::copy:
              expect = s.a[i];
              got = s.c[i];
              break;
            case StreamOp::scale:
              expect = scalar * s.c[i];
              got = s.b[i];
              break;
            case StreamOp::add:
              expect = s.a[i] + s.b[i];
              got = s.c[i];
              break;
            case StreamOp::triad:
              expect = s.b[i] + scalar * s.c[i];
              got = s.a[i];
              break;
          }
          if (std::abs(expect - got) > 1e-9 * std::max(1.0, std::abs(expect))) return false;
        }
        return true;
      };
      auto rate = [&](auto&& kernel) {
        const double secs = time_seconds(kernel);
        return Outcome{bytes / secs / 1e9, check()};
      };
      suite.compare(
          name, "GB/s", Better::higher,
          with_peers(
              {{"weft", [&, op = op] { return rate([&] { stream_weft(*ex, s, op, scalar); }); }}},
              WEFT_TBB_RUN([&, op = op] { return rate([&] { stream_tbb(s, op, scalar); }); }),
              WEFT_OMP_RUN([&, op = op] { return rate([&] { stream_omp(s, op, scalar); }); })));
    }
  }
  // ---- Empty tasks (throughput, millions of tasks per second) ----
  if (wanted(o, "empty_tasks")) {
    const std::int64_t n = z.empty_tasks;
    auto rate = [n](auto&& run) {
      std::int64_t ran = 0;
      const double secs = time_seconds([&] { ran = run(); });
      return Outcome{static_cast<double>(n) / secs / 1e6, ran == n};
    };
    std::vector<Contender> c{
        {"weft", [&] { return rate([&] { return empty_tasks_weft(*ex, n); }); }}};
    c = with_peers(std::move(c),
                   WEFT_TBB_RUN([&] { return rate([&] { return empty_tasks_tbb(n); }); }),
                   WEFT_OMP_RUN([&] { return rate([&] { return empty_tasks_omp(n); }); }));
#if WEFT_HAVE_STARPU
    c.push_back({"starpu", [&] {
                   starpu_start(p);
                   const Outcome out = rate([&] { return empty_tasks_starpu(n); });
                   starpu_stop();
                   return out;
                 }});
#endif
    suite.compare("empty_tasks", "Mtasks/s", Better::higher, std::move(c));
    // The same with every task queued (help-first): the cost bounded-queue spawning avoids.
    weft::cpu::ExecutorOptions hf = eo;
    hf.spawn_policy = weft::cpu::SpawnPolicy::help_first;
    weft::cpu::Executor queued(hf);
    suite.measure("empty_tasks_help_first", "Mtasks/s", Better::higher,
                  [&] { return rate([&] { return empty_tasks_weft(queued, n); }); });
  }
  // ---- External spawns (a thread outside the pool hands out pairs of tasks, pausing between
  // pairs: the floor is half the pause per task) ----
  if (wanted(o, "external_spawns")) {
    const std::int64_t n = z.external_spawns, pause = z.external_pause_ns;
    auto per_task = [n](auto&& run) {
      std::int64_t ran = 0;
      const double secs = time_seconds([&] { ran = run(); });
      return Outcome{secs / static_cast<double>(n) * 1e6, ran == n};
    };
    std::vector<Contender> c{
        {"weft", [&] { return per_task([&] { return external_spawns_weft(*ex, n, pause); }); }}};
    c = with_peers(std::move(c), WEFT_TBB_RUN([&] {
                     return per_task([&] { return external_spawns_tbb(n, pause); });
                   }),
                   std::function<Outcome()>());
    suite.compare("external_spawns", "us/task", Better::lower, std::move(c));
  }
  // ---- Task chain ----
  if (wanted(o, "task_chain")) {
    const std::int64_t n = z.chain;
    auto per_task = [n](auto&& run) {
      std::int64_t ran = 0;
      const double secs = time_seconds([&] { ran = run(); });
      return Outcome{secs / static_cast<double>(n) * 1e6, ran == n};
    };
    std::vector<Contender> c{
        {"weft", [&] { return per_task([&] { return task_chain_weft(*ex, n); }); }}};
    c = with_peers(std::move(c),
                   WEFT_TBB_RUN([&] { return per_task([&] { return task_chain_tbb(n); }); }),
                   WEFT_OMP_RUN([&] { return per_task([&] { return task_chain_omp(n); }); }));
#if WEFT_HAVE_STARPU
    c.push_back({"starpu", [&] {
                   starpu_start(p);
                   const Outcome out = per_task([&] { return task_chain_starpu(n); });
                   starpu_stop();
                   return out;
                 }});
#endif
    suite.compare("task_chain", "us/task", Better::lower, std::move(c));
  }
  // ---- Pipelines ----
  if (wanted(o, "pipeline_is")) {
    const IsInput in = is_input(z.is_keys, z.is_max_key, 3);
    const auto expect = is_histogram_seq(in);
    suite.compare(
        "pipeline_is", "s", Better::lower,
        with_peers(
            {{"weft",
              [&] { return timed([&] { return is_histogram_weft(*ex, in, 16) == expect; }); }}},
            WEFT_TBB_RUN([&] { return timed([&] { return is_histogram_tbb(in, p) == expect; }); }),
            WEFT_OMP_RUN(
                [&] { return timed([&] { return is_histogram_omp(in, p) == expect; }); })));
    // The critical region alone, pipelined in x blocks against one lock, beside the model
    // x*y/(x+y-1) for y participants: IS's merge (memory-bound) and a MOLDYN-like one with
    // arithmetic per update (compute-bound).
    for (auto [kind, rounds] : {std::pair<const char*, int>{"is", 0}, {"moldyn", 24}}) {
      const auto expect_r = is_histogram_seq(in, rounds);
      for (int blocks : {4, 8, 16, 32}) {
        std::vector<double> ratio;
        bool ok = true;
        for (int s = 0; s < so.samples + 1; ++s) {
          double locked = 0, piped = 0;
          ok = ok && is_histogram_weft(*ex, in, 0, &locked, rounds) == expect_r;
          ok = ok && is_histogram_weft(*ex, in, blocks, &piped, rounds) == expect_r;
          if (s > 0) ratio.push_back(locked / piped);  // the first round is a warm-up
        }
        const std::string name =
            std::string("pipeline_") + kind + "_speedup_b" + std::to_string(blocks);
        const double model = static_cast<double>(blocks) * p / (blocks + p - 1);
        suite.add_metric(Metric{name, "x", Better::higher, ratio});
        if (rounds == 0) {
          suite.add_metric(Metric{std::string("pipeline_model_b") + std::to_string(blocks),
                                  "x",
                                  Better::higher,
                                  {model}});
        }
        std::fprintf(stderr,
                     "[bench] pipeline_%-6s %2d blocks: critical region x%.2f (model x%.2f)%s\n",
                     kind, blocks, median(ratio), model, ok ? "" : " (UNVERIFIED)");
      }
    }
  }
  if (wanted(o, "pipeline_lu")) {
    Grid reference = lu_input(z.lu_grid, z.lu_planes);
    lu_wavefront_seq(reference);
    auto run = [&](auto&& sweep) {
      Grid g = lu_input(z.lu_grid, z.lu_planes);
      const double s = time_seconds([&] { sweep(g); });
      return Outcome{s, grid_max_diff(reference, g) == 0.0};
    };
    std::vector<Contender> c{
        {"weft", [&] { return run([&](Grid& g) { lu_wavefront_weft(*ex, g, p); }); }}};
#if WEFT_HAVE_OPENMP
    c.push_back({"openmp", [&] { return run([&](Grid& g) { lu_wavefront_omp(g, p); }); }});
#endif
    suite.compare("pipeline_lu", "s", Better::lower, std::move(c));
  }
  // ---- Bounded-queue against bounded-depth spawning: the default spawn policy against the
  // classic depth cut-off, on the same recursive kernels ----
  if (wanted(o, "spawn_policy")) {
    weft::cpu::ExecutorOptions bd = eo;
    bd.spawn_policy = weft::cpu::SpawnPolicy::bounded_depth;
    bd.depth_bound = 10;
    weft::cpu::Executor depth_ex(bd);
    const long fib_expect = fib_seq(z.fib);
    suite.compare(
        "spawn_fib", "s", Better::lower,
        {{"weft", [&] { return timed([&] { return fib_weft(*ex, z.fib) == fib_expect; }); }},
         {"bounded_depth",
          [&] { return timed([&] { return fib_weft(depth_ex, z.fib) == fib_expect; }); }}});
    UtsParams up;
    up.max_depth = z.uts_depth;
    const std::uint64_t uts_expect = uts_seq(up);
    suite.compare("spawn_uts", "s", Better::lower,
                  {{"weft", [&] { return timed([&] { return uts_weft(*ex, up) == uts_expect; }); }},
                   {"bounded_depth",
                    [&] { return timed([&] { return uts_weft(depth_ex, up) == uts_expect; }); }}});
    const auto input = multisort_input(z.multisort / 4, 43);
    auto sorted = input;
    std::sort(sorted.begin(), sorted.end());
    auto sort_run = [&](weft::cpu::Executor& e) {
      auto data = input;
      const double s = time_seconds([&] { multisort_weft(e, data); });
      return Outcome{s, data == sorted};
    };
    suite.compare("spawn_multisort", "s", Better::lower,
                  {{"weft", [&] { return sort_run(*ex); }},
                   {"bounded_depth", [&] { return sort_run(depth_ex); }}});
  }
  // ---- Cost of sleeping: latency of one task submitted to an idle pool ----
  if (wanted(o, "wake_latency")) {
    auto latency = [&](bool let_sleep) {
      std::vector<double> us;
      for (int i = 0; i < 200; ++i) {
        if (let_sleep) std::this_thread::sleep_for(std::chrono::milliseconds(2));
        const double t0 = now_seconds();
        double t_run = 0;
        ex->submit([&] { t_run = now_seconds(); }).get();
        us.push_back((t_run - t0) * 1e6);
      }
      return us;
    };
    suite.add_metric(Metric{"wake_latency_sleeping_us", "us", Better::lower, latency(true)});
    suite.add_metric(Metric{"wake_latency_busy_us", "us", Better::lower, latency(false)});
    std::fprintf(stderr, "[bench] wake latency: %.2f us from sleep, %.2f us back to back\n",
                 suite.metrics()[suite.metrics().size() - 2].median(),
                 suite.metrics().back().median());
  }
  suite.record_host_handoff("end");
  return suite;
}

}  // namespace weft::bench::cpu
