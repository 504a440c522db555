// Whether the FP64 tile body would run faster on Hopper's larger FP64 mma shapes (sm_90 adds
// m16n8k4, m16n8k8 and m16n8k16 to Ampere's m8n8k4). Two measurements:
// 1. The instruction's rate: every warp of 132 x B blocks of W warps issues mma of one shape on
//    four independent accumulators in a loop; TFLOP/s of the whole GPU.
// 2. The 64 x 64 tile body (apps/gpu/gemm_tile.hpp's staging, 128 threads, four warps of 32 x
//    32) with its inner product on m8n8k4 (DgemmTile itself), on m16n8k8 and on m16n8k16, as
//    plain kernels: one block (a task's latency) and 264 blocks (two a SM, each its own tile of
//    C, as the pool's blocks), K = 64 and 512; each checked against a host reference.
// Build and run on the GPU machine from the repository root:
//   nvcc -std=c++20 -O3 -gencode=arch=compute_90,code=sm_90 -Iinclude -Iapps/gpu -Ilab/probes \
//     lab/probes/dmma_shape_probe.cu -o /tmp/dmma && /tmp/dmma
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
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

// ---- 1. The instruction's rate ----
// Shape 0: m8n8k4, 1: m16n8k4, 2: m16n8k8, 3: m16n8k16, each on the first of `a` and `b` it
// takes (fp64_mma.cuh).
template <int Shape>
__device__ __forceinline__ void mma_shape(double (&d)[4], const double (&a)[8],
                                          const double (&b)[4]) {
  if constexpr (Shape == 0) {
    lab::mma_m8n8k4(reinterpret_cast<double(&)[2]>(d), a[0], b[0]);
  } else if constexpr (Shape == 1) {
    lab::mma_m16n8k4(d, reinterpret_cast<const double(&)[2]>(a), b[0]);
  } else if constexpr (Shape == 2) {
    lab::mma_m16n8k8(d, reinterpret_cast<const double(&)[4]>(a),
                     reinterpret_cast<const double(&)[2]>(b));
  } else {
    lab::mma_m16n8k16(d, a, b);
  }
}
constexpr double kShapeFlops[] = {2.0 * 8 * 8 * 4, 2.0 * 16 * 8 * 4, 2.0 * 16 * 8 * 8,
                                  2.0 * 16 * 8 * 16};
constexpr const char* kShapeName[] = {"m8n8k4", "m16n8k4", "m16n8k8", "m16n8k16"};

template <int Shape>
__global__ void rate_kernel(double* out, int iters) {
  double a[8], b[4], d[4][4];
  for (int i = 0; i < 8; ++i) a[i] = 1.0 + 1e-9 * (threadIdx.x + i);
  for (int i = 0; i < 4; ++i) b[i] = 1.0 - 1e-9 * (threadIdx.x + i);
  for (auto& acc : d)
    for (double& x : acc) x = 0;
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int c = 0; c < 4; ++c) mma_shape<Shape>(d[c], a, b);
  }
  double s = 0;
  for (auto& acc : d)
    for (double x : acc) s += x;
  if (s == 12345.0) out[0] = s;  // keeps the loop
}

