// Spawns from a thread outside the executor: n empty tasks into one TaskGroup, `batch` at a
// time, busy-pausing `pause_ns` after each batch (as a thread handing out GPU completions
// does), three rounds; prints the time per spawn. With pauses the workers idle between
// batches, which is where the global queue's lock was contended (decision 036's open
// question). Built against two trees' libweft.a it is the A/B of a change to that path:
//   g++ -std=c++20 -O2 -Iinclude lab/probes/external_spawns_probe.cpp build/src/libweft.a
//     -lhwloc -lpthread -o /tmp/external_spawns &&
//     /tmp/external_spawns 11 262144 2 2000      # workers, n, batch, pause_ns
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include <weft/cpu/executor.hpp>
#include <weft/cpu/task_group.hpp>

int main(int argc, char** argv) {
  const int workers = argc > 1 ? std::atoi(argv[1]) : 2;
  const long n = argc > 2 ? std::atol(argv[2]) : 262144;
  const int batch = argc > 3 ? std::atoi(argv[3]) : 2;
  const long pause_ns = argc > 4 ? std::atol(argv[4]) : 2000;
  weft::cpu::ExecutorOptions o;
  o.workers = static_cast<std::size_t>(workers);
  weft::cpu::Executor ex(o);
  std::atomic<long> ran{0};
  for (int round = 0; round < 3; ++round) {
    ran.store(0);
    const auto t0 = std::chrono::steady_clock::now();
    {
      weft::cpu::TaskGroup g(ex);
      for (long i = 0; i < n; i += batch) {
        for (int k = 0; k < batch; ++k) g.spawn([&ran] { ran.fetch_add(1); });
        const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(pause_ns);
        while (std::chrono::steady_clock::now() < until) {
        }
      }
      g.wait();
    }
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    std::printf("workers %d, %ld spawns, batch %d, pause %ld ns: %.0f us, %.0f ns a spawn%s\n",
                workers, n, batch, pause_ns, us, us * 1e3 / static_cast<double>(n),
                ran.load() == n ? "" : "  LOST TASKS");
  }
}
