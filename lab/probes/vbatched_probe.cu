// The variable-size batched DGEMM (issue 28's vbatched_dgemm: 1000 products, m, n, k uniform in
// 16..256, 6737 tile tasks of unequal lengths) through the pool with each ring depth (8, the
// default; 4; 2; 1) and two push orders: the matrices' order (as the bench pushes them) and the
// longest tasks first (by K, which sets a tile's chunks; a stable sort). With deep rings every
// task is in some ring soon after the push and the batch ends when the fullest ring does
// (docs/gpu.md, "Rings"); with one slot a free block takes the next task, at a round trip a
// task. Medians of `reps` runs after 3 warm-up runs, in us; each configuration's C checked
// against OpenBLAS. Build on the GPU machine after scripts/gpu-build.sh ... weft_gpu_apps:
//   nvcc -std=c++20 -O3 -gencode=arch=compute_90,code=sm_90 -Iinclude -Iapps/gpu
//     lab/probes/vbatched_probe.cu build-gpu/apps/libweft_gpu_apps.a build-gpu/src/libweft.a
//     -lopenblas -lhwloc -o /tmp/vbatched && /tmp/vbatched 30
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <vector>

#include "app_pool.hpp"
#include "batched_gemm.hpp"

namespace {

using apps::gpu::AppPool;
using Record = AppPool::Record;

void ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

struct Spread {
  double median, min, max;
};

template <class F>
Spread time_us(int reps, F&& run) {
  std::vector<double> t;
  for (int r = 0; r < reps + 3; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    const auto t1 = std::chrono::steady_clock::now();
    if (r >= 3) t.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  std::sort(t.begin(), t.end());
  return {t[t.size() / 2], t.front(), t.back()};
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 30;
  const apps::gpu::GemmBatch batch = apps::gpu::GemmBatch::variable(1000, 16, 256, 2026);
  std::vector<double> a, b;
  apps::gpu::fill_inputs<double>(batch, a, b);
  std::vector<double> ref(batch.c_size), got(batch.c_size);
  apps::gpu::reference_gemm<double>(batch, a.data(), b.data(), ref.data());
  double *da = nullptr, *db = nullptr, *dc = nullptr;
  ok(cudaMalloc(&da, a.size() * sizeof(double)), "malloc");
  ok(cudaMalloc(&db, b.size() * sizeof(double)), "malloc");
  ok(cudaMalloc(&dc, batch.c_size * sizeof(double)), "malloc");
  ok(cudaMemcpy(da, a.data(), a.size() * sizeof(double), cudaMemcpyHostToDevice), "copy");
  ok(cudaMemcpy(db, b.data(), b.size() * sizeof(double), cudaMemcpyHostToDevice), "copy");
  const std::vector<Record> in_order =
      apps::gpu::gemm_tasks<double, apps::gpu::kAppCapacity>(batch, da, db, dc);
  std::vector<Record> longest_first = in_order;
  std::stable_sort(longest_first.begin(), longest_first.end(),
                   [](const Record& x, const Record& y) {
                     return x.as<apps::gpu::DgemmTile>().k > y.as<apps::gpu::DgemmTile>().k;
                   });
  std::printf("%zu tile tasks, %.3g GFLOP\n", in_order.size(), batch.flops() * 1e-9);
  for (const std::size_t depth : {8u, 4u, 2u, 1u}) {
    weft::gpu::PoolOptions o = apps::gpu::device_pool_options({0});
    o.ring_depth = depth;
    AppPool pool(o);
    for (const bool longest : {false, true}) {
      const std::vector<Record>& tasks = longest ? longest_first : in_order;
      pool.pause();  // the memset needs the SMs
      ok(cudaMemset(dc, 0, batch.c_size * sizeof(double)), "memset");
      ok(cudaDeviceSynchronize(), "sync");
      pool.resume();
      const Spread t =
          time_us(reps, [&] { apps::gpu::run_tasks(pool, std::span<const Record>(tasks)); });
      pool.pause();
      ok(cudaMemcpy(got.data(), dc, got.size() * sizeof(double), cudaMemcpyDeviceToHost), "copy");
      const double error = apps::gpu::max_relative_error<double>(got, ref);
      std::printf(
          "ring depth %zu, %-14s median %8.1f us (min %8.1f, max %8.1f); max error %.2g%s\n", depth,
          longest ? "longest first" : "matrix order", t.median, t.min, t.max, error,
          error <= 1e-12 ? "" : "  WRONG");
      pool.resume();
    }
    pool.pause();
  }
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc);
  return 0;
}
