// Whether more warps on one tile would lift the FP64 GEMM body's rate on a full GPU (decision
// 040: at the pool's two blocks of 4 warps a SM the 64 x 64 body reaches 13-15 TFLOP/s on an
// H200 whatever its mma shape or staging). The same product two ways, as plain kernels:
// - DgemmTile (apps/gpu/gemm_tile.hpp): 64 x 64 tiles, 128 threads, two blocks a SM;
// - a 128 x 128 tile on 256 threads (8 warps of 64 x 32, mma m16n8k8), one block a SM, its
//   chunks of K (16 deep) copied in 16 bytes at a time into 4 buffers, 3 chunks in flight.
// C (M x 128) = A (M x K) B (K x 128), M = 128 x SMs, column-major, each checked against a host
// reference. Build and run on the GPU machine from the repository root:
//   nvcc -std=c++20 -O3 -gencode=arch=compute_90,code=sm_90 -Xptxas -v -Iinclude -Iapps/gpu \
//     -Ilab/probes \
//     lab/probes/big_tile_probe.cu -o /tmp/big && /tmp/big
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "fp64_mma.cuh"
#include "gemm_tile.hpp"

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

using Small = apps::gpu::DgemmTile;

__global__ void small_kernel(const Small::Payload* payloads) {
  extern __shared__ unsigned char smem[];
  Small::Payload p = payloads[blockIdx.x];
  Small::run(p, weft::gpu::BlockContext(static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x),
                                        static_cast<int>(blockIdx.x), smem));
}

// ---- the 128 x 128 tile ----
constexpr int kBig = 128, kDepth = 16, kStages = 4, kThreads = 256;
constexpr int kSA = kBig + 4;    // A staged depth-major: as[kk * kSA + r]
constexpr int kSB = kDepth + 4;  // B staged column-major: bs[c * kSB + kk]
constexpr int kStageElems = kDepth * kSA + kBig * kSB;
constexpr std::size_t kBigShared = sizeof(double) * kStageElems * kStages;

struct BigPayload {
  const double* a;
  const double* b;
  double* c;
  int k, lda, ldb, ldc, row0;
};

__device__ __forceinline__ void stage(const BigPayload& p, double* buffer, int k0) {
  double* as = buffer;
  double* bs = buffer + kDepth * kSA;
  const int t = static_cast<int>(threadIdx.x);
  for (int i = t; i < kBig * kDepth / 2; i += kThreads) {
    const int r = 2 * (i % (kBig / 2)), kk = i / (kBig / 2);
    lab::copy16(as + kk * kSA + r, p.a + p.row0 + r + static_cast<std::size_t>(k0 + kk) * p.lda);
    const int k2 = 2 * (i % (kDepth / 2)), c = i / (kDepth / 2);
    lab::copy16(bs + c * kSB + k2, p.b + k0 + k2 + static_cast<std::size_t>(c) * p.ldb);
  }
}

__global__ void __launch_bounds__(kThreads, 1) big_kernel(const BigPayload* payloads) {
  extern __shared__ double buffers[];
  const BigPayload p = payloads[blockIdx.x];
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int g = lane / 4, q = lane % 4;
  const int wm = (warp / 4) * 64, wn = (warp % 4) * 32;  // 2 x 4 warps of 64 x 32
  const int chunks = p.k / kDepth;
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < chunks) stage(p, buffers + s * kStageElems, s * kDepth);
    asm volatile("cp.async.commit_group;\n" ::);
  }
  double acc[4][4][4] = {};
  for (int c = 0; c < chunks; ++c) {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(kStages - 2));
    __syncthreads();
    const int next = c + kStages - 1;
    if (next < chunks) stage(p, buffers + (next % kStages) * kStageElems, next * kDepth);
    asm volatile("cp.async.commit_group;\n" ::);
    const double* as = buffers + (c % kStages) * kStageElems;
    const double* bs = as + kDepth * kSA;
#pragma unroll
    for (int ks = 0; ks < kDepth; ks += 8) {
      double af[4][4], bf[4][2];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int r = 0; r < 4; ++r)  // a_r: row g + 8 (r % 2), column q + 4 (r / 2)
          af[i][r] = as[(ks + q + 4 * (r / 2)) * kSA + wm + 16 * i + g + 8 * (r % 2)];
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
#pragma unroll
        for (int r = 0; r < 2; ++r)  // b_r: row q + 4 r, column g
          bf[j][r] = bs[(wn + 8 * j + g) * kSB + ks + q + 4 * r];
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < 4; ++j) lab::mma_m16n8k8(acc[i][j], af[i], bf[j]);
      }
    }
  }
  asm volatile("cp.async.wait_group 0;\n" ::);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
#pragma unroll
      for (int r = 0; r < 4; ++r) {  // c_r: row g + 8 (r / 2), column 2 q + r % 2
        const int row = p.row0 + wm + 16 * i + g + 8 * (r / 2);
        const int col = wn + 8 * j + 2 * q + r % 2;
        p.c[row + static_cast<std::size_t>(col) * p.ldc] = acc[i][j][r];
      }
    }
  }
}

