// Where SparseLU's time goes under weft and TBB: the same factorisation as `weft bench cpu`'s
// sparselu (32 x 32 blocks of 64 x 64, the BOTS pattern), each kernel call timed, so that
// idle share = 1 - (sum of task times) / (workers x wall) separates scheduling (idle cores)
// from the kernels themselves; the idle time inside the bmod phases is split into the head
// (phase start to a thread's first task), the gaps between a thread's tasks (and how much of
// them is the root's), and the tail, and so is the idle time inside the fwd/bdiv phases; the
// wall outside both kinds of phase (lu0 and the hand-overs between phases); the kernels' own
// times (bmod, lu0) as percentiles; and a lower bound on the wall of any scheduler running the
// same tasks (wall_lower_bound), so that wall / bound says how much scheduling could still gain.
// Alternates weft, a second weft (S2 set) and TBB; medians of `reps` factorisations, phase
// figures summed over all of them and divided by reps.
// Environment: S=<us> / S2=<us> set ExecutorOptions::spin_before_sleep of the two weft
// executors, SETTLE=<ms> sleeps before each run (as the bench's harness does, 50 ms), PREFILL
// allocates the fill-in blocks before the timing, PRIV=<n> / PUB=<n> set the executors'
// private_bound / public_bound, PIN=none|always|automatic their pinning (default automatic),
// LONGGAPS prints every gap over 10 us between one thread's bmod tasks with where it fell.
// The "root's / other's gaps" lines give those gaps' distribution per thread, and how many were
// over 10 us and their sum per factorisation: a thief that had nothing to steal, or had no core.
// Build from the repository root after `make` (build/ as the Makefile makes it):
//   g++ -O3 -DNDEBUG -std=c++20 -Iinclude -Ibench lab/probes/sparselu_idle_probe.cpp \
//     build/bench/libweft_bench.a build/src/libweft.a -ltbb -fopenmp -lhwloc -lstarpu-1.3 \
//     -lpthread -o sparselu_idle_probe && SETTLE=20 ./sparselu_idle_probe 30
#include <tbb/global_control.h>
#include <tbb/task_group.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cpu/common.hpp"
#include "cpu/kernels.hpp"
#include "weft/cpu/executor.hpp"
#include "weft/cpu/task_group.hpp"

