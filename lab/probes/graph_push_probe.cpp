// The host's share of a task graph (decision 017, "After step 3": ~0.3 us a task of the graph
// driver's wall time is spent outside the GPU's span): the tiled Cholesky's graph shape with
// empty tasks, on the host backend, timed phase by phase: building the graph, the records and
// the edges (the application's part), push_graph, the first pop, and the rest of the pops; then
// the same with the graph's shape prepared once (Pool::prepare_graph) and pushed again.
// No GPU needed:
//   g++ -O2 -std=c++20 -Iinclude -Iapps/gpu -Isrc lab/probes/graph_push_probe.cpp \
//     apps/gpu/cholesky.cpp build/src/libweft.a -lhwloc -lopenblas -llapacke -lpthread \
//     -o /tmp/gpp && /tmp/gpp 1024 2048 4096
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cholesky.hpp"
#include "weft/gpu/pool.hpp"

namespace {

struct Empty {
  static constexpr std::uint32_t kId = 1;
  struct Payload {
    std::uint64_t words[14];  // the size of a Cholesky tile's record, near enough
  };
  static void run(Payload&, const weft::gpu::BlockContext&) {}
};
using Pool = weft::gpu::Pool<weft::gpu::TaskTypes<Empty>, 128>;
using Clock = std::chrono::steady_clock;

double us(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::micro>(to - from).count();
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> sizes;
  for (int i = 1; i < argc; ++i) sizes.push_back(std::atoi(argv[i]));
  if (sizes.empty()) sizes = {1024, 2048, 4096};
  weft::gpu::PoolOptions o;
  o.host_blocks = 2;
  o.graph_capacity = std::size_t{1} << 19;
  Pool pool(o);
  for (const int n : sizes) {
    for (int rep = 0; rep < 3; ++rep) {
      const Clock::time_point t0 = Clock::now();
      const apps::gpu::CholeskyGraph graph(n);
      const auto& tasks = graph.tasks();
      const Clock::time_point t1 = Clock::now();
      std::vector<Pool::Record> records;
      records.reserve(tasks.size());
      for (std::size_t t = 0; t < tasks.size(); ++t)
        records.push_back(Pool::Record::make<Empty>({}, t));
      const std::vector<weft::gpu::Edge> edges = graph.edges();
      const std::vector<int> priorities = graph.priorities();
      const Clock::time_point t2 = Clock::now();
      pool.push_graph(records, edges, 0, priorities);
      const Clock::time_point t3 = Clock::now();
      std::vector<Pool::Record> done(tasks.size());
      std::size_t got = pool.pop_batch(done);
      const Clock::time_point t4 = Clock::now();
      while (got < tasks.size()) got += pool.pop_batch(std::span(done).subspan(got));
      const Clock::time_point t5 = Clock::now();
      std::printf(
          "n = %d (%zu tasks, %zu edges): graph %.0f us, records and edges %.0f, push_graph "
          "%.0f, first pop %.0f, the other pops %.0f (%.2f us a task)\n",
          n, tasks.size(), edges.size(), us(t0, t1), us(t1, t2), us(t2, t3), us(t3, t4), us(t4, t5),
          us(t4, t5) / static_cast<double>(tasks.size()));
    }
    // The same graph as a shape prepared once: each run rewrites the records and pushes them.
    const apps::gpu::CholeskyGraph graph(n);
    const auto& tasks = graph.tasks();
    const Clock::time_point p0 = Clock::now();
    const weft::gpu::GraphShape shape =
        pool.prepare_graph(tasks.size(), graph.edges(), graph.priorities());
    const Clock::time_point p1 = Clock::now();
    std::printf("n = %d: prepare_graph %.0f us\n", n, us(p0, p1));
    std::vector<Pool::Record> records, done(tasks.size());
    for (int rep = 0; rep < 3; ++rep) {
      const Clock::time_point t0 = Clock::now();
      records.clear();
      for (std::size_t t = 0; t < tasks.size(); ++t)
        records.push_back(Pool::Record::make<Empty>({}, t));
      const Clock::time_point t1 = Clock::now();
      pool.push_graph(shape, records);
      const Clock::time_point t2 = Clock::now();
      std::size_t got = pool.pop_batch(done);
      const Clock::time_point t3 = Clock::now();
      while (got < tasks.size()) got += pool.pop_batch(std::span(done).subspan(got));
      const Clock::time_point t4 = Clock::now();
      std::printf(
          "n = %d, shape: records %.0f us, push_graph %.0f, first pop %.0f, the other pops %.0f "
          "(%.2f us a task)\n",
          n, us(t0, t1), us(t1, t2), us(t2, t3), us(t3, t4),
          us(t3, t4) / static_cast<double>(tasks.size()));
    }
  }
  return 0;
}
