// Where K-means' time goes on a GPU (decision 037's open question), per iteration at n points,
// d = 1024, k = 128, the centroid sums on W CPU workers:
//   peer:  the centroids' upload, then cuBLAS's scores + an argmin kernel + the labels' copy
//          back (one synchronize), then update_centroids on the workers;
//   weft:  the assignment alone (every KmeansAssign task pushed, then all popped), then
//          kmeans_on_pool's whole iteration (sums following the pops, combined, moved).
// Medians of the rounds (5 unless given), in ms. Built on the GPU machine after
// scripts/gpu-build.sh ... weft_gpu_apps:
//   nvcc -std=c++20 -O3 -gencode=arch=compute_90,code=sm_90 -Iinclude -Iapps/gpu
//     lab/probes/kmeans_phases_probe.cu build-gpu/apps/libweft_gpu_apps.a
//     build-gpu/src/libweft.a -lcublas -lhwloc -o /tmp/kmeans_phases &&
//     /tmp/kmeans_phases 100000 11 5     # n, sum workers, rounds (each phase's median,
//                                          # then its spread)
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <weft/cpu/executor.hpp>

#include "app_pool.hpp"
#include "kmeans.hpp"

namespace {

void ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

__global__ void argmin(const float* scores, const float* norms, int n, int k, int* labels) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= n) return;
  int best = 0;
  float best_score = norms[0] + scores[i];
  for (int c = 1; c < k; ++c) {
    const float s = norms[c] + scores[i + static_cast<std::size_t>(c) * n];
    if (s < best_score) {
      best_score = s;
      best = c;
    }
  }
  labels[i] = best;
}

using Clock = std::chrono::steady_clock;
double ms(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 100000;
  const int nworkers = argc > 2 ? std::atoi(argv[2]) : 11;
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 5;
  constexpr int d = 1024, k = 128;
  std::vector<float> points(static_cast<std::size_t>(n) * d);
  for (std::size_t i = 0; i < points.size(); ++i) {
    points[i] = static_cast<float>(static_cast<int>((i * 2654435761u) % 17) - 8);
  }
  float *dp = nullptr, *dc = nullptr, *dn = nullptr, *scores = nullptr;
  int *d_labels = nullptr, *pinned_labels = nullptr;
  ok(cudaMalloc(&dp, points.size() * sizeof(float)), "cudaMalloc");
  ok(cudaMemcpy(dp, points.data(), points.size() * sizeof(float), cudaMemcpyHostToDevice), "copy");
  ok(cudaMalloc(&dc, sizeof(float) * k * d), "cudaMalloc");
  ok(cudaMalloc(&dn, sizeof(float) * k), "cudaMalloc");
  ok(cudaMalloc(&scores, sizeof(float) * static_cast<std::size_t>(n) * k), "cudaMalloc");
  ok(cudaMalloc(&d_labels, sizeof(int) * n), "cudaMalloc");
  ok(cudaHostAlloc(reinterpret_cast<void**>(&pinned_labels), sizeof(int) * n,
                   cudaHostAllocMapped | cudaHostAllocPortable),
     "cudaHostAlloc");
  cudaStream_t stream;
  ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
  cublasHandle_t blas = nullptr;
  cublasCreate(&blas);
  cublasSetStream(blas, stream);
  const auto upload = [&](const float* from, float* to, std::size_t count) {
    ok(cudaMemcpyAsync(to, from, count * sizeof(float), cudaMemcpyHostToDevice, stream), "up");
    ok(cudaStreamSynchronize(stream), "sync");
  };
  weft::cpu::ExecutorOptions o;
  o.workers = static_cast<std::size_t>(nworkers);
  weft::cpu::Executor workers(o);
  std::vector<float> centroids(points.begin(), points.begin() + k * d), norms(k);
  std::vector<int> labels(static_cast<std::size_t>(n));
  std::vector<double> t_up, t_gpu, t_update, t_assign, t_iteration;
  apps::gpu::AppPool pool(apps::gpu::device_pool_options({0}));
  pool.pause();
  for (int r = 0; r < rounds; ++r) {
    const auto t0 = Clock::now();
    apps::gpu::centroid_norms(centroids, d, norms);
    upload(centroids.data(), dc, centroids.size());
    upload(norms.data(), dn, norms.size());
    const auto t1 = Clock::now();
    const float minus_two = -2.0f, zero = 0.0f;
    cublasSgemm(blas, CUBLAS_OP_T, CUBLAS_OP_N, n, k, d, &minus_two, dp, d, dc, d, &zero, scores,
                n);
    argmin<<<(n + 255) / 256, 256, 0, stream>>>(scores, dn, n, k, d_labels);
    ok(cudaMemcpyAsync(labels.data(), d_labels, sizeof(int) * n, cudaMemcpyDeviceToHost, stream),
       "down");
    ok(cudaStreamSynchronize(stream), "sync");
    const auto t2 = Clock::now();
    std::vector<float> moved = centroids;
    apps::gpu::update_centroids(points, d, labels, k, moved, &workers);
    const auto t3 = Clock::now();
    t_up.push_back(ms(t0, t1));
    t_gpu.push_back(ms(t1, t2));
    t_update.push_back(ms(t2, t3));
  }
  pool.resume();
  using Record = apps::gpu::AppPool::Record;
  std::vector<Record> tasks, done;
  for (int first = 0; first < n; first += apps::gpu::KmeansAssign::kPoints) {
    const int count = std::min(apps::gpu::KmeansAssign::kPoints, n - first);
    tasks.push_back(
        Record::make<apps::gpu::KmeansAssign>({dp, dc, dn, pinned_labels, d, k, first, count}));
  }
  done.resize(tasks.size());
  for (int r = 0; r < rounds; ++r) {
    const auto t0 = Clock::now();
    pool.push_batch(tasks);
    for (std::size_t got = 0; got < tasks.size();) got += pool.pop_batch(done);
    const auto t1 = Clock::now();
    (void)apps::gpu::kmeans_on_pool(pool, points, d, k, 1, dp, dc, dn, pinned_labels, upload,
                                    &workers);
    const auto t2 = Clock::now();
    t_assign.push_back(ms(t0, t1));
    t_iteration.push_back(ms(t1, t2));
  }
  pool.pause();
  std::printf(
      "n %d, %d sum workers: peer upload %.2f ms, scores+argmin+labels %.2f ms, update %.2f "
      "ms; weft assignment alone %.2f ms, whole iteration %.2f ms\n",
      n, nworkers, median(t_up), median(t_gpu), median(t_update), median(t_assign),
      median(t_iteration));
  const auto spread = [](const char* what, std::vector<double> v) {
    std::sort(v.begin(), v.end());
    std::printf("  %-22s min %.3f  p25 %.3f  median %.3f  p75 %.3f  max %.3f ms\n", what, v[0],
                v[v.size() / 4], v[v.size() / 2], v[3 * v.size() / 4], v.back());
  };
  spread("peer upload", t_up);
  spread("peer scores+labels", t_gpu);
  spread("peer update", t_update);
  spread("weft assignment", t_assign);
  spread("weft iteration", t_iteration);
  cudaFreeHost(pinned_labels);
  cudaFree(dp);
  cudaFree(dc);
  cudaFree(dn);
  cudaFree(scores);
  cudaFree(d_labels);
}
