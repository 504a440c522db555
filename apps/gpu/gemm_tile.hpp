// apps/gpu/gemm_tile.hpp - one 64x64 tile of C = alpha A B + beta C as a GPU-pool task: the body
// of the batched GEMM application (docs/apps.md). Written against the public API only.
//
// Matrices are column-major (either operand may be given transposed). A task computes the tile
// whose top-left element is (row0, col0), over all of K in chunks of kDepth: each chunk of A
// (kTile x kDepth) and B (kDepth x kTile) is staged in the block's shared memory. On a GPU block
// of at least 128 task threads, FP64 runs on the tensor cores (mma m8n8k4, exact FP64: each of
// 4 warps owns a 32 x 32 quarter), FP32 on the scalar units, each thread owning a "micro tile"
// of 8 x 4 sums in registers; the host backend's single thread owns all 128 micro tiles. Fewer
// GPU threads than 128 take the plain path (each output summed straight from global memory).
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
  // Both staged operands are depth-major (as[kk * kStride + r], bs[kk * kStride + c]); the
  // padding of 4 puts the 8 x 4 element fragments of an FP64 mma on distinct banks.
  static constexpr int kStride = kTile + 4;
  // Two buffers of a chunk of A and one of B: on the GPU the next chunk is copied in (cp.async)
  // while the tensor cores or the scalar units work on this one.
  static constexpr int kBufferElems = 2 * kDepth * kStride;
  static constexpr std::size_t kSharedBytes =
      sizeof(T) * 2 * static_cast<std::size_t>(kBufferElems);

  struct Payload {
    const T* a;
    const T* b;
    T* c;
    int m, n, k;
    int lda, ldb, ldc;
    int row0, col0;
    T alpha, beta;
    // Layouts: A(r, kk) is a[r + kk lda], or a[kk + r lda] when a_transposed (A row-major);
    // B(kk, c) is b[kk + c ldb], or b[c + kk ldb] when b_transposed. lower_only: only the
    // elements of C on or below its diagonal (row >= column) are written.
    bool a_transposed = false;
    bool b_transposed = false;
    bool lower_only = false;
    // c_through_shared: the block gathers its tile of C in shared memory and writes it out a
    // column at a time, each warp's store one whole line. For a C in mapped host memory, where
    // every partial line a warp stores is a PCIe write of its own; the same results either way
    // (the plain path, below 128 GPU threads, writes directly).
    bool c_through_shared = false;
  };
  static_assert(kSharedBytes >= sizeof(T) * kTile * kTile,
                "the staging buffers hold the whole tile of C for c_through_shared");

  WEFT_HD static void run(Payload& payload, const weft::gpu::BlockContext& ctx) {
    // The body reads a copy: `payload` lives in the block's shared memory, where the staging
    // stores would make the compiler read its fields again at every use (docs/gpu.md, "Task
    // types"). The body writes nothing back into it.
    const Payload p = payload;
#if defined(__CUDA_ARCH__)
    if (ctx.threads() < kMicroTiles) {
      plain(p, ctx);
      return;
    }
    if constexpr (kUseMma) {
      run_mma(p, ctx);
      return;
    }
#endif
    T acc[kMaxMicroPerThread][kMicroRows][kMicroCols] = {};
    accumulate(p, ctx, acc);
    if (p.c_through_shared) {
      T* tile = gathering_tile(ctx);
      for (int i = 0; i < kMaxMicroPerThread; ++i) {
        const int v = ctx.thread() + i * ctx.threads();
        if (v < kMicroTiles) gather(tile, micro_row(v), micro_col(v), acc[i]);
      }
      write_gathered(p, ctx, tile);
      return;
    }
    for (int i = 0; i < kMaxMicroPerThread; ++i) {
      const int v = ctx.thread() + i * ctx.threads();
      if (v < kMicroTiles) write_back(p, v, acc[i]);
    }
  }

  // Micro tile v: rows (v / 16) * 8 .. + 8, columns (v % 16) * 4 .. + 4 of the tile.
  WEFT_HD static int micro_row(int v) { return (v / (kTile / kMicroCols)) * kMicroRows; }
  WEFT_HD static int micro_col(int v) { return (v % (kTile / kMicroCols)) * kMicroCols; }

