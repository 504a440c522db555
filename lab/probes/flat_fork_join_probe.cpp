// A flat fork-join under weft and TBB: one root spawns N tasks that each spin for T us (no
// memory traffic), 2 workers, after 20 ms of quiet (as `weft bench cpu` settles). Per thread:
// tasks run, when its first task started, the idle gaps between its tasks and the largest one;
// over all runs: wall time against the ideal N * T / 2, summed gaps, the non-root thread's share.
// Environment: HF=1 help-first spawning, PB=<n> public_bound, S=<us> spin_before_sleep.
// Build from the repository root after `make` (build/ as the Makefile makes it):
//   g++ -O2 -std=c++20 -Iinclude lab/probes/flat_fork_join_probe.cpp build/src/libweft.a \
//     -ltbb -lhwloc -lpthread -o flat_fork_join_probe && ./flat_fork_join_probe 25
#include <tbb/global_control.h>
#include <tbb/task_group.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "weft/cpu/executor.hpp"
#include "weft/cpu/task_group.hpp"

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Span {
  double start, end;
};
constexpr int kMaxThreads = 8;
std::vector<Span> g_spans[kMaxThreads];  // each thread appends to its own
std::atomic<int> g_threads{0};
thread_local int t_thread = -1;

int this_thread_index() {
  if (t_thread < 0) t_thread = g_threads.fetch_add(1);
  return t_thread;
}

void spin_task(double us) {
  const int me = this_thread_index();
  const double t0 = now();
  while (now() - t0 < us * 1e-6) {
  }
  g_spans[me].push_back({t0, now()});
}

}  // namespace

int main(int argc, char** argv) {
  constexpr int kTasks = 400, kRuns = 30;
  const double task_us = argc > 1 ? std::atof(argv[1]) : 25;
  tbb::global_control tbb_threads(tbb::global_control::max_allowed_parallelism, 2);
  weft::cpu::ExecutorOptions eo;
  eo.workers = 2;
  if (std::getenv("HF") != nullptr) eo.spawn_policy = weft::cpu::SpawnPolicy::help_first;
  if (const char* v = std::getenv("PB")) eo.public_bound = std::atoi(v);
  if (const char* v = std::getenv("S"))
    eo.spin_before_sleep = std::chrono::microseconds(std::atoi(v));
  weft::cpu::Executor ex(eo);
  const char* names[] = {"weft", "tbb"};
  double gaps[2] = {}, wall[2] = {}, others[2] = {};
  for (int run = 0; run < kRuns; ++run) {
    for (int c = 0; c < 2; ++c) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      for (auto& spans : g_spans) spans.clear();
      int root = -1;
      const double t0 = now();
      if (c == 0) {
        ex.run([&] {
          root = this_thread_index();
          weft::cpu::TaskGroup g(ex);
          for (int i = 0; i < kTasks; ++i) g.spawn([&] { spin_task(task_us); });
          g.wait();
        });
      } else {
        root = this_thread_index();
        tbb::task_group g;
        for (int i = 0; i < kTasks; ++i) g.run([&] { spin_task(task_us); });
        g.wait();
      }
      wall[c] += now() - t0;
      for (int th = 0; th < kMaxThreads; ++th) {
        const auto& v = g_spans[th];
        if (v.empty()) continue;
        double busy = 0, largest = 0;
        for (std::size_t i = 0; i < v.size(); ++i) {
          busy += v[i].end - v[i].start;
          if (i > 0) largest = std::max(largest, v[i].start - v[i - 1].end);
        }
        const double g = (v.back().end - v.front().start) - busy;
        gaps[c] += g;
        if (th != root) others[c] += static_cast<double>(v.size());
        if (run == kRuns - 1) {
          std::printf(
              "  last run, %s thread %d%s: %zu tasks, first at %.3f ms, gaps %.3f ms, "
              "largest %.3f ms\n",
              names[c], th, th == root ? " (root)" : "", v.size(), (v.front().start - t0) * 1e3,
              g * 1e3, largest * 1e3);
        }
      }
    }
  }
  for (int c = 0; c < 2; ++c) {
    std::printf(
        "%-4s wall %.3f ms (ideal %.3f), gaps %.3f ms per run, the non-root thread ran "
        "%.0f of %d tasks\n",
        names[c], wall[c] / kRuns * 1e3, kTasks * task_us / 2 * 1e-3, gaps[c] / kRuns * 1e3,
        others[c] / kRuns, kTasks);
  }
  std::printf("weft: %.1f sleeps and %.1f steals per run\n",
              static_cast<double>(ex.stats().sleeps) / kRuns,
              static_cast<double>(ex.stats().steals) / kRuns);
}
