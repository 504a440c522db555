// Whether a 128 x 128 FP64 tile body on six warps, the task warps of a pool block of 192 task
// threads beside the two role warps (one block a SM: 8 warps, so up to 255 registers a thread),
// runs as fast as decision 040's body on eight warps, and what the pool's 168-register cap
// costs that body. Plain kernels, C (M x 128) = A (M x K) B (K x 128), M = 128 x SMs, one tile a
// SM, column-major, each checked against a host reference:
// - eight@255: decision 040's body (big_tile_probe.cu): 8 warps of 64 x 32, mma m16n8k8, chunks
//   of K 16 deep copied 16 bytes at a time into 4 buffers, 256 threads;
// - eight@168: the same body capped at 168 registers (__maxnreg__), as the apps' kernel is;
// - eight lean@168: the form decision 040 ran in the pool (mma m16n8k4, a chunk's steps not
//   unrolled, 12 fragment values live), capped the same;
// - eight called@168: eight@168's body in a function called, not inlined (kOutOfLine);
// - eight C+=@168 each / by row: eight@168 adding its sums to C (read-modify-write, as an
//   update does) an element at a time, or a row of fragments' old values loaded first;
// - eight C+=@168 shared: the sums through shared memory, added to C a column at a time;
// - six@255 k8 / k4: 256 threads whose first two warps return at once (the role warps' place),
//   the six others staging the chunks (a named barrier of 192) and computing 2 x 3 warp tiles of
//   64 x 48, 64 x 40 and 64 x 40 on mma m16n8k8 or m16n8k4: each warp loads B's fragments for a
//   step first, then A's a row of fragments at a time, beside its 96 or 80 sums.
// Build and run on the GPU machine from the repository root (-Xptxas -v prints each kernel's
// registers and spills, which the same command shows here without a GPU):
//   nvcc -std=c++20 -O3 -gencode=arch=compute_90,code=sm_90 -Xptxas -v -Iinclude -Iapps/gpu \
//     -Ilab/probes lab/probes/six_warp_tile_probe.cu -o /tmp/six && /tmp/six
#include <cuda_runtime.h>

#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "fp64_mma.cuh"

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

constexpr int kBig = 128, kDepth = 16, kStages = 4;
constexpr int kSA = kBig + 4;    // A staged depth-major: as[kk * kSA + r]
constexpr int kSB = kDepth + 4;  // B staged column-major: bs[c * kSB + kk]
constexpr int kStageElems = kDepth * kSA + kBig * kSB;
constexpr std::size_t kShared = sizeof(double) * kStageElems * kStages;

struct Payload {
  const double* a;
  const double* b;
  double* c;
  int k, lda, ldb, ldc, row0;
};

// Chunk of K at k0 into `buffer`, by `threads` threads numbered from 0 (t).
__device__ __forceinline__ void stage(const Payload& p, double* buffer, int k0, int t,
                                      int threads) {
  double* as = buffer;
  double* bs = buffer + kDepth * kSA;
  for (int i = t; i < kBig * kDepth / 2; i += threads) {
    const int r = 2 * (i % (kBig / 2)), kk = i / (kBig / 2);
    lab::copy16(as + kk * kSA + r, p.a + p.row0 + r + static_cast<std::size_t>(k0 + kk) * p.lda);
    const int k2 = 2 * (i % (kDepth / 2)), c = i / (kDepth / 2);
    lab::copy16(bs + c * kSB + k2, p.b + k0 + k2 + static_cast<std::size_t>(c) * p.ldb);
  }
}

// ---- eight warps of 64 x 32 (decision 040's body) ----
// Lean: the form the pool ran (big_update_block.cuh), mma m16n8k4 with the steps of a chunk
// not unrolled, B's fragments first, then A's a row at a time, 12 values beside the 64 sums.
// How a body writes its sums: stored; or added to C (C += A B, read-modify-write as the
// Cholesky update's C -= A B^T) an element at a time, each load after the store before it
// (they might alias), as big_update_block.cuh does; or with one row of fragments' 16 old
// values loaded before any of them is stored, as DgemmTile does.
// Or through shared memory (the staging buffers, free once the last chunk is used): each warp
// puts its sums there, then every thread adds 8 consecutive-row elements at a time to C, their
// old values loaded first, a warp's loads one line of a column.
enum class Epilogue { store, add_each, add_by_row, add_through_shared };

