// The CPU an idle executor costs: its workers' sleeps are bounded (50 ms, detail::kParkLimit),
// so an idle pool wakes each worker 20 times a second to look once for work. Measures the
// process's CPU time over 5 idle seconds (getrusage) after one task, and the sleeps taken.
// Build from the repository root after `make`:
//   g++ -O2 -std=c++20 -Iinclude lab/probes/idle_cpu_probe.cpp build/src/libweft.a \
//     -lhwloc -lpthread -o idle_cpu_probe && ./idle_cpu_probe [workers]
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "weft/cpu/executor.hpp"

int main(int argc, char** argv) {
  const std::size_t workers = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 2;
  weft::cpu::Executor ex(weft::cpu::ExecutorOptions{.workers = workers});
  ex.submit([] {}).get();
  rusage before{}, after{};
  getrusage(RUSAGE_SELF, &before);
  std::this_thread::sleep_for(std::chrono::seconds(5));
  getrusage(RUSAGE_SELF, &after);
  auto us = [](const timeval& t) { return static_cast<double>(t.tv_sec) * 1e6 + t.tv_usec; };
  const double cpu_us =
      us(after.ru_utime) - us(before.ru_utime) + us(after.ru_stime) - us(before.ru_stime);
  std::printf("%zu idle workers for 5 s: %.1f ms of CPU (%.3f%% of one core), %llu sleeps\n",
              workers, cpu_us / 1e3, cpu_us / 5e6 * 100,
              static_cast<unsigned long long>(ex.stats().sleeps));
  return 0;
}
