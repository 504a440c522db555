// One runtime's SparseLU (the factorisation of `weft bench cpu`'s sparselu: 32 x 32 blocks of
// 64 x 64, the BOTS pattern), `reps` times with 50 ms of quiet before each, as the bench's
// harness settles, for whole-process counters such as `perf stat -e page-faults`: weft, TBB
// and OpenMP each alone in a process. Prints the median time.
// Build from the repository root after `make` (build/ as the Makefile makes it), one line:
//   g++ -O3 -DNDEBUG -std=c++20 -Iinclude -Ibench lab/probes/sparselu_one.cpp
//     build/bench/libweft_bench.a build/src/libweft.a -ltbb -fopenmp -lhwloc -lstarpu-1.3
//     -lpthread -o sparselu_one
// then: perf stat -e page-faults ./sparselu_one weft 30
#include <omp.h>
#include <tbb/global_control.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "cpu/kernels.hpp"
#include "weft/cpu/executor.hpp"

int main(int argc, char** argv) {
  const std::string who = argc > 1 ? argv[1] : "";
  const int reps = argc > 2 ? std::atoi(argv[2]) : 30;
  if ((who != "weft" && who != "tbb" && who != "omp") || reps < 1) {
    std::fprintf(stderr, "usage: sparselu_one weft|tbb|omp [reps >= 1]\n");
    return 2;
  }
  constexpr int kWorkers = 2;  // as the bench on the 2-core machine
  tbb::global_control tbb_threads(tbb::global_control::max_allowed_parallelism, kWorkers);
  omp_set_num_threads(kWorkers);
  weft::cpu::ExecutorOptions eo;
  eo.workers = kWorkers;
  weft::cpu::Executor ex(eo);
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    auto m = weft::bench::cpu::sparselu_input(32, 64);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const auto t0 = std::chrono::steady_clock::now();
    if (who == "weft") {
      weft::bench::cpu::sparselu_weft(ex, m);
    } else if (who == "tbb") {
      weft::bench::cpu::sparselu_tbb(m);
    } else {
      weft::bench::cpu::sparselu_omp(m);
    }
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  std::printf("%s: median %.4f s over %d factorisations\n", who.c_str(), t[t.size() / 2], reps);
  return 0;
}
