// Where TNN's time goes on a GPU: the tiles of -2 X X^T through the apps' pool with the same
// loop as tnn_on_pool (1024 buffers of pinned mapped memory, two side tasks a tile on the heap
// workers, the buffer back once both are done), with the sides doing
//   none   - no side tasks: the buffer goes back as the tile is popped (the GPU and the loop),
//   empty  - two side tasks that do nothing (plus the executor's spawns),
//   read   - two side tasks that each read the whole tile (plus reading what the GPU wrote),
//   full   - offer_tile, one task a side (tnn_on_pool before decision 036);
// then tnn_on_pool itself (a task per worker and pop, each offering whole tiles), and the
// tile sides fed from tiles in ordinary memory on the same workers (the heaps alone, as
// lab/probes/tnn_heaps_probe.cpp's "tile sides").
// Built on the GPU machine after scripts/gpu-build.sh ... weft_gpu_apps:
//   g++ -std=c++20 -O3 -DNDEBUG -Iinclude -Iapps/gpu -I/usr/local/cuda/include
//     lab/probes/tnn_pool_probe.cpp build-gpu/apps/libweft_gpu_apps.a build-gpu/src/libweft.a
//     -L/usr/local/cuda/lib64 -lcudart -lcublas -lhwloc -lpthread -o /tmp/tnn_pool &&
//     /tmp/tnn_pool 32768 256 11     # n, d, heap workers
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <vector>

#include <weft/cpu/executor.hpp>
#include <weft/cpu/task_group.hpp>

#include "app_pool.hpp"
#include "tnn.hpp"