template <bool Lean, Epilogue E = Epilogue::store>
__device__ __forceinline__ void eight_body(const Payload& p, double* buffers) {
  const int t = static_cast<int>(threadIdx.x);
  const int warp = t / 32, lane = t % 32;
  const int g = lane / 4, q = lane % 4;
  const int wm = (warp / 4) * 64, wn = (warp % 4) * 32;
  const int chunks = p.k / kDepth;
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < chunks) stage(p, buffers + s * kStageElems, s * kDepth, t, 256);
    asm volatile("cp.async.commit_group;\n" ::);
  }
  double acc[4][4][4] = {};
  for (int c = 0; c < chunks; ++c) {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(kStages - 2));
    __syncthreads();
    const int next = c + kStages - 1;
    if (next < chunks) stage(p, buffers + (next % kStages) * kStageElems, next * kDepth, t, 256);
    asm volatile("cp.async.commit_group;\n" ::);
    const double* as = buffers + (c % kStages) * kStageElems;
    const double* bs = as + kDepth * kSA;
    if constexpr (Lean) {
#pragma unroll 1
      for (int ks = 0; ks < kDepth; ks += 4) {
        double bf[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) bf[j] = bs[(wn + 8 * j + g) * kSB + ks + q];  // b: (q, g)
#pragma unroll
        for (int i = 0; i < 4; ++i) {  // a: (g, q), (g + 8, q)
          const double af[2] = {as[(ks + q) * kSA + wm + 16 * i + g],
                                as[(ks + q) * kSA + wm + 16 * i + g + 8]};
#pragma unroll
          for (int j = 0; j < 4; ++j) lab::mma_m16n8k4(acc[i][j], af, bf[j]);
        }
      }
      continue;
    }
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
  if constexpr (E == Epilogue::add_through_shared) {
    __syncthreads();         // every warp is done with the staging buffers
    double* tile = buffers;  // 128 x 128, column-major, leading dimension kBig + 1
    constexpr int kLd = kBig + 1;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
#pragma unroll
        for (int r = 0; r < 4; ++r)
          tile[(wm + 16 * i + g + 8 * (r / 2)) + (wn + 8 * j + 2 * q + r % 2) * kLd] = acc[i][j][r];
      }
    }
    __syncthreads();
    // Thread t: rows (t % 32) + 32 u of column t / 32 + 8 v: a warp takes one column.
    const int row = t % 32;
#pragma unroll 1
    for (int v = 0; v < kBig / 8; ++v) {
      const int col = t / 32 + 8 * v;
      double* c_col = p.c + p.row0 + static_cast<std::size_t>(col) * p.ldc;
      double old[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) old[u] = c_col[row + 32 * u];
#pragma unroll
      for (int u = 0; u < 4; ++u) c_col[row + 32 * u] = old[u] + tile[row + 32 * u + col * kLd];
    }
    return;
  }
  // c_r: row g + 8 (r / 2), column 2 q + r % 2 of fragment (i, j).
  auto at = [&](int i, int j, int r) -> double& {
    const int row = p.row0 + wm + 16 * i + g + 8 * (r / 2);
    const int col = wn + 8 * j + 2 * q + r % 2;
    return p.c[row + static_cast<std::size_t>(col) * p.ldc];
  };
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    double old[4][4] = {};
    if constexpr (E == Epilogue::add_by_row) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
#pragma unroll
        for (int r = 0; r < 4; ++r) old[j][r] = at(i, j, r);
      }
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        if constexpr (E == Epilogue::store) at(i, j, r) = acc[i][j][r];
        if constexpr (E == Epilogue::add_each) at(i, j, r) += acc[i][j][r];
        if constexpr (E == Epilogue::add_by_row) at(i, j, r) = old[j][r] + acc[i][j][r];
      }
    }
  }
}

__global__ void __launch_bounds__(256, 1) eight_255(const Payload* payloads) {
  extern __shared__ double buffers[];
  eight_body<false>(payloads[blockIdx.x], buffers);
}

__global__ void __maxnreg__(168) eight_168(const Payload* payloads) {
  extern __shared__ double buffers[];
  eight_body<false>(payloads[blockIdx.x], buffers);
}