template <int Shape>
void rate(int blocks_per_sm, int warps, int sms) {
  double* out;
  check(cudaMalloc(&out, sizeof(double)), "malloc");
  const int iters = 4096, blocks = sms * blocks_per_sm;
  rate_kernel<Shape><<<blocks, 32 * warps>>>(out, 16);
  check(cudaDeviceSynchronize(), "warm-up");
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  std::vector<float> ms;
  for (int r = 0; r < 5; ++r) {
    cudaEventRecord(e0);
    rate_kernel<Shape><<<blocks, 32 * warps>>>(out, iters);
    cudaEventRecord(e1);
    check(cudaEventSynchronize(e1), "rate");
    float t = 0;
    cudaEventElapsedTime(&t, e0, e1);
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  const double flops = kShapeFlops[Shape] * 4.0 * iters * warps * blocks;
  std::printf("  %-9s %d block(s)/SM x %2d warps: %6.1f TFLOP/s\n", kShapeName[Shape],
              blocks_per_sm, warps, flops / (ms[2] * 1e-3) / 1e12);
  cudaFree(out);
}

// ---- 2. The tile body on each shape ----
using Tile = apps::gpu::DgemmTile;
constexpr int kT = Tile::kTile, kS = Tile::kStride;

// C(64 x 64 at row0, col0) = A B over K (A: m x k, B: k x n, column-major, no transposes, beta 0),
// four warps each a 32 x 32 quarter, the staging of DgemmTile::for_each_chunk.
template <int Shape>
__device__ void body(const Tile::Payload& p, const weft::gpu::BlockContext& ctx) {
  if constexpr (Shape == 0) {
    Tile::Payload copy = p;
    Tile::run(copy, ctx);
    return;
  } else {
    const int warp = ctx.thread() / 32, lane = ctx.thread() % 32;
    const int g = lane / 4, q = lane % 4;
    const int wm = (warp / 2) * 32, wn = (warp % 2) * 32;
    constexpr int kStep = Shape == 2 ? 8 : 16;  // K per mma
    double acc[2][4][4] = {};
    Tile::for_each_chunk(p, ctx, [&](const double* as, const double* bs) {
      if (warp >= 4) return;
#pragma unroll
      for (int ks = 0; ks < Tile::kDepth; ks += kStep) {
        double af[2][8], bf[4][4];
#pragma unroll
        for (int i = 0; i < 2; ++i) {
#pragma unroll
          for (int r = 0; r < kStep / 2; ++r)  // a_r: row g + 8 (r % 2), column q + 4 (r / 2)
            af[i][r] = as[(ks + q + 4 * (r / 2)) * kS + wm + 16 * i + g + 8 * (r % 2)];
        }
#pragma unroll
        for (int j = 0; j < 4; ++j) {
#pragma unroll
          for (int r = 0; r < kStep / 4; ++r)  // b_r: row q + 4 r, column g
            bf[j][r] = bs[(ks + q + 4 * r) * kS + wn + 8 * j + g];
        }
#pragma unroll
        for (int i = 0; i < 2; ++i) {
#pragma unroll
          for (int j = 0; j < 4; ++j) mma_shape<Shape>(acc[i][j], af[i], bf[j]);
        }
      }
    });
    if (warp >= 4) return;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
#pragma unroll
        for (int r = 0; r < 4; ++r) {  // c_r: row g + 8 (r / 2), column 2 q + r % 2
          const int row = p.row0 + wm + 16 * i + g + 8 * (r / 2);
          const int col = p.col0 + wn + 8 * j + 2 * q + r % 2;
          p.c[row + static_cast<std::size_t>(col) * p.ldc] = p.alpha * acc[i][j][r];
        }
      }
    }
  }
}

// The same inner product on m16n8k16 with its own staging: 16-byte asynchronous copies (pairs
// of elements adjacent in global memory) and `Stages` buffers, stages - 1 chunks in flight.
// Only whole tiles, K a multiple of the chunk, even leading dimensions and 16-byte aligned
// matrices (the probe's); A not transposed. A: as[kk * kSA + r]. B not transposed (contiguous
// in kk): bs[c * kSBn + kk]; B transposed (contiguous in c): bs[kk * kSA + c]. Both strides
// put a half-warp's fragment loads on distinct banks.
constexpr int kDepth = 32, kSA = kT + 4, kSBn = kDepth + 4;
constexpr int kStageElems = kDepth * kSA + kT * kSBn;  // the larger B layout
template <int Stages>
constexpr std::size_t staged_bytes() {
  return sizeof(double) * kStageElems * Stages;
}

template <bool BT>
__device__ __forceinline__ void stage16(const Tile::Payload& p, const weft::gpu::BlockContext& ctx,
                                        double* buffer, int k0) {
  double* as = buffer;
  double* bs = buffer + kDepth * kSA;
  constexpr int kPairs = kT * kDepth / 2;
  for (int i = ctx.thread(); i < kPairs; i += ctx.threads()) {
    const int r = 2 * (i % (kT / 2)), kk = i / (kT / 2);
    lab::copy16(as + kk * kSA + r, p.a + p.row0 + r + static_cast<std::size_t>(k0 + kk) * p.lda);
    if constexpr (BT) {
      lab::copy16(bs + kk * kSA + r, p.b + p.col0 + r + static_cast<std::size_t>(k0 + kk) * p.ldb);
    } else {
      const int k2 = 2 * (i % (kDepth / 2)), c = i / (kDepth / 2);
      lab::copy16(bs + c * kSBn + k2, p.b + k0 + k2 + static_cast<std::size_t>(p.col0 + c) * p.ldb);
    }
  }
}

