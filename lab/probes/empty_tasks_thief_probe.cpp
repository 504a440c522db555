// How many of `weft bench cpu`'s empty tasks the second worker runs, bound or not: one root
// spawns 10^6 empty tasks into one group (as empty_tasks_weft does), after 50 ms of quiet (as
// the bench's harness pauses); each task counts itself on its worker. An unbound second worker
// that the OS stacked on the root's core runs almost none, and the root then runs them all at
// once without a thief's traffic on its lines: the throughput of a worker alone.
// Build from the repository root after `make` (build/ as the Makefile makes it):
//   g++ -O3 -DNDEBUG -std=c++20 -Iinclude lab/probes/empty_tasks_thief_probe.cpp \
//     build/src/libweft.a -lhwloc -lpthread -o empty_tasks_thief_probe
//   ./empty_tasks_thief_probe none 6 && ./empty_tasks_thief_probe automatic 6
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "weft/cpu/executor.hpp"
#include "weft/cpu/task_group.hpp"

namespace {
struct alignas(64) Count {
  long v = 0;
};
}  // namespace

int main(int argc, char** argv) {
  using namespace weft::cpu;
  const std::string mode = argc > 1 ? argv[1] : "automatic";
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 6;
  ExecutorOptions eo;
  eo.workers = 2;
  eo.pinning = mode == "none" ? Pinning::none : Pinning::automatic;
  Executor ex(eo);
  std::printf("pinning %s: %zu workers bound\n", mode.c_str(), ex.pinned_units().size());
  constexpr long kTasks = 1000000;
  for (int r = 0; r < rounds; ++r) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::vector<Count> counts(2);
    const auto t0 = std::chrono::steady_clock::now();
    ex.run([&] {
      TaskGroup g(ex);
      for (long i = 0; i < kTasks; ++i) {
        g.spawn([&] { ++counts[static_cast<std::size_t>(ex.this_worker_index())].v; });
      }
      g.wait();
    });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("  %6.1f Mtasks/s; tasks run by worker 0 / 1: %ld / %ld\n", kTasks / s / 1e6,
                counts[0].v, counts[1].v);
  }
}
