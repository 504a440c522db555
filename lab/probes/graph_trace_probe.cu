// Where the tiled Cholesky's time goes when it runs as one task graph on the pool
// (CholeskyPlan::factor_as_graph): with lab/probes/graph_trace.patch applied, the kernel stamps
// each graph task's enqueue, take, start, body end and report (global ns) and its SM; this probe
// factors the matrix a few times, then prints, for the last run, the per-kind medians of each
// phase and the critical path (from the last task back through the input that enqueued each
// task) split into those phases. Built and run by graph_trace_probe.sh on the GPU machine.
//   graph_trace_probe [n ...]     (default 1024 2048)
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <vector>

#include "app_pool.hpp"
#include "cholesky.hpp"
#include "cuda_check.cuh"

namespace apps::gpu {
void set_graph_trace(unsigned long long* trace);  // added by graph_trace.patch
}

namespace {

using apps::gpu::CholeskyGraph;

enum Field { kEnqueued, kTaken, kStarted, kBodyEnded, kReported, kWhere, kFields };

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

const char* kind_name(CholeskyGraph::Kind k) {
  switch (k) {
    case CholeskyGraph::Kind::potrf:
      return "potrf";
    case CholeskyGraph::Kind::trsm:
      return "trsm";
    case CholeskyGraph::Kind::syrk:
      return "syrk";
    default:
      return "gemm";
  }
}

void analyse(const CholeskyGraph& graph, const unsigned long long* trace, double wall_us) {
  const auto& tasks = graph.tasks();
  const std::size_t n = tasks.size();
  auto at = [&](std::size_t t, int f) { return static_cast<double>(trace[kFields * t + f]); };
  std::vector<std::vector<int>> inputs(n);
  for (std::size_t t = 0; t < n; ++t) {
    for (const int s : graph.successors()[t])
      inputs[static_cast<std::size_t>(s)].push_back(static_cast<int>(t));
  }
  // Phases in us, per kind: queue (enqueued -> taken), hand-over (taken -> started), body,
  // report (body end -> reported, the successor step included).
  std::map<std::string, std::vector<double>> queue, hand, body, report;
  double first = 1e300, last = 0;
  for (std::size_t t = 0; t < n; ++t) {
    if (inputs[t].empty()) continue;  // the root ran from a ring: not stamped
    const std::string k = kind_name(tasks[t].kind);
    queue[k].push_back((at(t, kTaken) - at(t, kEnqueued)) / 1e3);
    hand[k].push_back((at(t, kStarted) - at(t, kTaken)) / 1e3);
    body[k].push_back((at(t, kBodyEnded) - at(t, kStarted)) / 1e3);
    report[k].push_back((at(t, kReported) - at(t, kBodyEnded)) / 1e3);
    first = std::min(first, at(t, kEnqueued));
    last = std::max(last, at(t, kReported));
  }
  double first_take = 1e300, last_take = 0, busy = 0;
  for (std::size_t t = 0; t < n; ++t) {
    if (inputs[t].empty()) continue;
    first_take = std::min(first_take, at(t, kTaken));
    last_take = std::max(last_take, at(t, kTaken));
    busy += at(t, kReported) - at(t, kTaken);
  }
  std::printf(
      "  wall %.0f us; first enqueue to last report %.0f us; %.2f takes per us; %.0f blocks "
      "busy on average\n",
      wall_us, (last - first) / 1e3, static_cast<double>(n - 1) / ((last_take - first_take) / 1e3),
      busy / (last - first));
  std::printf("  %-6s %6s %10s %10s %10s %10s   (medians, us)\n", "kind", "tasks", "queue",
              "handover", "body", "report");
  for (const auto& [k, v] : body) {
    std::printf("  %-6s %6zu %10.2f %10.2f %10.2f %10.2f\n", k.c_str(), v.size(), median(queue[k]),
                median(hand[k]), median(v), median(report[k]));
  }
  // The critical path: from the task reported last, back through the input whose successor
  // step enqueued it (the input whose body ended last), to a task enqueued by the root.
  std::size_t t = 0;
  for (std::size_t u = 0; u < n; ++u) {
    if (!inputs[u].empty() && at(u, kReported) > at(t, kReported)) t = u;
  }
  double q = 0, h = 0, b = 0, r = 0, gap = 0;
  int steps = 0;
  std::map<std::string, int> kinds;
  std::map<std::string, double> kind_body;
  for (;;) {
    ++steps;
    const std::string k = kind_name(tasks[t].kind);
    ++kinds[k];
    q += at(t, kTaken) - at(t, kEnqueued);
    h += at(t, kStarted) - at(t, kTaken);
    b += at(t, kBodyEnded) - at(t, kStarted);
    kind_body[k] += at(t, kBodyEnded) - at(t, kStarted);
    std::size_t by = static_cast<std::size_t>(inputs[t].front());
    for (const int i : inputs[t]) {
      if (at(static_cast<std::size_t>(i), kBodyEnded) > at(by, kBodyEnded))
        by = static_cast<std::size_t>(i);
    }
    if (inputs[by].empty()) break;                 // enqueued by the root
    gap += at(t, kEnqueued) - at(by, kBodyEnded);  // the input's successor step, to this task
    r += at(by, kReported) - at(by, kBodyEnded);
    t = by;
  }
  std::printf("  critical path: %d tasks:", steps);
  for (const auto& [k, c] : kinds)
    std::printf(" %s %d (body %.0f us)", k.c_str(), c, kind_body[k] / 1e3);
  std::printf(
      "\n    queue %.0f us, handover %.0f, bodies %.0f, body end -> successor enqueued %.0f "
      "(reports %.0f)\n",
      q / 1e3, h / 1e3, b / 1e3, gap / 1e3, r / 1e3);
  // SM sharing: for each task, the other graph tasks running on its SM at its start.
  std::map<std::string, std::vector<double>> alone, shared;
  for (std::size_t u = 0; u < n; ++u) {
    if (inputs[u].empty()) continue;
    const unsigned long long sm = trace[kFields * u + kWhere] >> 32;
    int others = 0;
    for (std::size_t v = 0; v < n; ++v) {
      if (v == u || inputs[v].empty() || (trace[kFields * v + kWhere] >> 32) != sm) continue;
      if (at(v, kStarted) < at(u, kBodyEnded) && at(v, kBodyEnded) > at(u, kStarted)) ++others;
    }
    (others == 0 ? alone : shared)[kind_name(tasks[u].kind)].push_back(
        (at(u, kBodyEnded) - at(u, kStarted)) / 1e3);
  }
  std::printf("  body median alone on its SM / sharing it (tasks):");
  for (const auto& [k, v] : body) {
    std::printf(" %s %.2f (%zu) / %.2f (%zu);", k.c_str(), median(alone[k]), alone[k].size(),
                median(shared[k]), shared[k].size());
  }
  std::printf("\n");
}

}  // namespace