namespace {

using weft::bench::cpu::SparseMatrix;
namespace common = weft::bench::cpu::common;

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::atomic<double> g_busy{0};

// Each task's span, per thread (a thread appends to its own list only), tagged with its bmod
// phase (-1 outside one, -2 for lu0, which only the root runs).
constexpr int kLu0 = -2;
struct Span {
  double start, end;
  int phase;
};
constexpr int kMaxThreads = 64;
std::vector<Span> g_spans[kMaxThreads];
std::atomic<int> g_threads{0};
thread_local int t_thread = -1;
std::atomic<int> g_phase{-1};
std::vector<std::pair<double, double>> g_phase_spans;  // bmod phases, start and end
// fwd/bdiv phases, start and end; their tasks are tagged kFwdBdiv + the phase's index.
constexpr int kFwdBdiv = 1 << 20;
std::vector<std::pair<double, double>> g_fb_spans;
int g_contender = 0;

template <class F>
void timed(F f, int phase) {
  if (t_thread < 0) t_thread = g_threads.fetch_add(1);
  const double t0 = now();
  f();
  const double t1 = now();
  g_busy.fetch_add(t1 - t0);
  g_spans[t_thread].push_back({t0, t1, phase});
}
template <class F>
void timed(F f) {
  timed(f, g_phase.load(std::memory_order_relaxed));
}

struct PhaseIdle {
  double head = 0, gaps = 0, tail = 0;            // seconds, summed over threads and phases
  double root_gaps = 0;                           // the part of `gaps` on the root's thread
  std::vector<double> root_gap_us, other_gap_us;  // each gap between a thread's tasks, us
  // Adds one factorisation's figures, as a share of `reps` (the mean over the runs).
  void add(const PhaseIdle& one, int reps) {
    head += one.head / reps;
    gaps += one.gaps / reps;
    tail += one.tail / reps;
    root_gaps += one.root_gaps / reps;
    root_gap_us.insert(root_gap_us.end(), one.root_gap_us.begin(), one.root_gap_us.end());
    other_gap_us.insert(other_gap_us.end(), one.other_gap_us.begin(), one.other_gap_us.end());
  }
};

// The thread that ran lu0 (the root), or -1.
int root_thread() {
  for (int th = 0; th < kMaxThreads; ++th) {
    for (const Span& sp : g_spans[th]) {
      if (sp.phase == kLu0) return th;
    }
  }
  return -1;
}

// The least wall time any scheduler could take for this run's tasks on `workers` threads,
// given the program's joins: every lu0 alone, then each phase (fwd/bdiv, then bmod) no
// shorter than its longest task nor than its task time shared evenly. Ignores the spawn
// loops' own work (the fill-in blocks' allocation), so it is below what is reachable.
double wall_lower_bound(int workers) {
  std::map<int, std::pair<double, double>> phases;  // tag -> (sum, max) of task times, s
  double lu0 = 0;
  for (int th = 0; th < g_threads.load(); ++th) {
    for (const Span& sp : g_spans[th]) {
      const double t = sp.end - sp.start;
      if (sp.phase == kLu0) {
        lu0 += t;
      } else if (sp.phase >= 0) {
        auto& [sum, longest] = phases[sp.phase];
        sum += t;
        longest = std::max(longest, t);
      }
    }
  }
  double bound = lu0;
  for (const auto& [tag, p] : phases) bound += std::max(p.second, p.first / workers);
  return bound;
}

// Idle time inside the phases `phases` (start, end), whose tasks are tagged tag0 + index, of
// the threads that ran a task in each.
PhaseIdle phase_idle(const std::vector<std::pair<double, double>>& phases, int tag0) {
  PhaseIdle idle;
  const int root = root_thread();
  for (std::size_t k = 0; k < phases.size(); ++k) {
    const auto [start, end] = phases[k];
    for (int th = 0; th < g_threads.load(); ++th) {
      const auto& spans = g_spans[th];
      double first = 1e300, last = 0, busy = 0;
      std::vector<std::pair<double, double>> mine;
      for (const Span& sp : spans) {
        if (sp.phase != tag0 + static_cast<int>(k)) continue;
        first = std::min(first, sp.start);
        last = std::max(last, sp.end);
        busy += sp.end - sp.start;
        mine.emplace_back(sp.start, sp.end);
      }
      std::sort(mine.begin(), mine.end());
      for (std::size_t q = 1; q < mine.size(); ++q) {
        const double gap_us = (mine[q].first - mine[q - 1].second) * 1e6;
        (th == root ? idle.root_gap_us : idle.other_gap_us).push_back(gap_us);
        if (std::getenv("LONGGAPS") != nullptr && gap_us > 10 && tag0 == 0)
          std::printf(
              "  %s long gap %s phase %zu of %zu tasks here %zu/%zu: %.1f us, from %.1f us after "
              "the phase's start to %.1f us before its end (phase %.1f us)\n",
              g_contender == 1 ? "tbb " : "weft", th == root ? "root " : "other", k, phases.size(),
              q, mine.size(), gap_us, (mine[q - 1].second - start) * 1e6,
              (end - mine[q].first) * 1e6, (end - start) * 1e6);
      }
      if (busy == 0) continue;
      idle.head += first - start;
      idle.tail += end - last;
      idle.gaps += (last - first) - busy;
      if (th == root) idle.root_gaps += (last - first) - busy;
    }
  }
  return idle;
}

// The factorisation of bench/cpu/bots.cpp, generic over the runtime's group type.
template <class Group, class MakeGroup>
void factorise(SparseMatrix& m, MakeGroup make_group) {
  const int nb = m.nb, bs = m.bs;
  for (int k = 0; k < nb; ++k) {
    timed([&] { common::lu0(m.at(k, k)->data(), bs); }, kLu0);
    const float* diag = m.at(k, k)->data();
    {
      const double fb_start = now();
      const int tag = kFwdBdiv + static_cast<int>(g_fb_spans.size());
      Group g = make_group();
      for (int j = k + 1; j < nb; ++j) {
        if (auto* b = m.at(k, j))
          g.spawn([=] { timed([&] { common::fwd(diag, b->data(), bs); }, tag); });
      }
      for (int i = k + 1; i < nb; ++i) {
        if (auto* b = m.at(i, k))
          g.spawn([=] { timed([&] { common::bdiv(diag, b->data(), bs); }, tag); });
      }
      g.wait();
      g_fb_spans.emplace_back(fb_start, now());
    }
    const double phase_start = now();
    g_phase.store(static_cast<int>(g_phase_spans.size()));
    Group g = make_group();
    for (int i = k + 1; i < nb; ++i) {
      if (m.at(i, k) == nullptr) continue;
      for (int j = k + 1; j < nb; ++j) {
        if (m.at(k, j) == nullptr) continue;
        float* out = common::ensure_block(m, i, j).data();
        const float* row = m.at(i, k)->data();
        const float* col = m.at(k, j)->data();
        g.spawn([=] { timed([&] { common::bmod(row, col, out, bs); }); });
      }
    }
    g.wait();
    g_phase_spans.emplace_back(phase_start, now());
    g_phase.store(-1);
  }
}

struct TbbGroup {
  tbb::task_group g;
  template <class F>
  void spawn(F f) {
    g.run(std::move(f));
  }
  void wait() { g.wait(); }
};

}  // namespace

