// Where run_team's rank 0 runs, measured on NAS-IS's histogram (is_histogram_weft, `weft bench
// cpu`'s pipeline_is with no pipelined blocks): called from the main thread and from inside a
// worker (then that worker is rank 0), against OpenMP; medians of 15, five times, with each
// variant's page faults per call; 2 workers, as on the 2-core VM. With the tree as it is, a caller
// outside the pool sleeps and every rank is a task; b24dfb8 (reverted) had the caller run rank 0
// itself, as OpenMP's master thread does (lab/results/cpu2/README.md). Build from the
// repository root after `make` (build/ as the Makefile makes it):
//   g++ -O3 -DNDEBUG -std=c++20 -Iinclude -Ibench lab/probes/team_caller_probe.cpp
//     build/bench/libweft_bench.a build/src/libweft.a -fopenmp -lhwloc -lpthread -o probe
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>
#include "cpu/kernels.hpp"
#include "weft/cpu/executor.hpp"
using namespace weft::bench::cpu;
using Clock = std::chrono::steady_clock;
// Minor page faults of the whole process so far.
long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}
int main() {
  weft::cpu::ExecutorOptions eo;
  eo.workers = 2;
  weft::cpu::Executor ex(eo);
  const IsInput in = is_input(std::size_t{1} << 23, 1 << 19, 3);
  for (int rep = 0; rep < 5; ++rep) {
    std::vector<double> a, b, c;
    long fa = 0, fb = 0, fc = 0;  // page faults in each variant's calls
    for (int s = 0; s < 15; ++s) {
      const long f0 = minor_faults();
      auto t0 = Clock::now();
      auto h1 = is_histogram_weft(ex, in, 0, nullptr, 0);  // from main
      auto t1 = Clock::now();
      const long f1 = minor_faults();
      auto h2 = ex.submit([&] {
                    return is_histogram_weft(ex, in, 0, nullptr, 0);
                  }).get();  // from a worker
      auto t2 = Clock::now();
      const long f2 = minor_faults();
      auto h3 = is_histogram_omp(in, 2);
      auto t3 = Clock::now();
      fa += f1 - f0;
      fb += f2 - f1;
      fc += minor_faults() - f2;
      a.push_back(std::chrono::duration<double>(t1 - t0).count());
      b.push_back(std::chrono::duration<double>(t2 - t1).count());
      c.push_back(std::chrono::duration<double>(t3 - t2).count());
    }
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    std::sort(c.begin(), c.end());
    std::printf(
        "from main %.5f, from a worker %.5f, omp %.5f (s); page faults per call %ld, %ld, %ld\n",
        a[7], b[7], c[7], fa / 15, fb / 15, fc / 15);
  }
}
