// The graph's scale and average kernels by rows (factor_kernels.cpp) against the day-blocked
// loops they replaced (factor_ops.hpp's scale_days / average_days, split in blocks of 16 days
// over the executor as the kernels used to be): medians of 9 runs each, S x S floats.
// Build from the repository root after `make` (build/ as the Makefile makes it; -lcudart when
// weft was built with CUDA):
//   g++ -O3 -DNDEBUG -std=c++20 -Iinclude lab/probes/cross_sectional_probe.cpp \
//     build/src/libweft.a -L/usr/local/cuda/lib64 -lcudart -lhwloc -lpthread \
//     -o cross_sectional_probe && ./cross_sectional_probe 4000 && ./cross_sectional_probe 8000
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>
#include "weft/cpu/executor.hpp"
#include "weft/cpu/parallel.hpp"
#include "weft/graph/factor_kernels.hpp"
#include "weft/graph/factor_ops.hpp"
namespace wg = weft::graph;
double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
int main(int argc, char** argv) {
  std::size_t S = argc > 1 ? atol(argv[1]) : 4000, D = S;
  weft::cpu::Executor ex;
  std::vector<float> x(S * D), r(S * D);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(i % 1000) * 0.5f;
  wg::kernels::Shape shape{S, D};
  for (int which = 0; which < 2; ++which) {
    auto k = which ? wg::kernels::scale(shape) : wg::kernels::average(shape);
    void* ptr[] = {x.data(), r.data()};
    std::size_t bytes[] = {shape.bytes(), shape.bytes()};
    wg::CpuCall c;
    c.pointers = ptr;
    c.bytes = bytes;
    c.executor = &ex;
    std::vector<double> tn, to;
    for (int rep = 0; rep < 9; ++rep) {
      double t0 = now();
      ex.run([&] { k.cpu(c); });
      tn.push_back(now() - t0);
      t0 = now();
      ex.run([&] {
        const std::size_t blocks = (D + 15) / 16;
        weft::cpu::parallel_for_range(
            ex, 0, (std::int64_t)blocks,
            [&](std::int64_t b, std::int64_t e) {
              if (which)
                wg::detail::scale_days(x.data(), r.data(), S, D, b * 16,
                                       std::min<std::size_t>(D, e * 16));
              else
                wg::detail::average_days(x.data(), r.data(), S, D, b * 16,
                                         std::min<std::size_t>(D, e * 16));
            },
            weft::cpu::Schedule::dynamic(
                std::max<std::int64_t>(1, blocks / (8 * ex.num_workers()))));
      });
      to.push_back(now() - t0);
    }
    std::sort(tn.begin(), tn.end());
    std::sort(to.begin(), to.end());
    std::printf("%s %zux%zu: day blocks %.2f ms, rows %.2f ms\n", which ? "scale" : "average", S, D,
                to[4] * 1e3, tn[4] * 1e3);
  }
}