__global__ void __maxnreg__(168) eight_lean_168(const Payload* payloads) {
  extern __shared__ double buffers[];
  eight_body<true>(payloads[blockIdx.x], buffers);
}

__global__ void __maxnreg__(168) eight_add_each_168(const Payload* payloads) {
  extern __shared__ double buffers[];
  eight_body<false, Epilogue::add_each>(payloads[blockIdx.x], buffers);
}

__global__ void __maxnreg__(168) eight_add_by_row_168(const Payload* payloads) {
  extern __shared__ double buffers[];
  eight_body<false, Epilogue::add_by_row>(payloads[blockIdx.x], buffers);
}

__global__ void __maxnreg__(168) eight_add_through_shared_168(const Payload* payloads) {
  extern __shared__ double buffers[];
  eight_body<false, Epilogue::add_through_shared>(payloads[blockIdx.x], buffers);
}

// The body called, not inlined, as the pool calls a task type with kOutOfLine.
__device__ __noinline__ void eight_called_body(const Payload& p, double* buffers) {
  eight_body<false>(p, buffers);
}

__global__ void __maxnreg__(168) eight_called_168(const Payload* payloads) {
  extern __shared__ double buffers[];
  eight_called_body(payloads[blockIdx.x], buffers);
}

// ---- six warps: 2 x 3 warp tiles of 64 x (8 NJ) ----
constexpr int kRoleThreads = 64, kTaskThreads = 192;

__device__ __forceinline__ void task_sync() {
  asm volatile("bar.sync 1, %0;\n" ::"n"(kTaskThreads) : "memory");
}

template <int NJ, bool K8>
__device__ __forceinline__ void six_body(const Payload& p, double* buffers, int t, int wm, int wn) {
  const int lane = t % 32, g = lane / 4, q = lane % 4;
  const int chunks = p.k / kDepth;
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < chunks) stage(p, buffers + s * kStageElems, s * kDepth, t, kTaskThreads);
    asm volatile("cp.async.commit_group;\n" ::);
  }
  double acc[4][NJ][4] = {};
  for (int c = 0; c < chunks; ++c) {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(kStages - 2));
    task_sync();  // chunk c is visible; chunk c - 1's buffer is free
    const int next = c + kStages - 1;
    if (next < chunks) {
      stage(p, buffers + (next % kStages) * kStageElems, next * kDepth, t, kTaskThreads);
    }
    asm volatile("cp.async.commit_group;\n" ::);
    // One base a warp for each operand: every fragment is then at a constant offset from it.
    const double* a_at = buffers + (c % kStages) * kStageElems + q * kSA + wm + g;
    const double* b_at = buffers + (c % kStages) * kStageElems + kDepth * kSA + (wn + g) * kSB + q;
    if constexpr (K8) {
#pragma unroll
      for (int ks = 0; ks < kDepth; ks += 8) {
        double bf[NJ][2];
#pragma unroll
        for (int j = 0; j < NJ; ++j) {
#pragma unroll
          for (int r = 0; r < 2; ++r) bf[j][r] = b_at[8 * j * kSB + ks + 4 * r];  // (q + 4 r, g)
        }
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          double af[4];
#pragma unroll
          for (int r = 0; r < 4; ++r)  // a_r: row g + 8 (r % 2), column q + 4 (r / 2)
            af[r] = a_at[(ks + 4 * (r / 2)) * kSA + 16 * i + 8 * (r % 2)];
#pragma unroll
          for (int j = 0; j < NJ; ++j) lab::mma_m16n8k8(acc[i][j], af, bf[j]);
        }
      }
    } else {
#pragma unroll
      for (int ks = 0; ks < kDepth; ks += 4) {
        double bf[NJ];
#pragma unroll
        for (int j = 0; j < NJ; ++j) bf[j] = b_at[8 * j * kSB + ks];  // b: (q, g)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const double af[2] = {a_at[ks * kSA + 16 * i],
                                a_at[ks * kSA + 16 * i + 8]};  // (g, q), (g + 8, q)
#pragma unroll
          for (int j = 0; j < NJ; ++j) lab::mma_m16n8k4(acc[i][j], af, bf[j]);
        }
      }
    }
  }
  asm volatile("cp.async.wait_group 0;\n" ::);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#pragma unroll
    for (int j = 0; j < NJ; ++j) {
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int row = p.row0 + wm + 16 * i + g + 8 * (r / 2);
        const int col = wn + 8 * j + 2 * q + r % 2;
        p.c[row + static_cast<std::size_t>(col) * p.ldc] = acc[i][j][r];
      }
    }
  }
}