// PREFILL: every block the factorisation fills in is allocated (zeros) before the timing, so
// that no spawn loop allocates and clears blocks between tasks.
void prefill(SparseMatrix& m) {
  for (int k = 0; k < m.nb; ++k) {
    for (int i = k + 1; i < m.nb; ++i) {
      if (m.at(i, k) == nullptr) continue;
      for (int j = k + 1; j < m.nb; ++j) {
        if (m.at(k, j) != nullptr) (void)common::ensure_block(m, i, j);
      }
    }
  }
}

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 15;
  constexpr int kWorkers = 2;
  tbb::global_control tbb_threads(tbb::global_control::max_allowed_parallelism, kWorkers);
  auto options = [](const char* env) {
    weft::cpu::ExecutorOptions eo;
    eo.workers = kWorkers;
    if (const char* s = std::getenv(env))
      eo.spin_before_sleep = std::chrono::microseconds(std::atoi(s));
    if (const char* s = std::getenv("PIN")) {
      eo.pinning = std::string(s) == "none"     ? weft::cpu::Pinning::none
                   : std::string(s) == "always" ? weft::cpu::Pinning::always
                                                : weft::cpu::Pinning::automatic;
    }
    if (const char* s = std::getenv("PRIV")) eo.private_bound = std::strtoul(s, nullptr, 10);
    if (const char* s = std::getenv("PUB")) eo.public_bound = std::strtoul(s, nullptr, 10);
    return eo;
  };
  weft::cpu::Executor ex(options("S"));
  std::unique_ptr<weft::cpu::Executor> ex2;
  if (std::getenv("S2") != nullptr) ex2 = std::make_unique<weft::cpu::Executor>(options("S2"));
  const int contenders = ex2 ? 3 : 2;
  std::vector<double> wall[3], busy[3], bound[3];
  std::vector<double> bmod_us[3], lu0_us[3];  // every call's time
  PhaseIdle idle[3], fb_idle[3];
  double outside[3] = {0, 0, 0};  // wall outside both kinds of phase (lu0, hand-overs), s
  for (int r = 0; r < reps; ++r) {
    for (int c = 0; c < contenders; ++c) {
      SparseMatrix m = weft::bench::cpu::sparselu_input(32, 64);
      if (std::getenv("PREFILL") != nullptr) prefill(m);
      if (const char* s = std::getenv("SETTLE")) {
        std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(s)));
      }
      g_busy = 0;
      g_contender = c;
      for (auto& spans : g_spans) spans.clear();
      g_phase_spans.clear();
      g_fb_spans.clear();
      const double t0 = now();
      if (c == 1) {
        factorise<TbbGroup>(m, [] { return TbbGroup{}; });
      } else {
        weft::cpu::Executor& e = c == 0 ? ex : *ex2;
        e.run([&] { factorise<weft::cpu::TaskGroup>(m, [&] { return weft::cpu::TaskGroup(e); }); });
      }
      wall[c].push_back(now() - t0);
      busy[c].push_back(g_busy.load());
      bound[c].push_back(wall_lower_bound(kWorkers));
      idle[c].add(phase_idle(g_phase_spans, 0), reps);
      fb_idle[c].add(phase_idle(g_fb_spans, kFwdBdiv), reps);
      double in_phases = 0;
      for (const auto& [a, z] : g_phase_spans) in_phases += z - a;
      for (const auto& [a, z] : g_fb_spans) in_phases += z - a;
      outside[c] += (wall[c].back() - in_phases) / reps;
      for (const auto& spans : g_spans) {
        for (const Span& sp : spans) {
          if (sp.phase >= 0 && sp.phase < kFwdBdiv) bmod_us[c].push_back((sp.end - sp.start) * 1e6);
          if (sp.phase == kLu0) lu0_us[c].push_back((sp.end - sp.start) * 1e6);
        }
      }
    }
  }
  const char* names[] = {"weft", "tbb", "weft2"};
  for (int c = 0; c < contenders; ++c) {
    std::sort(wall[c].begin(), wall[c].end());
    std::sort(busy[c].begin(), busy[c].end());
    const double w = wall[c][wall[c].size() / 2], b = busy[c][busy[c].size() / 2];
    std::printf(
        "%-5s wall %.4f s, task time %.4f s, idle share %.3f; bmod phases' idle ms: head "
        "%.2f gaps %.2f tail %.2f",
        names[c], w, b, 1 - b / (kWorkers * w), idle[c].head * 1e3, idle[c].gaps * 1e3,
        idle[c].tail * 1e3);
    std::sort(bound[c].begin(), bound[c].end());
    std::printf("; lower bound %.4f s (wall / bound %.3f)", bound[c][bound[c].size() / 2],
                w / bound[c][bound[c].size() / 2]);
    if (c != 1) {
      const weft::cpu::Executor& e = c == 0 ? ex : *ex2;
      std::printf("; spin_before_sleep %lld us, %.1f sleeps per factorisation",
                  static_cast<long long>(e.options().spin_before_sleep.count()),
                  static_cast<double>(e.stats().sleeps) / reps);
    }
    auto pct = [](std::vector<double>& v, double q) {
      std::sort(v.begin(), v.end());
      return v.empty() ? 0.0 : v[static_cast<std::size_t>(q * static_cast<double>(v.size() - 1))];
    };
    std::printf(
        "\n      bmod us p50 %.1f p90 %.1f; lu0 us p50 %.1f; root's share of the gaps %.2f\n",
        pct(bmod_us[c], 0.5), pct(bmod_us[c], 0.9), pct(lu0_us[c], 0.5),
        idle[c].gaps > 0 ? idle[c].root_gaps / idle[c].gaps : 0.0);
    auto gap_line = [&](const char* who, std::vector<double>& v) {
      double over10 = 0;
      int n10 = 0;
      for (double g : v) {
        if (g > 10) {
          over10 += g;
          ++n10;
        }
      }
      std::printf(
          "      %s gaps: %zu per factorisation, us p50 %.2f p90 %.2f p99 %.1f; over 10 us: %.1f "
          "per factorisation, %.2f ms\n",
          who, v.size() / reps, pct(v, 0.5), pct(v, 0.9), pct(v, 0.99),
          static_cast<double>(n10) / reps, over10 / reps * 1e-3);
    };
    gap_line("root's ", idle[c].root_gap_us);
    gap_line("other's", idle[c].other_gap_us);
    std::printf(
        "      fwd/bdiv phases' idle ms: head %.2f gaps %.2f tail %.2f; wall outside the "
        "phases (lu0, hand-overs) %.2f ms\n",
        fb_idle[c].head * 1e3, fb_idle[c].gaps * 1e3, fb_idle[c].tail * 1e3, outside[c] * 1e3);
  }
}
