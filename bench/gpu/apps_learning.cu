// gpu-apps: TNN against one GEMM then heaps, K-means against cuBLAS and OpenBLAS.
#include <cblas.h>
#include <cublas_v2.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>

#include "apps_benchmarks.hpp"
#include "batched_gemm.hpp"
#include "kmeans.hpp"
#include "tnn.hpp"
#include "weft/cpu/executor.hpp"
#include "weft/cpu/parallel.hpp"
#include "weft/gpu/detail/cuda_check.cuh"

namespace weft::bench::gpu {

namespace {

using apps::gpu::AppPool;
using apps::gpu::Neighbour;

void check(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(std::string("gpu-apps: ") + what + " failed");
}

// The brute-force neighbours of the points `sample`: the check of a large run.
bool sample_matches(const apps::gpu::PointSet& p, int t,
                    const std::vector<std::vector<Neighbour>>& got) {
  for (int i = 0; i < p.n; i += std::max(1, p.n / 48)) {
    apps::gpu::NeighbourHeaps h(p.n, t);
    for (int j = 0; j < p.n; ++j) {
      if (j == i) continue;
      float dist = 0;
      for (int k = 0; k < p.d; ++k) {
        const float diff = p.row_major[static_cast<std::size_t>(i) * p.d + k] -
                           p.row_major[static_cast<std::size_t>(j) * p.d + k];
        dist += diff * diff;
      }
      h.offer(i, {dist, j});
    }
    if (h.sorted()[static_cast<std::size_t>(i)] != got[static_cast<std::size_t>(i)]) return false;
  }
  return true;
}

// The CPU workers of an application's host share, the same for weft and its peers: the cores
// the pool's scheduler lanes and the popping thread leave.
weft::cpu::ExecutorOptions host_share_workers(const AppPool& pool) {
  weft::cpu::ExecutorOptions workers;
  const auto cores = static_cast<std::size_t>(std::max(2u, std::thread::hardware_concurrency()));
  workers.workers = std::max<std::size_t>(1, cores - std::min(cores - 1, pool.num_lanes() + 1));
  return workers;
}

}  // namespace

void tnn_benchmarks(Suite& suite, AppPool& pool, bool quick, int reps) {
  constexpr int kT = 16;
  constexpr std::size_t kSlots = 1024;
  cublasHandle_t blas = nullptr;
  check(cublasCreate(&blas) == CUBLAS_STATUS_SUCCESS, "cublasCreate");
  cudaStream_t stream;
  WEFT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  check(cublasSetStream(blas, stream) == CUBLAS_STATUS_SUCCESS, "cublasSetStream");
  float* slots = nullptr;
  WEFT_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&slots), kSlots * 64 * 64 * sizeof(float),
                                cudaHostAllocMapped | cudaHostAllocPortable));
  // The heaps' CPU workers, the same for weft and its peer.
  weft::cpu::Executor heap_workers(host_share_workers(pool));
  std::fprintf(stderr, "[bench] tnn: heaps on %zu CPU workers (weft and gemm_then_heaps)\n",
               heap_workers.num_workers());
  const std::vector<std::pair<int, int>> sizes =
      quick ? std::vector<std::pair<int, int>>{{4096, 256}}
            : std::vector<std::pair<int, int>>{{4096, 256},  {4096, 1024}, {8192, 256},
                                               {8192, 1024}, {16384, 256}, {16384, 1024},
                                               {32768, 256}, {32768, 1024}};
  for (const auto [n, d] : sizes) {
    const apps::gpu::PointSet points = apps::gpu::PointSet::random(n, d, 41);
    float* cm = device_copy(points.col_major);
    float* rm = device_copy(points.row_major);
    float* gram = nullptr;
    float* gram_host = nullptr;
    const std::size_t nn = static_cast<std::size_t>(n) * n;
    WEFT_CUDA_CHECK(cudaMalloc(&gram, nn * sizeof(float)));
    WEFT_CUDA_CHECK(cudaMallocHost(&gram_host, nn * sizeof(float)));
    std::vector<std::vector<Neighbour>> result;
    std::vector<Contender> c;
    c.push_back({"weft", [&] {
                   pool.resume();
                   const double t = median_us(reps, [&] {
                     result = apps::gpu::tnn_on_pool(pool, points, cm, rm, slots, kSlots, kT,
                                                     &heap_workers);
                   });
                   pool.pause();
                   return Outcome{t, sample_matches(points, kT, result)};
                 }});
    c.push_back({"gemm_then_heaps", [&] {
                   pool.pause();
                   const double t = median_us(reps, [&] {
                     const float minus_two = -2.0f, zero = 0.0f;
                     check(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_T, n, n, d, &minus_two, cm, n,
                                       cm, n, &zero, gram, n) == CUBLAS_STATUS_SUCCESS,
                           "cublasSgemm");
                     WEFT_CUDA_CHECK(cudaMemcpyAsync(gram_host, gram, nn * sizeof(float),
                                                     cudaMemcpyDeviceToHost, stream));
                     WEFT_CUDA_CHECK(cudaStreamSynchronize(stream));
                     // The same offers as the pool's two sides, by whole rows.
                     result = apps::gpu::tnn_from_gram(heap_workers, points, gram_host, kT);
                   });
                   return Outcome{t, sample_matches(points, kT, result)};
                 }});
    suite.compare("tnn_" + std::to_string(n) + "_" + std::to_string(d), "us", Better::lower,
                  std::move(c), quick ? 0 : 3);
    cudaFree(cm);
    cudaFree(rm);
    cudaFree(gram);
    cudaFreeHost(gram_host);
  }
  cudaFreeHost(slots);
  cudaStreamDestroy(stream);
  cublasDestroy(blas);
}

