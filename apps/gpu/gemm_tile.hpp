// apps/gpu/gemm_tile.hpp - one 64x64 tile of C = alpha A B + beta C as a GPU-pool task: the body
// of the batched GEMM application (docs/apps.md). Written against the public API only.
//
// Matrices are column-major. A task computes the tile whose top-left element is (row0, col0),
// over all of K in chunks of kDepth: each chunk of A (kTile x kDepth) and B (kDepth x kTile) is
// staged in the block's shared memory, and each of 128 "micro tiles" of 8 x 4 outputs keeps its
// sums in registers. On a GPU block of at least 128 task threads each thread owns one micro
// tile; the host backend's single thread owns them all. Fewer GPU threads than 128 take the
// plain path (each output summed straight from global memory).
#pragma once

#include <cstddef>
#include <cstdint>

#include <weft/gpu/task.hpp>

// The body's helpers are forced inline on the device: a helper compiled as a call would take
// its sums by reference, which puts them in local memory instead of registers.
#if defined(__CUDACC__)
#define APPS_GEMM_INLINE __forceinline__
#else
#define APPS_GEMM_INLINE inline
#endif

namespace apps::gpu {

template <class T, std::uint32_t Id>
struct GemmTileBody {
  static constexpr std::uint32_t kId = Id;
  static constexpr int kTile = 64;   // rows and columns of C per task
  static constexpr int kDepth = 32;  // K per staged chunk
  static constexpr int kMicroRows = 8, kMicroCols = 4;
  static constexpr int kMicroTiles = (kTile / kMicroRows) * (kTile / kMicroCols);  // 128
  static constexpr int kBStride = kDepth + 1;  // padded: fewer shared-memory bank conflicts
  static constexpr std::size_t kSharedBytes =
      sizeof(T) *
      (static_cast<std::size_t>(kDepth) * kTile + static_cast<std::size_t>(kTile) * kBStride);

  struct Payload {
    const T* a;
    const T* b;
    T* c;
    int m, n, k;
    int lda, ldb, ldc;
    int row0, col0;
    T alpha, beta;
  };

  WEFT_HD static void run(Payload& p, const weft::gpu::BlockContext& ctx) {
#if defined(__CUDA_ARCH__)
    constexpr int kMaxMicroPerThread = 1;
#else
    constexpr int kMaxMicroPerThread = kMicroTiles;
#endif
    const int nt = ctx.threads();
    if (nt * kMaxMicroPerThread < kMicroTiles) {
      plain(p, ctx);
      return;
    }
    T* as = static_cast<T*>(ctx.shared());  // as[kk * kTile + r]
    T* bs = as + kDepth * kTile;            // bs[c * kBStride + kk]
    T acc[kMaxMicroPerThread][kMicroRows][kMicroCols] = {};
    for (int k0 = 0; k0 < p.k; k0 += kDepth) {
      stage(p, ctx, as, bs, k0);
      ctx.sync();
      for (int i = 0; i < kMaxMicroPerThread; ++i) {
        const int v = ctx.thread() + i * nt;
        if (v < kMicroTiles) multiply(as, bs, v, acc[i]);
      }
      ctx.sync();  // the next chunk overwrites as and bs
    }
    for (int i = 0; i < kMaxMicroPerThread; ++i) {
      const int v = ctx.thread() + i * nt;
      if (v < kMicroTiles) write_back(p, v, acc[i]);
    }
  }