#if defined(__CUDA_ARCH__)
  static constexpr int kMaxMicroPerThread = 1;
#else
  static constexpr int kMaxMicroPerThread = kMicroTiles;
#endif

  /// The sums of A B over all of K for the micro tiles of this thread (thread + i threads()),
  /// on the scalar (SIMT) path: the caller needs at least kMicroTiles / kMaxMicroPerThread
  /// threads. Every thread of the block must call it (it synchronizes).
  WEFT_HD APPS_GEMM_INLINE static void accumulate(
      const Payload& p, const weft::gpu::BlockContext& ctx,
      T (&acc)[kMaxMicroPerThread][kMicroRows][kMicroCols]) {
    for_each_chunk(p, ctx, [&](const T* as, const T* bs) {
      for (int i = 0; i < kMaxMicroPerThread; ++i) {
        const int v = ctx.thread() + i * ctx.threads();
        if (v < kMicroTiles) multiply(as, bs, v, acc[i]);
      }
    });
  }

  /// Calls use(as, bs) for each chunk of K in order, with the chunk staged in shared memory
  /// (as[kk * kStride + r], bs[kk * kStride + c]) and visible to every thread; every thread of
  /// the block must call it (it synchronizes).
  template <class Use>
  WEFT_HD APPS_GEMM_INLINE static void for_each_chunk(const Payload& p,
                                                      const weft::gpu::BlockContext& ctx,
                                                      Use&& use) {
    T* buffers = static_cast<T*>(ctx.shared());
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    // Chunk c is in buffer c % 2; chunk c + 1 is on its way while c is used.
    const int chunks = (p.k + kDepth - 1) / kDepth;
    if (chunks <= 0) return;  // no copy group left behind to land in the next task's memory
    stage_async(p, ctx, buffers, 0);
    for (int c = 0; c < chunks; ++c) {
      T* here = buffers + (c % 2) * kBufferElems;
      if (c + 1 < chunks) {
        stage_async(p, ctx, buffers + ((c + 1) % 2) * kBufferElems, (c + 1) * kDepth);
        asm volatile("cp.async.wait_group 1;\n" ::);  // all but the newest group have landed
      } else {
        asm volatile("cp.async.wait_group 0;\n" ::);
      }
      ctx.sync();  // every thread's copies of chunk c are visible
      use(here, here + kDepth * kStride);
      ctx.sync();  // chunk c's buffer is free for chunk c + 2
    }
#else
    for (int k0 = 0; k0 < p.k; k0 += kDepth) {
      stage(p, ctx, buffers, buffers + kDepth * kStride, k0);
      ctx.sync();
      use(buffers, buffers + kDepth * kStride);
      ctx.sync();  // the next chunk overwrites the buffer
    }
#endif
  }

 private:
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  // FP64 on tensor cores (mma m8n8k4: exact FP64 products and sums).
  static constexpr bool kUseMma = sizeof(T) == 8;
#else
  static constexpr bool kUseMma = false;