namespace {

// labels[i] = argmin_c (norms[c] + scores[i + c n]), ties to the lower index; scores = -2 X C^T.
__global__ void argmin_kernel(const float* scores, const float* norms, int n, int k, int* labels) {
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

double label_agreement(const std::vector<int>& a, const std::vector<int>& b) {
  std::size_t same = 0;
  for (std::size_t i = 0; i < a.size(); ++i) same += a[i] == b[i] ? 1 : 0;
  return static_cast<double>(same) / static_cast<double>(a.size());
}

}  // namespace

void kmeans_benchmarks(Suite& suite, AppPool& pool, bool quick, int reps) {
  constexpr int kD = 1024, kK = 128, kIterations = 5;
  cublasHandle_t blas = nullptr;
  check(cublasCreate(&blas) == CUBLAS_STATUS_SUCCESS, "cublasCreate");
  cudaStream_t stream;
  WEFT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  check(cublasSetStream(blas, stream) == CUBLAS_STATUS_SUCCESS, "cublasSetStream");
  // The centroid sums' CPU workers, the same for every contender.
  weft::cpu::Executor sum_workers(host_share_workers(pool));
  std::fprintf(stderr, "[bench] kmeans: centroid sums on %zu CPU workers (every contender)\n",
               sum_workers.num_workers());
  const std::vector<int> sizes =
      quick ? std::vector<int>{4096} : std::vector<int>{1024, 2048, 4096, 8192, 10240, 100000};
  for (const int n : sizes) {
    std::vector<float> points(static_cast<std::size_t>(n) * kD);
    for (std::size_t i = 0; i < points.size(); ++i) {
      points[i] = static_cast<float>(static_cast<int>((i * 2654435761u) % 17) - 8);
    }
    float* dp = device_copy(points);
    float* dc = device_copy(std::vector<float>(static_cast<std::size_t>(kK) * kD));
    float* dn = device_copy(std::vector<float>(kK));
    float* scores = nullptr;
    int* d_labels = nullptr;
    int* pinned_labels = nullptr;
    WEFT_CUDA_CHECK(cudaMalloc(&scores, sizeof(float) * static_cast<std::size_t>(n) * kK));
    WEFT_CUDA_CHECK(cudaMalloc(&d_labels, sizeof(int) * static_cast<std::size_t>(n)));
    WEFT_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&pinned_labels), sizeof(int) * n,
                                  cudaHostAllocMapped | cudaHostAllocPortable));
    const auto upload = [&](const float* from, float* to, std::size_t count) {
      WEFT_CUDA_CHECK(
          cudaMemcpyAsync(to, from, count * sizeof(float), cudaMemcpyHostToDevice, stream));
      WEFT_CUDA_CHECK(cudaStreamSynchronize(stream));
    };
    // The reference: OpenBLAS for the scores, the same argmin and update.
    auto cpu_kmeans = [&] {
      apps::gpu::KmeansResult r;
      r.centroids.assign(points.begin(), points.begin() + static_cast<std::ptrdiff_t>(kK) * kD);
      r.labels.assign(static_cast<std::size_t>(n), 0);
      std::vector<float> s(static_cast<std::size_t>(n) * kK), norms(kK);
      for (int it = 0; it < kIterations; ++it) {
        apps::gpu::centroid_norms(r.centroids, kD, norms);
        // s (n x k, column-major) = -2 X C^T with X, C row-major.
        cblas_sgemm(CblasColMajor, CblasTrans, CblasNoTrans, n, kK, kD, -2.0f, points.data(), kD,
                    r.centroids.data(), kD, 0.0f, s.data(), n);
        for (int i = 0; i < n; ++i) {
          int best = 0;
          for (int c = 1; c < kK; ++c) {
            if (norms[c] + s[i + static_cast<std::size_t>(c) * n] <
                norms[best] + s[i + static_cast<std::size_t>(best) * n]) {
              best = c;
            }
          }
          r.labels[static_cast<std::size_t>(i)] = best;
        }
        apps::gpu::update_centroids(points, kD, r.labels, kK, r.centroids, &sum_workers);
      }
      return r;
    };
    apps::gpu::KmeansResult reference = cpu_kmeans(), got;
    auto close = [&](const apps::gpu::KmeansResult& r) {
      return label_agreement(r.labels, reference.labels) >= 0.995 &&
             apps::gpu::max_relative_error<float>(r.centroids, reference.centroids) <= 1e-2;
    };
    std::vector<Contender> c;
    c.push_back({"weft", [&] {
                   pool.resume();
                   const double t = median_us(reps, [&] {
                     got = apps::gpu::kmeans_on_pool(pool, points, kD, kK, kIterations, dp, dc, dn,
                                                     pinned_labels, upload, &sum_workers);
                   });
                   pool.pause();
                   return Outcome{t, close(got)};
                 }});
    c.push_back(
        {"cublas", [&] {
           pool.pause();
           const double t = median_us(reps, [&] {
             got.centroids.assign(points.begin(),
                                  points.begin() + static_cast<std::ptrdiff_t>(kK) * kD);
             got.labels.assign(static_cast<std::size_t>(n), 0);
             std::vector<float> norms(kK);
             for (int it = 0; it < kIterations; ++it) {
               apps::gpu::centroid_norms(got.centroids, kD, norms);
               upload(got.centroids.data(), dc, got.centroids.size());
               upload(norms.data(), dn, norms.size());
               const float minus_two = -2.0f, zero = 0.0f;
               check(cublasSgemm(blas, CUBLAS_OP_T, CUBLAS_OP_N, n, kK, kD, &minus_two, dp, kD, dc,
                                 kD, &zero, scores, n) == CUBLAS_STATUS_SUCCESS,
                     "cublasSgemm");
               argmin_kernel<<<(n + 255) / 256, 256, 0, stream>>>(scores, dn, n, kK, d_labels);
               WEFT_CUDA_CHECK(cudaMemcpyAsync(got.labels.data(), d_labels, sizeof(int) * n,
                                               cudaMemcpyDeviceToHost, stream));
               WEFT_CUDA_CHECK(cudaStreamSynchronize(stream));
               apps::gpu::update_centroids(points, kD, got.labels, kK, got.centroids, &sum_workers);
             }
           });
           return Outcome{t, close(got)};
         }});
    c.push_back({"openblas_cpu", [&] {
                   const double t = median_us(std::max(1, reps / 5), [&] { got = cpu_kmeans(); });
                   return Outcome{t, close(got)};
                 }});
    // Up to n = 10240 a run takes milliseconds, and its host share (the centroid sums on the
    // CPU workers) moves from round to round by more than the contenders differ: seven rounds
    // there, three at 100 000 (docs/decisions/037-kmeans-sums-by-point-ranges.md).
    suite.compare("kmeans_" + std::to_string(n), "us", Better::lower, std::move(c),
                  quick ? 0 : (n <= 10240 ? 7 : 3));
    cudaFree(dp);
    cudaFree(dc);
    cudaFree(dn);
    cudaFree(scores);
    cudaFree(d_labels);
    cudaFreeHost(pinned_labels);
  }
  cudaStreamDestroy(stream);
  cublasDestroy(blas);
}

}  // namespace weft::bench::gpu
