// gpu-apps: one DGEMM over every GPU of a pool, against each GPU alone (seed 000 §4.5).
#include <cstdio>
#include <random>
#include <span>
#include <string>

#include "apps_benchmarks.hpp"
#include "batched_gemm.hpp"
#include "multi_gpu_gemm.hpp"
#include "weft/gpu/detail/cuda_check.cuh"

namespace weft::bench::gpu {

namespace {

using apps::gpu::AppPool;

struct Replicas {
  std::vector<const double*> a, b;
  std::vector<double*> c;  // one C per GPU: a pool of one GPU writes its own
};

// 64 entries of C checked against dot products on the host.
bool sample_matches(const std::vector<double>& a, const std::vector<double>& b, const double* c_dev,
                    int n, int device) {
  std::mt19937 rng(7);
  WEFT_CUDA_CHECK(cudaSetDevice(device));
  for (int s = 0; s < 64; ++s) {
    const int r = static_cast<int>(rng() % n), q = static_cast<int>(rng() % n);
    double want = 0;
    for (int k = 0; k < n; ++k)
      want += a[r + static_cast<std::size_t>(k) * n] * b[k + static_cast<std::size_t>(q) * n];
    double got = 0;
    WEFT_CUDA_CHECK(cudaMemcpy(&got, c_dev + r + static_cast<std::size_t>(q) * n, sizeof got,
                               cudaMemcpyDeviceToHost));
    if (std::abs(got - want) > 1e-9 * (1 + std::abs(want))) return false;
  }
  return true;
}

}  // namespace

void multi_gpu_gemm_benchmarks(Suite& suite, bool quick, int reps) {
  int gpus = 0;
  WEFT_CUDA_CHECK(cudaGetDeviceCount(&gpus));
  gpus = std::min(gpus, apps::gpu::ReplicatedGemmTile::kMaxGpus);
  if (gpus < 2) return;
  for (const int n : quick ? std::vector<int>{8192} : std::vector<int>{4096, 8192, 16384}) {
    const apps::gpu::GemmBatch one = apps::gpu::GemmBatch::uniform(1, n, n, n);
    std::vector<double> a, b;
    apps::gpu::fill_inputs(one, a, b);
    const std::size_t bytes = sizeof(double) * a.size();
    Replicas rep;
    for (int g = 0; g < gpus; ++g) {
      WEFT_CUDA_CHECK(cudaSetDevice(g));
      double *da = nullptr, *db = nullptr, *dc = nullptr;
      WEFT_CUDA_CHECK(cudaMalloc(&da, bytes));
      WEFT_CUDA_CHECK(cudaMalloc(&db, bytes));
      WEFT_CUDA_CHECK(cudaMalloc(&dc, bytes));
      WEFT_CUDA_CHECK(cudaMemcpy(da, a.data(), bytes, cudaMemcpyHostToDevice));
      WEFT_CUDA_CHECK(cudaMemcpy(db, b.data(), bytes, cudaMemcpyHostToDevice));
      rep.a.push_back(da);
      rep.b.push_back(db);
      rep.c.push_back(dc);
    }
    WEFT_CUDA_CHECK(cudaSetDevice(0));
    const double flops = 2.0 * n * n * static_cast<double>(n);
    // GFLOP/s of a pool over `devices`, the C of `c_gpu`; whether its result checks out.
    auto rate = [&](const std::vector<int>& devices, int c_gpu, bool& ok) {
      AppPool pool(apps::gpu::device_pool_options(devices));
      const int per = static_cast<int>((pool.num_blocks() + devices.size() - 1) / devices.size());
      std::vector<const double*> as, bs;
      for (const int d : devices) {
        as.push_back(rep.a[static_cast<std::size_t>(d)]);
        bs.push_back(rep.b[static_cast<std::size_t>(d)]);
      }
      const auto tasks = apps::gpu::replicated_gemm_tasks<apps::gpu::kAppCapacity>(
          as, bs, rep.c[static_cast<std::size_t>(c_gpu)], n, per);
      const double t = median_us(
          reps, [&] { apps::gpu::run_tasks(pool, std::span<const AppPool::Record>(tasks)); });
      pool.pause();
      ok = ok && sample_matches(a, b, rep.c[static_cast<std::size_t>(c_gpu)], n, c_gpu);
      return flops / (t * 1e-6) * 1e-9;
    };
    bool ok = true;
    double alone = 0;
    std::vector<int> all;
    for (int g = 0; g < gpus; ++g) {
      all.push_back(g);
      const double r = rate({g}, g, ok);
      alone += r;
      suite.add_metric(
          Metric{"multi_gpu_gemm_gflops_" + std::to_string(n) + "_gpu" + std::to_string(g),
                 "GFLOP/s",
                 Better::higher,
                 {r}});
    }
    const double together = rate(all, 0, ok);
    suite.add_metric(Metric{"multi_gpu_gemm_gflops_" + std::to_string(n) + "_all",
                            "GFLOP/s",
                            Better::higher,
                            {together}});
    suite.add_metric(Metric{"multi_gpu_gemm_efficiency_" + std::to_string(n),
                            "fraction",
                            Better::higher,
                            {together / alone}});
    std::fprintf(stderr,
                 "[bench] multi_gpu_gemm_%d: %d GPUs together %.1f GFLOP/s, alone (sum) %.1f: "
                 "efficiency %.3f%s\n",
                 n, gpus, together, alone, together / alone, ok ? "" : " (UNVERIFIED)");
    for (int g = 0; g < gpus; ++g) {
      WEFT_CUDA_CHECK(cudaSetDevice(g));
      cudaFree(const_cast<double*>(rep.a[static_cast<std::size_t>(g)]));
      cudaFree(const_cast<double*>(rep.b[static_cast<std::size_t>(g)]));
      cudaFree(rep.c[static_cast<std::size_t>(g)]);
    }
    WEFT_CUDA_CHECK(cudaSetDevice(0));
  }
}

}  // namespace weft::bench::gpu