namespace {

void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

enum class Sides { none, empty, read, full };
const char* name_of(Sides s) {
  switch (s) {
    case Sides::none:
      return "none";
    case Sides::empty:
      return "empty";
    case Sides::read:
      return "read";
    case Sides::full:
      return "full";
  }
  return "?";
}

constexpr int kTile = 64;
constexpr std::size_t kSlots = 1024;

struct Setup {
  const apps::gpu::PointSet& points;
  const float* cm;
  const float* rm;
  float* buffers;
  std::vector<std::pair<int, int>> work;
};

std::atomic<float> sink{0};

// tnn_on_pool's loop without its error handling, the sides' work chosen by `sides`.
double run_loop(apps::gpu::AppPool& pool, const Setup& s, weft::cpu::Executor& workers,
                Sides sides) {
  using Record = apps::gpu::AppPool::Record;
  const auto& points = s.points;
  apps::gpu::NeighbourHeaps heaps(points.n, 16);
  const int tiles = (points.n + kTile - 1) / kTile;
  std::vector<std::mutex> bands(static_cast<std::size_t>(tiles));
  std::mutex free_mutex;
  std::condition_variable freed;
  std::vector<std::size_t> free_slots(kSlots);
  for (std::size_t k = 0; k < kSlots; ++k) free_slots[k] = kSlots - 1 - k;
  std::unique_ptr<std::atomic<int>[]> sides_left(new std::atomic<int>[kSlots]);
  std::vector<Record> batch, done(kSlots);
  auto give_back = [&](std::size_t slot) {
    std::lock_guard<std::mutex> lock(free_mutex);
    free_slots.push_back(slot);
    freed.notify_one();
  };
  auto side = [&](std::size_t slot, int r, int c, bool rows_side) {
    const float* g = s.buffers + slot * kTile * kTile;
    if (sides == Sides::read) {
      float sum = 0;
      for (int k = 0; k < kTile * kTile; ++k) sum += g[k];
      sink.fetch_add(sum, std::memory_order_relaxed);
    } else if (sides == Sides::full) {
      std::lock_guard<std::mutex> band(bands[static_cast<std::size_t>(rows_side ? r : c)]);
      apps::gpu::offer_tile(heaps, points, g, r, c, rows_side);
    }
    if (sides_left[slot].fetch_sub(1, std::memory_order_acq_rel) == 1) give_back(slot);
  };
  weft::cpu::TaskGroup group(workers);
  const auto t0 = Clock::now();
  std::size_t next = 0, finished = 0, in_flight = 0;
  while (finished < s.work.size()) {
    batch.clear();
    {
      std::unique_lock<std::mutex> lock(free_mutex);
      if (in_flight == 0) freed.wait(lock, [&] { return !free_slots.empty(); });
      while (next < s.work.size() && !free_slots.empty()) {
        const auto [r, c] = s.work[next];
        const std::size_t slot = free_slots.back();
        free_slots.pop_back();
        apps::gpu::SgemmTile::Payload p{s.cm + r * kTile,
                                        s.rm + static_cast<std::size_t>(c) * kTile * points.d,
                                        s.buffers + slot * kTile * kTile,
                                        std::min(kTile, points.n - r * kTile),
                                        std::min(kTile, points.n - c * kTile),
                                        points.d,
                                        points.n,
                                        points.d,
                                        kTile,
                                        0,
                                        0,
                                        -2.0f,
                                        0.0f};
        p.c_through_shared = true;
        batch.push_back(
            Record::make<apps::gpu::SgemmTile>(p, (static_cast<std::uint64_t>(next) << 20) | slot));
        ++next;
      }
    }
    if (!batch.empty()) pool.push_batch(batch);
    in_flight += batch.size();
    const std::size_t got = pool.pop_batch(done);
    in_flight -= got;
    for (std::size_t k = 0; k < got; ++k) {
      if (!done[k].ok()) {
        std::fprintf(stderr, "a tile failed\n");
        std::exit(1);
      }
      const std::size_t w = done[k].tag >> 20, slot = done[k].tag & ((1u << 20) - 1);
      const auto [r, c] = s.work[w];
      if (sides == Sides::none) {
        give_back(slot);
        continue;
      }
      sides_left[slot].store(2, std::memory_order_relaxed);
      group.spawn([&side, slot, r = r, c = c] { side(slot, r, c, true); });
      group.spawn([&side, slot, r = r, c = c] { side(slot, r, c, false); });
    }
    finished += got;
  }
  group.wait();
  return ms_since(t0);
}

// The tile sides from tiles in ordinary memory, in tnn_on_pool's order and locks.
double heaps_alone(const Setup& s, const std::vector<float>& tile_bufs,
                   weft::cpu::Executor& workers) {
  const int tiles = (s.points.n + kTile - 1) / kTile;
  apps::gpu::NeighbourHeaps heaps(s.points.n, 16);
  std::vector<std::mutex> bands(static_cast<std::size_t>(tiles));
  const auto t0 = Clock::now();
  weft::cpu::TaskGroup g(workers);
  for (std::size_t w = 0; w < s.work.size(); ++w) {
    const auto [r, c] = s.work[w];
    const float* buf = tile_bufs.data() + w * kTile * kTile;
    for (bool rows_side : {true, false}) {
      g.spawn([&, buf, r = r, c = c, rows_side] {
        std::lock_guard<std::mutex> band(bands[static_cast<std::size_t>(rows_side ? r : c)]);
        apps::gpu::offer_tile(heaps, s.points, buf, r, c, rows_side);
      });
    }
  }
  g.wait();
  return ms_since(t0);
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 8192;
  const int d = argc > 2 ? std::atoi(argv[2]) : 256;
  const int nworkers = argc > 3 ? std::atoi(argv[3]) : 11;
  const auto points = apps::gpu::PointSet::random(n, d, 41);
  float *cm = nullptr, *rm = nullptr, *buffers = nullptr, *gram = nullptr;
  const std::size_t bytes = points.col_major.size() * sizeof(float);
  cuda_ok(cudaMalloc(&cm, bytes), "cudaMalloc");
  cuda_ok(cudaMalloc(&rm, bytes), "cudaMalloc");
  cuda_ok(cudaMemcpy(cm, points.col_major.data(), bytes, cudaMemcpyHostToDevice), "copy");
  cuda_ok(cudaMemcpy(rm, points.row_major.data(), bytes, cudaMemcpyHostToDevice), "copy");
  cuda_ok(cudaHostAlloc(reinterpret_cast<void**>(&buffers), kSlots * kTile * kTile * sizeof(float),
                        cudaHostAllocMapped | cudaHostAllocPortable),
          "cudaHostAlloc");
  Setup s{points, cm, rm, buffers, {}};
  const int tiles = (n + kTile - 1) / kTile;
  for (int dg = 0; dg < tiles; ++dg) {
    for (int r = 0; r + dg < tiles; ++r) s.work.emplace_back(r, r + dg);
  }
  // The whole Gram matrix by cuBLAS, cut into the loop's tiles in ordinary memory.
  const std::size_t nn = static_cast<std::size_t>(n) * n;
  cuda_ok(cudaMalloc(&gram, nn * sizeof(float)), "cudaMalloc");
  cublasHandle_t blas = nullptr;
  cublasCreate(&blas);
  const float minus_two = -2.0f, zero = 0.0f;
  cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_T, n, n, d, &minus_two, cm, n, cm, n, &zero, gram, n);
  std::vector<float> host_gram(nn);
  cuda_ok(cudaMemcpy(host_gram.data(), gram, nn * sizeof(float), cudaMemcpyDeviceToHost), "copy");
  cudaFree(gram);
  cublasDestroy(blas);
  std::vector<float> tile_bufs(s.work.size() * kTile * kTile, 0.0f);
  for (std::size_t w = 0; w < s.work.size(); ++w) {
    const auto [r, c] = s.work[w];
    for (int jj = 0; jj < kTile && c * kTile + jj < n; ++jj) {
      for (int ii = 0; ii < kTile && r * kTile + ii < n; ++ii) {
        tile_bufs[w * kTile * kTile + ii + jj * kTile] =
            host_gram[(r * kTile + ii) + static_cast<std::size_t>(c * kTile + jj) * n];
      }
    }
  }
  host_gram = {};
  weft::cpu::ExecutorOptions o;
  o.workers = static_cast<std::size_t>(nworkers);
  weft::cpu::Executor workers(o);
  apps::gpu::AppPool pool(apps::gpu::device_pool_options({0}));
  std::printf("n %d d %d, %zu tiles, %d heap workers, %zu pool lanes\n", n, d, s.work.size(),
              nworkers, pool.num_lanes());
  for (int round = 0; round < 2; ++round) {
    std::printf("round %d:", round);
    for (Sides sides : {Sides::none, Sides::empty, Sides::read, Sides::full}) {
      std::printf(" %s %.1f ms,", name_of(sides), run_loop(pool, s, workers, sides));
      std::fflush(stdout);
    }
    const auto t0 = Clock::now();
    const auto got = apps::gpu::tnn_on_pool(pool, points, cm, rm, buffers, kSlots, 16, &workers);
    std::printf(" tnn_on_pool %.1f ms, heaps alone %.1f ms\n", ms_since(t0),
                heaps_alone(s, tile_bufs, workers));
    if (got.size() != static_cast<std::size_t>(n)) std::printf("  wrong result size\n");
    std::fflush(stdout);
  }
  pool.pause();  // freeing pinned memory synchronizes the device: not while the pool runs
  cudaFreeHost(buffers);
  cudaFree(cm);
  cudaFree(rm);
}