struct Problem {
  int m, n, k;
  std::vector<double> a, b;
  double *da = nullptr, *db = nullptr, *dc = nullptr;
  Problem(int m_, int n_, int k_)
      : m(m_), n(n_), k(k_), a(std::size_t(m_) * k_), b(std::size_t(k_) * n_) {
    std::mt19937_64 gen(11);
    std::uniform_real_distribution<double> u(-1, 1);
    for (double& x : a) x = u(gen);
    for (double& x : b) x = u(gen);
    check(cudaMalloc(&da, sizeof(double) * a.size()), "a");
    check(cudaMalloc(&db, sizeof(double) * b.size()), "b");
    check(cudaMalloc(&dc, sizeof(double) * m * n), "c");
    cudaMemcpy(da, a.data(), sizeof(double) * a.size(), cudaMemcpyHostToDevice);
    cudaMemcpy(db, b.data(), sizeof(double) * b.size(), cudaMemcpyHostToDevice);
  }
  ~Problem() {
    cudaFree(da);
    cudaFree(db);
    cudaFree(dc);
  }
  double max_error() const {
    std::vector<double> c(std::size_t(m) * n);
    cudaMemcpy(c.data(), dc, sizeof(double) * c.size(), cudaMemcpyDeviceToHost);
    double e = 0;
    for (int j = 0; j < n; ++j) {
      for (int i = 0; i < m; ++i) {
        double s = 0;
        for (int l = 0; l < k; ++l) s += a[i + std::size_t(l) * m] * b[l + std::size_t(j) * k];
        e = std::max(e, std::abs(s - c[i + std::size_t(j) * m]));
      }
    }
    return e;
  }
};

template <class Launch>
double median_us(Launch launch, const Problem& pr) {
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  std::vector<float> ms;
  for (int r = 0; r < 12; ++r) {
    cudaMemset(pr.dc, 0, sizeof(double) * pr.m * pr.n);
    cudaEventRecord(e0);
    launch();
    cudaEventRecord(e1);
    check(cudaEventSynchronize(e1), "kernel");
    float t = 0;
    cudaEventElapsedTime(&t, e0, e1);
    if (r >= 2) ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2] * 1e3;
}

void compare(int sms, int k) {
  const int m = kBig * sms, n = kBig;
  Problem pr(m, n, k);
  const double flops = 2.0 * m * n * k;
  // DgemmTile: (m / 64) x 2 tiles.
  std::vector<Small::Payload> small;
  for (int col = 0; col < n; col += 64) {
    for (int row = 0; row < m; row += 64)
      small.push_back(Small::Payload{pr.da, pr.db, pr.dc, m, n, k, m, k, m, row, col, 1.0, 0.0});
  }
  Small::Payload* dsmall;
  check(cudaMalloc(&dsmall, sizeof(Small::Payload) * small.size()), "payloads");
  cudaMemcpy(dsmall, small.data(), sizeof(Small::Payload) * small.size(), cudaMemcpyHostToDevice);
  check(cudaFuncSetAttribute(small_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(Small::kSharedBytes)),
        "smem");
  const int blocks = static_cast<int>(small.size());
  const double us_small =
      median_us([&] { small_kernel<<<blocks, 128, Small::kSharedBytes>>>(dsmall); }, pr);
  const double err_small = pr.max_error();
  // The 128 x 128 tile: m / 128 tiles, one a SM.
  std::vector<BigPayload> big;
  for (int row = 0; row < m; row += kBig)
    big.push_back(BigPayload{pr.da, pr.db, pr.dc, k, m, k, m, row});
  BigPayload* dbig;
  check(cudaMalloc(&dbig, sizeof(BigPayload) * big.size()), "payloads");
  cudaMemcpy(dbig, big.data(), sizeof(BigPayload) * big.size(), cudaMemcpyHostToDevice);
  check(cudaFuncSetAttribute(big_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(kBigShared)),
        "smem");
  const int big_blocks = static_cast<int>(big.size());
  const double us_big =
      median_us([&] { big_kernel<<<big_blocks, kThreads, kBigShared>>>(dbig); }, pr);
  const double err_big = pr.max_error();
  std::printf(
      "K = %4d: DgemmTile %4d tiles %8.1f us %6.1f TFLOP/s (error %.1e) | 128x128 %3d tiles "
      "%8.1f us %6.1f TFLOP/s (error %.1e)\n",
      k, blocks, us_small, flops / (us_small * 1e-6) / 1e12, err_small, big_blocks, us_big,
      flops / (us_big * 1e-6) / 1e12, err_big);
  cudaFree(dsmall);
  cudaFree(dbig);
}

}  // namespace

int main() {
  int sms = 0;
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "SMs");
  for (int k : {64, 128, 512, 2048}) compare(sms, k);
  return 0;
}