// The plan's graph shape, prepared here too, so that a run can be timed phase by phase.
weft::gpu::GraphShape shape_of(apps::gpu::AppPool& pool, const CholeskyGraph& graph) {
  return pool.prepare_graph(graph.tasks().size(), graph.edges(), graph.priorities());
}

// CholeskyPlan::factor_as_graph's steps, each timed on the host: the records, push_graph, the
// first pop_batch's return, and the last's.
void timed_graph_run(apps::gpu::AppPool& pool, const weft::gpu::GraphShape& shape,
                     const CholeskyGraph& graph, double* a, int n) {
  using Clock = std::chrono::steady_clock;
  auto us = [](Clock::time_point from, Clock::time_point to) {
    return std::chrono::duration<double, std::micro>(to - from).count();
  };
  static std::vector<apps::gpu::AppPool::Record> records, done;
  const Clock::time_point t0 = Clock::now();
  apps::gpu::cholesky_records(graph, a, n, records);
  const Clock::time_point t1 = Clock::now();
  pool.push_graph(shape, records);
  const Clock::time_point t2 = Clock::now();
  done.resize(records.size());
  std::size_t got = pool.pop_batch(done);
  const Clock::time_point t3 = Clock::now();
  const std::size_t first = got;
  std::size_t pops = 1;
  while (got < done.size()) {
    got += pool.pop_batch(std::span(done).subspan(got));
    ++pops;
  }
  const Clock::time_point t4 = Clock::now();
  std::printf(
      "  host phases: records %.0f us, push_graph %.0f, to the first pop %.0f (%zu tasks), to "
      "the last %.0f (%zu pops)\n",
      us(t0, t1), us(t1, t2), us(t2, t3), first, us(t3, t4), pops);
}

int main(int argc, char** argv) {
  std::vector<int> sizes;
  for (int i = 1; i < argc; ++i) sizes.push_back(std::atoi(argv[i]));
  if (sizes.empty()) sizes = {1024, 2048};
  constexpr std::size_t kCapacity = std::size_t{1} << 19;
  unsigned long long* trace = nullptr;
  CHECK(
      cudaHostAlloc(&trace, kCapacity * kFields * sizeof(unsigned long long), cudaHostAllocMapped));
  unsigned long long* device_trace = nullptr;
  CHECK(cudaHostGetDevicePointer(&device_trace, trace, 0));
  apps::gpu::set_graph_trace(device_trace);
  std::vector<double*> matrices;
  for (const int n : sizes) {
    double* d = nullptr;
    CHECK(cudaMalloc(&d, sizeof(double) * static_cast<std::size_t>(n) * n));
    matrices.push_back(d);
  }
  weft::gpu::PoolOptions o = apps::gpu::device_pool_options({0});
  o.graph_capacity = kCapacity;
  apps::gpu::AppPool pool(o);
  std::printf("pool: %s\n", pool.describe().c_str());
  for (std::size_t s = 0; s < sizes.size(); ++s) {
    const int n = sizes[s];
    const std::vector<double> a = apps::gpu::spd_matrix(n);
    apps::gpu::CholeskyPlan<apps::gpu::AppPool> plan(pool, n);  // one per size, as a user keeps
    const CholeskyGraph& graph = plan.graph();
    const weft::gpu::GraphShape shape = shape_of(pool, graph);
    double wall = 0;
    for (int rep = 0; rep < 4; ++rep) {
      pool.pause();
      CHECK(cudaMemcpy(matrices[s], a.data(), sizeof(double) * a.size(), cudaMemcpyHostToDevice));
      pool.resume();
      std::fill(trace, trace + graph.tasks().size() * kFields, 0ull);
      const auto t0 = std::chrono::steady_clock::now();
      if (rep == 0) {
        plan.factor_as_graph(matrices[s], n);  // also prepares the plan's shape
      } else if (rep == 2) {
        timed_graph_run(pool, shape, graph, matrices[s], n);
      } else {
        plan.factor_host_tracked(matrices[s], n);
      }
      wall =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
      std::printf("n = %d, %s, run %d: %.0f us\n", n, rep % 2 == 0 ? "graph" : "host deps", rep,
                  wall);
      if (rep == 2) {
        std::printf("n = %d (%zu tasks), graph, run %d:\n", n, graph.tasks().size(), rep);
        analyse(graph, trace, wall);
      }
    }
  }
  return 0;
}