#endif

  // The chunk of K at k0 (zeros past the matrices' edges). Each thread issues its loads in
  // groups of kStageBatch before it stores any, so that their trips to memory overlap instead
  // of each waiting for the one before; consecutive threads read consecutive addresses.
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
        const int ar = a_row(p, i), ak = a_depth(p, i), bc = b_col(p, i), bk = b_depth(p, i);
        const int row = p.row0 + ar, col = p.col0 + bc;
        if (row < p.m && k0 + ak < p.k) {
          va[u] = p.a_transposed ? p.a[k0 + ak + static_cast<std::size_t>(row) * p.lda]
                                 : p.a[row + static_cast<std::size_t>(k0 + ak) * p.lda];
        }
        if (col < p.n && k0 + bk < p.k) {
          vb[u] = p.b_transposed ? p.b[col + static_cast<std::size_t>(k0 + bk) * p.ldb]
                                 : p.b[k0 + bk + static_cast<std::size_t>(col) * p.ldb];
        }
      }
      for (int u = 0; u < kStageBatch; ++u) {
        const int i = base + u * nt;
        if (i >= kElems) break;
        as[a_depth(p, i) * kStride + a_row(p, i)] = va[u];
        bs[b_depth(p, i) * kStride + b_col(p, i)] = vb[u];
      }
    }
  }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  // The chunk of K at k0 into `buffer` (A, then B) by asynchronous copies, one commit group per
  // chunk; an element past the matrices' edges is a copy of 0 bytes, which zero-fills it.
  __device__ __forceinline__ static void stage_async(const Payload& p,
                                                     const weft::gpu::BlockContext& ctx, T* buffer,
                                                     int k0) {
    constexpr int kElems = kTile * kDepth;
    T* as = buffer;
    T* bs = buffer + kDepth * kStride;
    for (int i = ctx.thread(); i < kElems; i += ctx.threads()) {
      const int ar = a_row(p, i), ak = a_depth(p, i), bc = b_col(p, i), bk = b_depth(p, i);
      const int row = p.row0 + ar, col = p.col0 + bc;
      const bool a_in = row < p.m && k0 + ak < p.k, b_in = col < p.n && k0 + bk < p.k;
      const T* a = !a_in            ? p.a
                   : p.a_transposed ? p.a + k0 + ak + static_cast<std::size_t>(row) * p.lda
                                    : p.a + row + static_cast<std::size_t>(k0 + ak) * p.lda;
      const T* b = !b_in            ? p.b
                   : p.b_transposed ? p.b + col + static_cast<std::size_t>(k0 + bk) * p.ldb
                                    : p.b + k0 + bk + static_cast<std::size_t>(col) * p.ldb;
      copy_async(as + ak * kStride + ar, a, a_in);
      copy_async(bs + bk * kStride + bc, b, b_in);
    }
    asm volatile("cp.async.commit_group;\n" ::);
  }
  __device__ __forceinline__ static void copy_async(T* to, const T* from, bool in) {
    const auto shared = static_cast<unsigned>(__cvta_generic_to_shared(to));
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(shared), "l"(from),
                 "n"(sizeof(T)), "r"(in ? static_cast<int>(sizeof(T)) : 0));
  }
