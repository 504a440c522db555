// The host half of TNN alone, three ways on one executor, each timed with its sorting: the
// heaps fed from a Gram matrix computed beforehand by whole rows (tnn_from_gram, the bench's
// gemm_then_heaps), by 64x64 tiles in diagonal order as two side tasks under band locks (as
// tnn_on_pool feeds them), and tnn_on_pool's whole loop over a stand-in pool that finishes
// each pushed tile at once (it copies the tile into the task's buffer): what the loop (pops,
// two spawns a tile, the buffer hand-back) costs apart from the GPU. (One command:)
//   g++ -std=c++20 -O3 -DNDEBUG -Iinclude -Iapps/gpu lab/probes/tnn_heaps_probe.cpp
//     apps/gpu/tnn.cpp build/src/libweft.a -lopenblas -lhwloc -lpthread -o /tmp/tnn_heaps &&
//     /tmp/tnn_heaps 4096 64 2      # n, d, workers
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <deque>
#include <mutex>
#include <vector>

#include <weft/cpu/executor.hpp>
#include <weft/cpu/task_group.hpp>

#include "app_pool.hpp"
#include "tnn.hpp"

namespace {

// Finishes every tile as it is pushed; pops wait for at least one, as the pool's do.
class InstantPool {
 public:
  using Record = apps::gpu::AppPool::Record;
  InstantPool(const apps::gpu::PointSet& p, const float* gram) : points_(p), gram_(gram) {}

  void push_batch(std::span<const Record> batch) {
    for (const Record& r : batch) {
      const auto t = r.as<apps::gpu::SgemmTile>();
      const auto row0 = static_cast<std::size_t>(t.a - points_.col_major.data());
      const auto col0 = static_cast<std::size_t>(t.b - points_.row_major.data()) /
                        static_cast<std::size_t>(points_.d);
      for (int jj = 0; jj < t.n; ++jj) {
        for (int ii = 0; ii < t.m; ++ii) {
          t.c[ii + jj * t.ldc] = gram_[row0 + ii + (col0 + jj) * points_.n];
        }
      }
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_.insert(done_.end(), batch.begin(), batch.end());
    }
    ready_.notify_one();
  }
  std::size_t pop_batch(std::span<Record> into) {
    std::unique_lock<std::mutex> lock(mutex_);
    ready_.wait(lock, [&] { return !done_.empty(); });
    std::size_t k = 0;
    for (; k < into.size() && !done_.empty(); ++k) {
      into[k] = done_.front();
      done_.pop_front();
    }
    ++pops_;
    return k;
  }
  [[nodiscard]] std::size_t pops() const { return pops_; }

 private:
  const apps::gpu::PointSet& points_;
  const float* gram_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Record> done_;
  std::size_t pops_ = 0;
};

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
  constexpr std::size_t kSlots = 1024;  // as the bench
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
    const auto by_rows = apps::gpu::tnn_from_gram(ex, points, gram.data(), kT);
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
    const auto by_sides = sides.sorted();
    const double t_sides = ms_since(t0), c_sides = cpu_ms() - c0;
    InstantPool pool(points, gram.data());
    std::vector<float> slots(kSlots * kTile * kTile);
    t0 = Clock::now();
    const auto by_loop =
        apps::gpu::tnn_on_pool(pool, points, points.col_major.data(), points.row_major.data(),
                               slots.data(), kSlots, kT, &ex);
    const double t_loop = ms_since(t0);
    const bool same = by_rows == by_sides && by_rows == by_loop;
    const double pairs = static_cast<double>(n) * (n - 1);
    std::printf(
        "n %d d %d workers %d: rows %.1f ms (%.2f cpu-ns a pair), tile sides %.1f ms (%.2f "
        "cpu-ns a pair), loop %.1f ms (%zu pops)%s\n",
        n, d, workers, t_rows, c_rows * 1e6 / pairs, t_sides, c_sides * 1e6 / pairs, t_loop,
        pool.pops(), same ? "" : "  RESULTS DIFFER");
  }
}
