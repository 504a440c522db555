// The host half of TNN alone: the same Gram matrix offered to the heaps the way the bench's peer
// does (gemm_then_heaps: each worker offers whole rows to its bands' heaps) and the way
// tnn_on_pool does (each 64x64 tile, in diagonal order, as two side tasks under band locks),
// on the same executor. Tells whether the pool's variant loses on the CPU side alone.
//   g++ -std=c++20 -O2 -Iinclude -Iapps/gpu lab/probes/tnn_heaps_probe.cpp apps/gpu/tnn.cpp \
//     build/src/libweft.a -lopenblas -lhwloc -lpthread -o /tmp/tnn_heaps && /tmp/tnn_heaps 4096 64
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <vector>

#include <weft/cpu/executor.hpp>
#include <weft/cpu/parallel.hpp>
#include <weft/cpu/task_group.hpp>

#include "tnn.hpp"

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}
// The process's CPU time: less sensitive than the wall clock to other load on the machine.
double cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) * 1e-6;
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 4096;
  const int d = argc > 2 ? std::atoi(argv[2]) : 64;
  const int workers = argc > 3 ? std::atoi(argv[3]) : 2;
  constexpr int kT = 16, kTile = 64;
  const auto points = apps::gpu::PointSet::random(n, d, 41);
  std::vector<float> gram(static_cast<std::size_t>(n) * n);
  cblas_sgemm(CblasColMajor, CblasNoTrans, CblasTrans, n, n, d, -2.0f, points.col_major.data(), n,
              points.col_major.data(), n, 0.0f, gram.data(), n);
  weft::cpu::ExecutorOptions o;
  o.workers = static_cast<std::size_t>(workers);
  weft::cpu::Executor ex(o);
  const int tiles = (n + kTile - 1) / kTile;
  std::vector<std::pair<int, int>> work;
  for (int dg = 0; dg < tiles; ++dg) {
    for (int r = 0; r + dg < tiles; ++r) work.emplace_back(r, r + dg);
  }
  // Each tile as the pool leaves it: 64 x 64, leading dimension 64.
  std::vector<float> tile_bufs(work.size() * kTile * kTile, 0.0f);
  for (std::size_t w = 0; w < work.size(); ++w) {
    const auto [r, c] = work[w];
    for (int jj = 0; jj < kTile && c * kTile + jj < n; ++jj) {
      for (int ii = 0; ii < kTile && r * kTile + ii < n; ++ii) {
        tile_bufs[w * kTile * kTile + ii + jj * kTile] =
            gram[(r * kTile + ii) + static_cast<std::size_t>(c * kTile + jj) * n];
      }
    }
  }
  for (int round = 0; round < 3; ++round) {
    auto t0 = Clock::now();
    double c0 = cpu_ms();
    apps::gpu::NeighbourHeaps rows(n, kT);
    weft::cpu::parallel_for(ex, 0, tiles, [&](std::int64_t b) {
      std::vector<float> dist(static_cast<std::size_t>(n));
      for (int i = static_cast<int>(b) * kTile; i < std::min(n, (static_cast<int>(b) + 1) * kTile);
           ++i) {
        for (int j = 0; j < n; ++j) {
          dist[static_cast<std::size_t>(j)] =
              points.norms[i] + points.norms[j] + gram[j + static_cast<std::size_t>(i) * n];
        }
        const std::span<const float> all(dist);
        rows.offer_run(i, 0, all.first(static_cast<std::size_t>(i)));
        rows.offer_run(i, i + 1, all.subspan(static_cast<std::size_t>(i) + 1));
      }
    });
    const double t_rows = ms_since(t0), c_rows = cpu_ms() - c0;
    t0 = Clock::now();
    c0 = cpu_ms();
    apps::gpu::NeighbourHeaps sides(n, kT);
    std::vector<std::mutex> bands(static_cast<std::size_t>(tiles));
    {
      weft::cpu::TaskGroup g(ex);
      for (std::size_t w = 0; w < work.size(); ++w) {
        const auto [r, c] = work[w];
        const float* buf = tile_bufs.data() + w * kTile * kTile;
        for (bool side : {true, false}) {
          g.spawn([&, buf, r = r, c = c, side] {
            std::lock_guard<std::mutex> band(bands[static_cast<std::size_t>(side ? r : c)]);
            apps::gpu::offer_tile(sides, points, buf, r, c, side);
          });
        }
      }
      g.wait();
    }
    const double t_sides = ms_since(t0), c_sides = cpu_ms() - c0;
    const bool same = rows.sorted() == sides.sorted();
    const double pairs = static_cast<double>(n) * (n - 1);
    std::printf(
        "n %d d %d workers %d: rows %.1f ms (%.2f cpu-ns a pair), tile sides %.1f ms (%.2f "
        "cpu-ns a pair)%s\n",
        n, d, workers, t_rows, c_rows * 1e6 / pairs, t_sides, c_sides * 1e6 / pairs,
        same ? "" : "  RESULTS DIFFER");
  }
}