#endif
  // Element i of a staged chunk: consecutive i are consecutive addresses in global memory.
  WEFT_HD static int a_row(const Payload& p, int i) {
    return p.a_transposed ? i / kDepth : i % kTile;
  }
  WEFT_HD static int a_depth(const Payload& p, int i) {
    return p.a_transposed ? i % kDepth : i / kTile;
  }
  WEFT_HD static int b_col(const Payload& p, int i) {
    return p.b_transposed ? i % kTile : i / kDepth;
  }
  WEFT_HD static int b_depth(const Payload& p, int i) {
    return p.b_transposed ? i / kTile : i % kDepth;
  }
  WEFT_HD APPS_GEMM_INLINE static void multiply(const T* as, const T* bs, int v,
                                                T (&acc)[kMicroRows][kMicroCols]) {
    const int rb = micro_row(v), cb = micro_col(v);
    for (int kk = 0; kk < kDepth; ++kk) {
      T a[kMicroRows], b[kMicroCols];
      for (int i = 0; i < kMicroRows; ++i) a[i] = as[kk * kStride + rb + i];
      for (int j = 0; j < kMicroCols; ++j) b[j] = bs[kk * kStride + cb + j];
      for (int i = 0; i < kMicroRows; ++i) {
        for (int j = 0; j < kMicroCols; ++j) acc[i][j] += a[i] * b[j];
      }
    }
  }
  // Whether C(row, col) is written: inside the matrix and, with lower_only, on or below the
  // diagonal.
  WEFT_HD APPS_GEMM_INLINE static bool writes(const Payload& p, int row, int col) {
    return row < p.m && col < p.n && !(p.lower_only && row < col);
  }
  // C(row, col) before the task (0 where it is not written).
  WEFT_HD APPS_GEMM_INLINE static T load(const Payload& p, int row, int col) {
    return writes(p, row, col) ? p.c[row + static_cast<std::size_t>(col) * p.ldc] : T(0);
  }
  // C(row, col) = alpha sum + beta old, as the payload asks (beta == 0 ignores old).
  WEFT_HD APPS_GEMM_INLINE static void store(const Payload& p, int row, int col, T sum, T old) {
    if (!writes(p, row, col)) return;
    p.c[row + static_cast<std::size_t>(col) * p.ldc] =
        p.beta == T(0) ? p.alpha * sum : p.alpha * sum + p.beta * old;
  }
  // c_through_shared: the tile of C, column-major with leading dimension kTile, in the staging
  // buffers. They are free: for_each_chunk ends with a barrier after the last chunk's use, and
  // with no chunk (k = 0) nothing of this task used them.
  WEFT_HD APPS_GEMM_INLINE static T* gathering_tile(const weft::gpu::BlockContext& ctx) {
    return static_cast<T*>(ctx.shared());
  }
  WEFT_HD APPS_GEMM_INLINE static void gather(T* tile, int rb, int cb,
                                              const T (&acc)[kMicroRows][kMicroCols]) {
    for (int j = 0; j < kMicroCols; ++j) {
      for (int i = 0; i < kMicroRows; ++i) tile[(rb + i) + (cb + j) * kTile] = acc[i][j];
    }
  }
  // Every thread of the block calls it once its sums are in `tile`: consecutive threads take
  // consecutive rows of a column, so a warp loads and stores one line of C at a time.
  WEFT_HD APPS_GEMM_INLINE static void write_gathered(const Payload& p,
                                                      const weft::gpu::BlockContext& ctx,
                                                      const T* tile) {
    ctx.sync();  // every thread's sums are in the tile
    for (int e = ctx.thread(); e < kTile * kTile; e += ctx.threads()) {
      const int row = p.row0 + e % kTile, col = p.col0 + e / kTile;
      store(p, row, col, tile[e], p.beta == T(0) ? T(0) : load(p, row, col));
    }
  }
  // The micro tile's old values are all loaded before any is written (see run_mma).
  WEFT_HD APPS_GEMM_INLINE static void write_back(const Payload& p, int v,
                                                  const T (&acc)[kMicroRows][kMicroCols]) {
    const int rb = micro_row(v), cb = micro_col(v);
    T old[kMicroRows][kMicroCols] = {};
    if (p.beta != T(0)) {
      for (int j = 0; j < kMicroCols; ++j) {
        for (int i = 0; i < kMicroRows; ++i) old[i][j] = load(p, p.row0 + rb + i, p.col0 + cb + j);
      }
    }
    for (int j = 0; j < kMicroCols; ++j) {
      for (int i = 0; i < kMicroRows; ++i)
        store(p, p.row0 + rb + i, p.col0 + cb + j, acc[i][j], old[i][j]);
    }
  }
  // Fewer than 128 task threads on a GPU: each output summed from global memory.
  WEFT_HD APPS_GEMM_INLINE static void plain(const Payload& p, const weft::gpu::BlockContext& ctx) {
    for (int i = ctx.thread(); i < kTile * kTile; i += ctx.threads()) {
      const int row = p.row0 + i % kTile, col = p.col0 + i / kTile;
      if (row >= p.m || col >= p.n) continue;
      T sum = T(0);
      for (int d = 0; d < p.k; ++d) {
        const T x = p.a_transposed ? p.a[d + static_cast<std::size_t>(row) * p.lda]
                                   : p.a[row + static_cast<std::size_t>(d) * p.lda];
        const T y = p.b_transposed ? p.b[col + static_cast<std::size_t>(d) * p.ldb]
                                   : p.b[d + static_cast<std::size_t>(col) * p.ldb];
        sum += x * y;
      }
      store(p, row, col, sum, p.beta == T(0) ? T(0) : load(p, row, col));
    }
  }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  // d += a b for one 8x8x4 FP64 fragment: lane l holds A(l / 4, l % 4), B(l % 4, l / 4) and
  // D(l / 4, 2 (l % 4) + h), h = 0, 1 (the PTX ISA's m8n8k4 .f64 layout).
  __device__ __forceinline__ static void mma(double (&d)[2], double a, double b) {
    asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0,%1}, {%2}, {%3}, {%0,%1};"
                 : "+d"(d[0]), "+d"(d[1])
                 : "d"(a), "d"(b));
  }
  // Warps 0-3 each own a 32 x 32 quarter of the tile as 4 x 4 fragments of 8 x 8.
  __device__ __forceinline__ static void run_mma(const Payload& p,
                                                 const weft::gpu::BlockContext& ctx) {
    const int warp = ctx.thread() / 32, lane = ctx.thread() % 32;
    const int g = lane / 4, q = lane % 4;
    const int wm = (warp / 2) * 32, wn = (warp % 2) * 32;
    double acc[4][4][2] = {};
    for_each_chunk(p, ctx, [&](const T* as, const T* bs) {
      if (warp >= 4) return;
#pragma unroll
      for (int ks = 0; ks < kDepth; ks += 4) {
        const T* ar = as + (ks + q) * kStride + wm + g;
        const T* br = bs + (ks + q) * kStride + wn + g;
        double af[4], bf[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) af[i] = ar[i * 8];
#pragma unroll
        for (int j = 0; j < 4; ++j) bf[j] = br[j * 8];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
#pragma unroll
          for (int j = 0; j < 4; ++j) mma(acc[i][j], af[i], bf[j]);
        }
      }
    });
    if (p.c_through_shared) {
      T* tile = gathering_tile(ctx);
      if (warp < 4) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const int r = wm + i * 8 + g, c = wn + j * 8 + 2 * q;
            tile[r + c * kTile] = acc[i][j][0];
            tile[r + (c + 1) * kTile] = acc[i][j][1];
          }
        }
      }
      write_gathered(p, ctx, tile);
      return;
    }
    if (warp >= 4) return;