template <int Stages, bool BT>
__device__ void body16(const Tile::Payload& p, const weft::gpu::BlockContext& ctx) {
  const int warp = ctx.thread() / 32, lane = ctx.thread() % 32;
  const int g = lane / 4, q = lane % 4;
  const int wm = (warp / 2) * 32, wn = (warp % 2) * 32;
  auto* buffers = static_cast<double*>(ctx.shared());
  const int chunks = p.k / kDepth;
  for (int s = 0; s < Stages - 1; ++s) {
    if (s < chunks) stage16<BT>(p, ctx, buffers + s * kStageElems, s * kDepth);
    asm volatile("cp.async.commit_group;\n" ::);
  }
  double acc[2][4][4] = {};
  for (int c = 0; c < chunks; ++c) {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(Stages - 2));
    ctx.sync();  // chunk c is visible to all; chunk c - 1's buffer is free
    const int next = c + Stages - 1;
    if (next < chunks) stage16<BT>(p, ctx, buffers + (next % Stages) * kStageElems, next * kDepth);
    asm volatile("cp.async.commit_group;\n" ::);
    const double* as = buffers + (c % Stages) * kStageElems;
    const double* bs = as + kDepth * kSA;
    if (warp < 4) {
#pragma unroll
      for (int ks = 0; ks < kDepth; ks += 16) {
        double af[2][8], bf[4][4];
#pragma unroll
        for (int i = 0; i < 2; ++i) {
#pragma unroll
          for (int r = 0; r < 8; ++r)
            af[i][r] = as[(ks + q + 4 * (r / 2)) * kSA + wm + 16 * i + g + 8 * (r % 2)];
        }
#pragma unroll
        for (int j = 0; j < 4; ++j) {
#pragma unroll
          for (int r = 0; r < 4; ++r) {
            const int kk = ks + q + 4 * r, col = wn + 8 * j + g;
            bf[j][r] = BT ? bs[kk * kSA + col] : bs[col * kSBn + kk];
          }
        }
#pragma unroll
        for (int i = 0; i < 2; ++i) {
#pragma unroll
          for (int j = 0; j < 4; ++j) mma_shape<3>(acc[i][j], af[i], bf[j]);
        }
      }
    }
  }
  asm volatile("cp.async.wait_group 0;\n" ::);
  ctx.sync();
  if (warp >= 4) return;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      double old[4];
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int row = p.row0 + wm + 16 * i + g + 8 * (r / 2);
        const int col = p.col0 + wn + 8 * j + 2 * q + r % 2;
        old[r] = p.beta == 0.0 ? 0.0 : p.c[row + static_cast<std::size_t>(col) * p.ldc];
      }
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int row = p.row0 + wm + 16 * i + g + 8 * (r / 2);
        const int col = p.col0 + wn + 8 * j + 2 * q + r % 2;
        p.c[row + static_cast<std::size_t>(col) * p.ldc] = p.alpha * acc[i][j][r] + p.beta * old[r];
      }
    }
  }
}

template <int Variant>  // 0: DgemmTile (m8n8k4); 2, 3: m16n8k8, m16n8k16; 10 + S: body16, S stages
constexpr std::size_t shared_for() {
  return Variant >= 10 ? staged_bytes<(Variant >= 10 ? Variant - 10 : 2)>() : Tile::kSharedBytes;
}

template <int Shape>
__global__ void tile_kernel(const Tile::Payload* payloads) {
  extern __shared__ unsigned char smem[];
  const weft::gpu::BlockContext ctx(static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x),
                                    static_cast<int>(blockIdx.x), smem);
  // By reference, as measured: the 16-byte variants read the payload's fields from global
  // memory (body<0> copies it, as DgemmTile::run does).
  const Tile::Payload& p = payloads[blockIdx.x];
  if constexpr (Shape >= 10) {
    if (p.b_transposed) {
      body16<Shape - 10, true>(p, ctx);
    } else {
      body16<Shape - 10, false>(p, ctx);
    }
  } else {
    body<Shape>(p, ctx);
  }
}