template <bool K8>
__device__ __forceinline__ void six_tile(const Payload* payloads, double* buffers) {
  if (threadIdx.x < kRoleThreads) return;  // the role warps' place
  const Payload p = payloads[blockIdx.x];
  const int t = static_cast<int>(threadIdx.x) - kRoleThreads;
  const int w = t / 32, wm = (w / 3) * 64, col_group = w % 3;
  if (col_group == 0) {
    six_body<6, K8>(p, buffers, t, wm, 0);
  } else {
    six_body<5, K8>(p, buffers, t, wm, col_group == 1 ? 48 : 88);
  }
}

__global__ void __launch_bounds__(256, 1) six_k8(const Payload* payloads) {
  extern __shared__ double buffers[];
  six_tile<true>(payloads, buffers);
}

__global__ void __launch_bounds__(256, 1) six_k4(const Payload* payloads) {
  extern __shared__ double buffers[];
  six_tile<false>(payloads, buffers);
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
  std::vector<double> reference;  // C = A B on the host, computed once
  double max_error() {
    if (reference.empty()) {
      reference.assign(std::size_t(m) * n, 0.0);
      for (int j = 0; j < n; ++j) {
        for (int l = 0; l < k; ++l) {
          const double blj = b[l + std::size_t(j) * k];
          for (int i = 0; i < m; ++i)
            reference[i + std::size_t(j) * m] += a[i + std::size_t(l) * m] * blj;
        }
      }
    }
    std::vector<double> c(std::size_t(m) * n);
    cudaMemcpy(c.data(), dc, sizeof(double) * c.size(), cudaMemcpyDeviceToHost);
    double e = 0;
    for (std::size_t i = 0; i < c.size(); ++i) e = std::max(e, std::abs(reference[i] - c[i]));
    return e;
  }
};

// Median of 10 timed launches after 2 warm-up ones, C zeroed before each.
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
    // A kernel that hangs is reported as such instead of holding the probe forever.
    for (int waited_ms = 0; cudaEventQuery(e1) == cudaErrorNotReady; ++waited_ms) {
      if (waited_ms > 5000) {
        std::printf(" HUNG\n");
        std::fflush(stdout);
        std::_Exit(2);
      }
      usleep(1000);
    }
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
  (void)pr.max_error();  // the reference, before any timing
  const double flops = 2.0 * m * n * k;
  std::vector<Payload> tiles;
  for (int row = 0; row < m; row += kBig)
    tiles.push_back(Payload{pr.da, pr.db, pr.dc, k, m, k, m, row});
  Payload* dtiles;
  check(cudaMalloc(&dtiles, sizeof(Payload) * tiles.size()), "payloads");
  cudaMemcpy(dtiles, tiles.data(), sizeof(Payload) * tiles.size(), cudaMemcpyHostToDevice);
  const int blocks = static_cast<int>(tiles.size());
  std::printf("K = %4d, %d tiles:", k, blocks);
  auto run = [&](const char* name, void (*kernel)(const Payload*)) {
    std::printf(" | %s", name);
    std::fflush(stdout);
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(kShared)),
          "smem");
    const double us = median_us([&] { kernel<<<blocks, 256, kShared>>>(dtiles); }, pr);
    std::printf(" %7.1f us %5.1f TFLOP/s (error %.1e)", us, flops / (us * 1e-6) / 1e12,
                pr.max_error());
    std::fflush(stdout);
  };
  run("eight@255", eight_255);
  run("eight@168", eight_168);
  run("eight lean@168", eight_lean_168);
  run("eight called@168", eight_called_168);
  run("eight C+=@168 each", eight_add_each_168);
  run("eight C+=@168 by row", eight_add_by_row_168);
  run("eight C+=@168 shared", eight_add_through_shared_168);
  run("six@255 k8", six_k8);
  run("six@255 k4", six_k4);
  std::printf("\n");
  cudaFree(dtiles);
}

}  // namespace

int main() {
  int sms = 0;
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "SMs");
  for (int k : {64, 128, 512, 2048}) compare(sms, k);
  return 0;
}
