// multisort: weft against TBB on the same 32M ints, interleaved round by round (medians of 5),
// with weft's executor counters. Run under perf to see where the time goes:
//   perf record -o weft.data ./multisort_probe weft && perf report -i weft.data --sort symbol
//   perf record -o tbb.data ./multisort_probe tbb && perf report -i tbb.data --sort symbol
// (samples in merge_weft vs merge_tbb: the shared merge leaf's code, the runtime's own share).
// With no argument: both, interleaved. Build from the repository root after `make`:
//   g++ -O2 -g -std=c++20 -Iinclude -Ibench lab/probes/multisort_probe.cpp \
//     build/bench/libweft_bench.a build/src/libweft.a -ltbb -lhwloc -fopenmp -lpthread \
//     -o multisort_probe
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "cpu/kernels.hpp"
#include "weft/cpu/executor.hpp"

using namespace weft::bench::cpu;

int main(int argc, char** argv) {
  const bool only_weft = argc > 1 && std::strcmp(argv[1], "weft") == 0;
  const bool only_tbb = argc > 1 && std::strcmp(argv[1], "tbb") == 0;
  const auto input = multisort_input(std::size_t{32} << 20, 42);
  weft::cpu::Executor ex;
  std::vector<double> tw, tt;
  auto timed = [&](bool weft) {
    std::vector<std::int32_t> d = input;
    const auto t0 = std::chrono::steady_clock::now();
    if (weft) {
      multisort_weft(ex, d);
    } else {
      multisort_tbb(d);
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!std::is_sorted(d.begin(), d.end())) std::printf("UNSORTED\n");
    return s;
  };
  for (int r = 0; r < 5; ++r) {
    if (!only_tbb) tw.push_back(timed(true));
    if (!only_weft) tt.push_back(timed(false));
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
  };
  const auto st = ex.stats();
  std::printf("weft %.3f s (tasks %llu, steals %llu, sleeps %llu), tbb %.3f s, ratio %.3f\n",
              median(tw), static_cast<unsigned long long>(st.tasks_run),
              static_cast<unsigned long long>(st.steals),
              static_cast<unsigned long long>(st.sleeps), median(tt),
              tt.empty() || tw.empty() ? 0.0 : median(tw) / median(tt));
}