// `tiles` tiles of C (a column of tiles: m = 64 tiles, n = 64), K deep; returns the median
// kernel time in us and checks C.
template <int Shape>
double tile_us(int tiles, int k, bool bt, double& max_error) {
  const int m = kT * tiles, n = kT;
  std::vector<double> a(static_cast<std::size_t>(m) * k), b(static_cast<std::size_t>(k) * n);
  std::mt19937_64 gen(7);
  std::uniform_real_distribution<double> u(-1, 1);
  for (double& x : a) x = u(gen);
  for (double& x : b) x = u(gen);
  double *da, *db, *dc;
  Tile::Payload* dp;
  check(cudaMalloc(&da, sizeof(double) * a.size()), "a");
  check(cudaMalloc(&db, sizeof(double) * b.size()), "b");
  check(cudaMalloc(&dc, sizeof(double) * m * n), "c");
  check(cudaMalloc(&dp, sizeof(Tile::Payload) * tiles), "p");
  cudaMemcpy(da, a.data(), sizeof(double) * a.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(db, b.data(), sizeof(double) * b.size(), cudaMemcpyHostToDevice);
  std::vector<Tile::Payload> ps(tiles);
  for (int t = 0; t < tiles; ++t) {
    ps[t] = Tile::Payload{da, db, dc, m, n, k, m, bt ? n : k, m, kT * t, 0, 1.0, 1.0};
    ps[t].b_transposed = bt;
  }
  cudaMemcpy(dp, ps.data(), sizeof(Tile::Payload) * tiles, cudaMemcpyHostToDevice);
  check(cudaFuncSetAttribute(tile_kernel<Shape>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(shared_for<Shape>())),
        "smem");
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  std::vector<float> ms;
  for (int r = 0; r < 12; ++r) {
    cudaMemset(dc, 0, sizeof(double) * m * n);
    cudaEventRecord(e0);
    tile_kernel<Shape><<<tiles, 128, shared_for<Shape>()>>>(dp);
    cudaEventRecord(e1);
    check(cudaEventSynchronize(e1), "tile kernel");
    float t = 0;
    cudaEventElapsedTime(&t, e0, e1);
    if (r >= 2) ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  std::vector<double> c(static_cast<std::size_t>(m) * n);
  cudaMemcpy(c.data(), dc, sizeof(double) * c.size(), cudaMemcpyDeviceToHost);
  max_error = 0;
  for (int j = 0; j < n; ++j) {
    for (int i = 0; i < m; ++i) {
      double s = 0;
      for (int l = 0; l < k; ++l)
        s += a[i + static_cast<std::size_t>(l) * m] * (bt ? b[j + l * n] : b[l + j * k]);
      max_error = std::max(max_error, std::abs(s - c[i + static_cast<std::size_t>(j) * m]));
    }
  }
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc);
  cudaFree(dp);
  return ms[ms.size() / 2] * 1e3;
}

template <int Shape>
void tiles(int sms, const char* name) {
  for (bool bt : {false, true}) {
    for (int k : {64, 512}) {
      for (int count : {1, 2 * sms}) {
        double err = 0;
        const double us = tile_us<Shape>(count, k, bt, err);
        const double gflops = 2.0 * kT * kT * k * count / (us * 1e-6) / 1e9;
        std::printf("  %-14s %s %3d tile(s), K = %3d: %7.2f us, %7.1f GFLOP/s, max error %.1e%s\n",
                    name, bt ? "NT" : "NN", count, k, us, gflops, err,
                    err > 1e-10 ? "  WRONG" : "");
      }
    }
  }
}

}  // namespace

// `dmma one VARIANT TILES K BT`: that configuration alone (for ncu); VARIANT 0 or 13.
int one(int variant, int count, int k, bool bt) {
  double err = 0;
  const double us = variant == 0 ? tile_us<0>(count, k, bt, err) : tile_us<13>(count, k, bt, err);
  std::printf("variant %d, %d tiles, K = %d, %s: %.2f us, max error %.1e\n", variant, count, k,
              bt ? "NT" : "NN", us, err);
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 6 && std::string(argv[1]) == "one") {
    return one(std::atoi(argv[2]), std::atoi(argv[3]), std::atoi(argv[4]), std::atoi(argv[5]) != 0);
  }
  int sms = 0;
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "SMs");
  std::printf("the instruction's rate (%d SMs):\n", sms);
  for (auto [bps, warps] : {std::pair{1, 4}, std::pair{2, 4}, std::pair{2, 8}, std::pair{4, 8}}) {
    rate<0>(bps, warps, sms);
    rate<1>(bps, warps, sms);
    rate<2>(bps, warps, sms);
    rate<3>(bps, warps, sms);
  }
  std::printf("the tile body:\n");
  tiles<0>(sms, "m8n8k4");
  tiles<3>(sms, "m16n8k16");
  tiles<12>(sms, "16B, 2 stages");
  tiles<13>(sms, "16B, 3 stages");
  tiles<14>(sms, "16B, 4 stages");
  return 0;
}