 private:
  // The chunk of K at k0 (zeros past the matrices' edges). Each thread issues its loads in
  // groups of kStageBatch before it stores any, so that their trips to memory overlap instead
  // of each waiting for the one before.
  static constexpr int kStageBatch = 8;
  WEFT_HD APPS_GEMM_INLINE static void stage(const Payload& p, const weft::gpu::BlockContext& ctx,
                                             T* as, T* bs, int k0) {
    constexpr int kElems = kTile * kDepth;
    const int nt = ctx.threads();
    for (int base = ctx.thread(); base < kElems; base += kStageBatch * nt) {
      T va[kStageBatch], vb[kStageBatch];
      for (int u = 0; u < kStageBatch; ++u) {
        const int i = base + u * nt;
        va[u] = vb[u] = T(0);
        if (i >= kElems) continue;
        {  // A: consecutive threads take consecutive rows of a column
          const int row = p.row0 + i % kTile, depth = k0 + i / kTile;
          if (row < p.m && depth < p.k) va[u] = p.a[row + static_cast<std::size_t>(depth) * p.lda];
        }
        {  // B: consecutive threads go down a column
          const int depth = k0 + i % kDepth, col = p.col0 + i / kDepth;
          if (col < p.n && depth < p.k) vb[u] = p.b[depth + static_cast<std::size_t>(col) * p.ldb];
        }
      }
      for (int u = 0; u < kStageBatch; ++u) {
        const int i = base + u * nt;
        if (i >= kElems) break;
        as[(i / kTile) * kTile + i % kTile] = va[u];
        bs[(i / kDepth) * kBStride + i % kDepth] = vb[u];
      }
    }
  }
  // Micro tile v: rows (v / 16) * 8 .. + 8, columns (v % 16) * 4 .. + 4 of the tile.
  WEFT_HD APPS_GEMM_INLINE static void multiply(const T* as, const T* bs, int v,
                                                T (&acc)[kMicroRows][kMicroCols]) {
    const int rb = (v / (kTile / kMicroCols)) * kMicroRows;
    const int cb = (v % (kTile / kMicroCols)) * kMicroCols;
    for (int kk = 0; kk < kDepth; ++kk) {
      T a[kMicroRows], b[kMicroCols];
      for (int i = 0; i < kMicroRows; ++i) a[i] = as[kk * kTile + rb + i];
      for (int j = 0; j < kMicroCols; ++j) b[j] = bs[(cb + j) * kBStride + kk];
      for (int i = 0; i < kMicroRows; ++i) {
        for (int j = 0; j < kMicroCols; ++j) acc[i][j] += a[i] * b[j];
      }
    }
  }
  WEFT_HD APPS_GEMM_INLINE static void write_back(const Payload& p, int v,
                                                  const T (&acc)[kMicroRows][kMicroCols]) {
    const int rb = (v / (kTile / kMicroCols)) * kMicroRows;
    const int cb = (v % (kTile / kMicroCols)) * kMicroCols;
    for (int j = 0; j < kMicroCols; ++j) {
      const int col = p.col0 + cb + j;
      if (col >= p.n) break;
      for (int i = 0; i < kMicroRows; ++i) {
        const int row = p.row0 + rb + i;
        if (row >= p.m) break;
        T& c = p.c[row + static_cast<std::size_t>(col) * p.ldc];
        c = p.beta == T(0) ? p.alpha * acc[i][j] : p.alpha * acc[i][j] + p.beta * c;
      }
    }
  }
  // Fewer than 128 task threads on a GPU: each output summed from global memory.
  WEFT_HD APPS_GEMM_INLINE static void plain(const Payload& p, const weft::gpu::BlockContext& ctx) {
    for (int i = ctx.thread(); i < kTile * kTile; i += ctx.threads()) {
      const int row = p.row0 + i % kTile, col = p.col0 + i / kTile;
      if (row >= p.m || col >= p.n) continue;
      T sum = T(0);
      for (int d = 0; d < p.k; ++d) {
        sum += p.a[row + static_cast<std::size_t>(d) * p.lda] *
               p.b[d + static_cast<std::size_t>(col) * p.ldb];
      }
      T& c = p.c[row + static_cast<std::size_t>(col) * p.ldc];
      c = p.beta == T(0) ? p.alpha * sum : p.alpha * sum + p.beta * c;
    }
  }
};

/// The task types: one per element type (ids 101 and 102).
using DgemmTile = GemmTileBody<double, 101>;
using SgemmTile = GemmTileBody<float, 102>;

}  // namespace apps::gpu
