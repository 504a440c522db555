// docs/gpu.md's "Task graphs" example, built and run as a test so that it stays true. It uses
// the host backend, so it runs on any machine; on the device backend the same code runs on a
// GPU once PoolOptions::graph_capacity is set (graphs are opt-in there).
#include <weft/gpu/pool.hpp>

#include <cstdint>
#include <vector>

// Writes 1 plus the values its inputs wrote: it runs only after they ended, and sees their
// writes.
struct Sum {
  static constexpr std::uint32_t kId = 1;
  struct Payload {
    double* values;  // one per task of the graph
    std::uint32_t me;
    std::uint32_t inputs[2];
    std::uint32_t count;
  };
  WEFT_HD static void run(Payload& p, const weft::gpu::BlockContext& b) {
    if (b.thread() != 0) return;
    double v = 1.0;
    for (std::uint32_t i = 0; i < p.count; ++i) v += p.values[p.inputs[i]];
    p.values[p.me] = v;
  }
};

int main() {
  using Pool = weft::gpu::Pool<weft::gpu::TaskTypes<Sum>, 64>;
  Pool pool;  // the host backend runs graphs of up to 1024 tasks by default
  // A diamond, {from, to}: 1 and 2 wait for 0, and 3 for both.
  const std::vector<weft::gpu::Edge> edges = {{0, 1}, {0, 2}, {1, 3}, {2, 3}};
  const std::vector<int> priorities = {1, 1, 0, 1};  // the critical path goes first
  // Checked (no cycle, no edge past the last task) and laid out once ...
  const weft::gpu::GraphShape shape = pool.prepare_graph(4, edges, priorities);
  const std::uint32_t inputs[4][2] = {{0, 0}, {0, 0}, {0, 0}, {1, 2}};
  const std::uint32_t counts[4] = {0, 1, 1, 2};
  bool ok = true;
  for (int run = 0; run < 3; ++run) {  // ... and run with new records each time.
    std::vector<double> values(4, 0.0);
    std::vector<Pool::Record> tasks;
    for (std::uint32_t t = 0; t < 4; ++t) {
      tasks.push_back(Pool::Record::make<Sum>(
          {values.data(), t, {inputs[t][0], inputs[t][1]}, counts[t]}, /*tag=*/t));
    }
    pool.push_graph(shape, tasks, /*out=*/0);
    for (int i = 0; i < 4; ++i) ok = ok && pool.pop(0).ok();  // each task as it ends
    ok = ok && values[3] == 5.0;                              // 1 + (1 + 1) + (1 + 1)
  }
  // A one-off graph needs no shape: pool.push_graph(tasks, edges, out, priorities).
  return ok ? 0 : 1;
}
