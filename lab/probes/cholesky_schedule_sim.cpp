// A discrete-event model of how the pool schedules the tiled Cholesky's task graph, to compare
// priority rules before spending GPU time on them (decision 044). It takes the applications'
// own CholeskyGraph (its tasks, dependencies and successor order), and the pool's rules as
// docs/gpu.md states them:
//   - `blocks` blocks, each running one task at a time;
//   - two FIFO ready queues, urgent and normal, a free block taking urgent first;
//   - the block that completes successors keeps one: the first urgent one it completes, else
//     the first normal one while the urgent queue is empty (decision 042); the rest are queued
//     in successor order;
//   - a dependent start costs `keep_us` after the input's end when kept, `queue_us` through the
//     queues.
// Bodies take the medians measured on one H200 (the kind's time for the size; a flag sets
// them). It prints the span and the critical chain's waits for each priority rule.
// Build and run here (no GPU; the host code of the applications' library):
//   g++ -std=c++20 -O2 -Iinclude -Iapps/gpu lab/probes/cholesky_schedule_sim.cpp \
//     build/apps/libweft_gpu_apps.a build/src/libweft.a -lopenblas -o /tmp/sim
//   /tmp/sim N BLOCK BLOCKS [POTRF TRSM SYRK GEMM (us) [KEEP QUEUE (us)]]
//   e.g. /tmp/sim 8192 2 131; /tmp/sim 1024 1 263
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <queue>
#include <string>
#include <vector>

#include "cholesky.hpp"

namespace {

using apps::gpu::CholeskyGraph;
using Kind = CholeskyGraph::Kind;

struct Costs {
  double body[4];  // potrf, trsm, syrk, gemm (us)
  double keep_us, queue_us;
};

struct Result {
  double span_us;
  double chain_waits_us;
  std::size_t chain_tasks;
};

Result simulate(const CholeskyGraph& g, const std::vector<int>& urgent, int blocks, const Costs& c,
                bool keep) {
  const std::size_t n = g.tasks().size();
  std::vector<int> waiting = g.dependencies();
  std::vector<double> start(n, 0), end(n, 0), ready(n, 0);
  std::deque<int> q[2];                  // 0 normal, 1 urgent
  using Event = std::pair<double, int>;  // (end time, task)
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events;
  int idle = blocks;
  auto body = [&](int t) { return c.body[static_cast<int>(g.tasks()[std::size_t(t)].kind)]; };
  auto run = [&](int t, double at) {
    start[std::size_t(t)] = at;
    end[std::size_t(t)] = at + body(t);
    events.push({end[std::size_t(t)], t});
  };
  auto take = [&]() -> int {
    for (int level : {1, 0}) {
      if (!q[level].empty()) {
        const int t = q[level].front();
        q[level].pop_front();
        return t;
      }
    }
    return -1;
  };
  for (std::size_t t = 0; t < n; ++t) {
    if (waiting[t] == 0) q[urgent[t]].push_back(int(t));
  }
  while (idle > 0) {
    const int t = take();
    if (t < 0) break;
    --idle;
    run(t, 0.0);
  }
  while (!events.empty()) {
    const auto [now, t] = events.top();
    events.pop();
    std::vector<int> completed;
    for (const int s : g.successors()[std::size_t(t)]) {
      if (--waiting[std::size_t(s)] == 0) {
        completed.push_back(s);
        ready[std::size_t(s)] = now;
      }
    }
    int kept = -1;
    if (keep) {
      for (const int s : completed) {
        if (urgent[std::size_t(s)] != 0) {
          kept = s;
          break;
        }
      }
      if (kept < 0 && q[1].empty() && !completed.empty()) kept = completed.front();
    }
    for (const int s : completed) {
      if (s != kept) q[urgent[std::size_t(s)]].push_back(s);
    }
    if (kept >= 0) {
      run(kept, now + c.keep_us);
    } else {
      ++idle;  // this block, free
    }
    while (idle > 0) {
      const int next = take();
      if (next < 0) break;
      --idle;
      run(next, now + c.queue_us);
    }
  }
  // The critical chain, back from the last task to end through the input that ended last.
  std::vector<std::vector<int>> preds(n);
  for (std::size_t t = 0; t < n; ++t) {
    for (const int s : g.successors()[t]) preds[std::size_t(s)].push_back(int(t));
  }
  std::size_t t = std::size_t(std::max_element(end.begin(), end.end()) - end.begin());
  Result r{*std::max_element(end.begin(), end.end()), 0.0, 0};
  for (;;) {
    ++r.chain_tasks;
    if (preds[t].empty()) break;
    r.chain_waits_us += start[t] - ready[t];
    std::size_t last = std::size_t(preds[t].front());
    for (const int p : preds[t]) {
      if (end[std::size_t(p)] > end[last]) last = std::size_t(p);
    }
    t = last;
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 8192;
  const int block = argc > 2 ? std::atoi(argv[2]) : 2;
  const int blocks = argc > 3 ? std::atoi(argv[3]) : 131;
  // Medians on one H200: blocks of 2 on CholeskyPool (decision 043's trace), tiles on the
  // applications' pool (decision 042's).
  Costs c = block == 2 ? Costs{{83.6, 84.6, 24.3, 25.7}, 4.7, 6.1}
                       : Costs{{26.8, 20.8, 8.8, 9.5}, 4.7, 6.1};
  if (argc > 7) {
    for (int k = 0; k < 4; ++k) c.body[k] = std::atof(argv[4 + k]);
  }
  if (argc > 9) {
    c.keep_us = std::atof(argv[8]);
    c.queue_us = std::atof(argv[9]);
  }
  const CholeskyGraph g(n, block);
  const std::size_t tasks = g.tasks().size();
  struct Rule {
    const char* name;
    std::function<bool(const CholeskyGraph::Task&)> urgent;
  };
  const std::vector<Rule> rules{
      {"none urgent", [](const CholeskyGraph::Task&) { return false; }},
      {"on_critical_path (POTRF, TRSM k+1, updates of column k+1)", apps::gpu::on_critical_path},
      {"and every TRSM",
       [](const CholeskyGraph::Task& t) {
         return t.kind == Kind::trsm || apps::gpu::on_critical_path(t);
       }},
      {"two panels ahead (TRSM i <= k+2, updates of columns k+1, k+2)",
       [](const CholeskyGraph::Task& t) {
         switch (t.kind) {
           case Kind::potrf:
             return true;
           case Kind::trsm:
             return t.i <= t.k + 2;
           default:
             return t.j <= t.k + 2;
         }
       }},
  };
  std::printf(
      "n = %d, blocks of %d tile(s): %zu tasks on %d blocks; bodies %.1f / %.1f / %.1f / "
      "%.1f us; a step %.1f us kept, %.1f queued\n",
      n, block, tasks, blocks, c.body[0], c.body[1], c.body[2], c.body[3], c.keep_us, c.queue_us);
  for (const Rule& rule : rules) {
    std::vector<int> urgent(tasks);
    for (std::size_t t = 0; t < tasks; ++t) urgent[t] = rule.urgent(g.tasks()[t]) ? 1 : 0;
    for (const bool keep : {true, false}) {
      const Result r = simulate(g, urgent, blocks, c, keep);
      std::printf("  %-62s %-7s span %8.0f us; chain %4zu tasks, waits %7.0f us\n", rule.name,
                  keep ? "keep" : "no keep", r.span_us, r.chain_tasks, r.chain_waits_us);
    }
  }
  return 0;
}