#pragma unroll
    for (int half = 0; half < 4; half += 2) {
      // C's old values of two rows of fragments are loaded before any of them is written:
      // interleaved, each load would wait for the store before it (they might alias), one
      // trip to memory per element; all four rows at once would spill. (Unrolled: acc is
      // indexed by half, which must be a constant to stay in registers.)
      double old[2][4][2] = {};
      if (p.beta != 0.0) {
#pragma unroll
        for (int i = 0; i < 2; ++i) {
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const int row = p.row0 + wm + (half + i) * 8 + g, col = p.col0 + wn + j * 8 + 2 * q;
            old[i][j][0] = load(p, row, col);
            old[i][j][1] = load(p, row, col + 1);
          }
        }
      }
#pragma unroll
      for (int i = 0; i < 2; ++i) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int row = p.row0 + wm + (half + i) * 8 + g, col = p.col0 + wn + j * 8 + 2 * q;
          store(p, row, col, acc[half + i][j][0], old[i][j][0]);
          store(p, row, col + 1, acc[half + i][j][1], old[i][j][1]);
        }
      }
    }
  }
#endif
};

/// The task types: one per element type (ids 101 and 102).
using DgemmTile = GemmTileBody<double, 101>;
using SgemmTile = GemmTileBody<float, 102>;

}  // namespace apps::gpu
