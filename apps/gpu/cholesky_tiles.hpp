// apps/gpu/cholesky_tiles.hpp - the tile tasks of the tiled Cholesky application (seed 000
// §4.2; docs/apps.md): A = L L^T, lower triangle, FP64, column-major, tiles of kTile x kTile.
// Each task works in place on tiles of one matrix of leading dimension lda:
//   POTRF  A_kk = L_kk L_kk^T                      (the diagonal tile)
//   TRSM   A_ik = A_ik L_kk^-T                     (below the diagonal)
//   SYRK   A_ii = A_ii - A_ik A_ik^T               (lower triangle of a diagonal tile)
//   GEMM   A_ij = A_ij - A_ik A_jk^T
// Bodies are correct for any block size (the host backend's one thread included): work is
// split over the task threads with ctx.sync() between dependent steps.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include <weft/gpu/task.hpp>

#include "gemm_tile.hpp"

namespace apps::gpu {

struct CholeskyTile {
  static constexpr int kTile = 64;
  // Tile (r, c) of the matrix at `a` (tile indices).
  WEFT_HD static double* at(double* a, int lda, int r, int c) {
    return a + static_cast<std::size_t>(c) * kTile * lda + static_cast<std::size_t>(r) * kTile;
  }
};

// How the task threads share a step's updates of a kTile x kTile tile: with at least kTile
// threads, thread t keeps row t % kTile and takes every `lanes`-th column from t / kTile (so a
// warp updates 32 consecutive rows of one column, and what a row shares stays in registers);
// with fewer (the host backend's one thread), each takes rows t, t + threads, ... and every
// column. Threads past lanes x kTile sit the updates out.
struct TileThreads {
  int first_row, row_step, first_lane, lanes;
  WEFT_HD explicit TileThreads(const weft::gpu::BlockContext& ctx) {
    constexpr int n = CholeskyTile::kTile;
    const int t = ctx.thread(), nt = ctx.threads();
    const bool wide = nt >= n;
    first_row = wide ? t % n : t;
    row_step = wide ? n : nt;
    first_lane = wide ? t / n : 0;
    lanes = wide ? nt / n : 1;
  }
  [[nodiscard]] WEFT_HD bool idle() const { return first_lane >= lanes; }
};

struct PotrfTile {
  static constexpr std::uint32_t kId = 111;
  static constexpr std::size_t kSharedBytes =
      sizeof(double) * CholeskyTile::kTile * CholeskyTile::kTile;
  struct Payload {
    double* a;
    int lda, k;
    int info;  // 0, or j + 1 when the tile's leading minor of order j + 1 is not positive
  };
  WEFT_HD static void run(Payload& p, const weft::gpu::BlockContext& ctx) {
#if defined(__CUDA_ARCH__)
    if (ctx.threads() >= 2 * CholeskyTile::kTile) {
      run_in_registers(p, ctx);
      return;
    }
#endif
    constexpr int n = CholeskyTile::kTile;
    double* t = CholeskyTile::at(p.a, p.lda, p.k, p.k);
    auto* s = static_cast<double*>(ctx.shared());  // the tile, column-major, ld n
    for (int i = ctx.thread(); i < n * n; i += ctx.threads())
      s[i] = t[(i % n) + static_cast<std::size_t>(i / n) * p.lda];
    ctx.sync();
    // Step j: every thread reads the pivot d = s[j][j], updates its share of the trailing
    // lower triangle with L_ij L_lj = s[i][j] s[l][j] / d, and after the step's barrier scales
    // column j (which no later step reads or writes) while the next step runs.
    const TileThreads share(ctx);
    int info = 0;
    for (int j = 0; j < n; ++j) {
      const double d = s[j + j * n];
      if (!(d > 0.0)) {  // also NaN; every thread sees the same d and leaves at the same step
        info = j + 1;
        break;
      }
      const double inverse = 1.0 / d;
      if (!share.idle()) {
        for (int i = share.first_row; i < n; i += share.row_step) {
          if (i <= j) continue;
          const double lij = s[i + j * n] * inverse;
          for (int l = j + 1 + share.first_lane; l <= i; l += share.lanes)
            s[i + l * n] -= lij * s[l + j * n];
        }
      }
      ctx.sync();  // the trailing update read column j; step j + 1's pivot is final
      const double root = std::sqrt(d);
      for (int i = j + ctx.thread(); i < n; i += ctx.threads())
        s[i + j * n] = i == j ? root : s[i + j * n] / root;
    }
    ctx.sync();  // the last columns' scaling
    for (int i = ctx.thread(); i < n * n; i += ctx.threads()) {
      const int r = i % n, c = i / n;
      if (r >= c) t[r + static_cast<std::size_t>(c) * p.lda] = s[i];
    }
    if (ctx.thread() == 0) p.info = info;
  }

#if defined(__CUDA_ARCH__)
  // With 128 task threads or more: thread t keeps row i = t % 64 of the columns l = 2 s + h
  // (h = t / 64, s = 0..31) in registers. Step j: the owners of column j (h = j % 2) put it in
  // shared memory (ping-pong buffers: one barrier per step), every thread reads the pivot and
  // the column, updates its trailing elements with a_il -= a_ij a_lj / d, and the owners keep
  // L_ij = a_ij / sqrt(d).
  __device__ static void run_in_registers(Payload& p, const weft::gpu::BlockContext& ctx) {
    constexpr int n = CholeskyTile::kTile, kCols = n / 2;
    double* tile = CholeskyTile::at(p.a, p.lda, p.k, p.k);
    auto* column = static_cast<double*>(ctx.shared());  // column[(j % 2) * n + row]
    const int t = ctx.thread(), i = t % n, h = t / n;
    const bool active = t < 2 * n;
    double x[kCols];
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      const int l = 2 * c + h;
      x[c] = active && l <= i ? tile[i + static_cast<std::size_t>(l) * p.lda] : 0.0;
    }
    int info = 0;
#pragma unroll
    for (int j = 0; j < n; ++j) {
      double* col = column + (j % 2) * n;
      if (active && h == j % 2) col[i] = x[j / 2];  // a_ij (zero above the diagonal)
      ctx.sync();
      const double d = col[j];
      if (!(d > 0.0)) {  // also NaN; every thread sees the same d and leaves at the same step
        info = j + 1;
        break;
      }
      const double aij = col[i], scale = aij / d;
      if (active && i > j) {
#pragma unroll
        for (int c = 0; c < kCols; ++c) {
          const int l = 2 * c + h;
          if (l > j && l <= i) x[c] -= scale * col[l];
        }
      }
      if (active && h == j % 2 && i >= j) x[j / 2] = i == j ? sqrt(d) : aij / sqrt(d);
    }
    if (active) {
#pragma unroll
      for (int c = 0; c < kCols; ++c) {
        const int l = 2 * c + h;
        if (l <= i) tile[i + static_cast<std::size_t>(l) * p.lda] = x[c];
      }
    }
    if (t == 0) p.info = info;
  }
#endif
};

struct TrsmTile {
  static constexpr std::uint32_t kId = 112;
  static constexpr int kStride = CholeskyTile::kTile + 1;  // B's columns, padded
  static constexpr std::size_t kSharedBytes =
      sizeof(double) * CholeskyTile::kTile * (CholeskyTile::kTile + kStride);
  struct Payload {
    double* a;
    int lda, i, k;
  };
  // X L^T = B, column by column (right-looking): X_j = B_j / L_jj, then B_q -= X_j L_qj for
  // every later column q. L_kk and B = A_ik sit in shared memory; each step's updates are
  // shared by the task threads as TileThreads says.
  WEFT_HD static void run(Payload& p, const weft::gpu::BlockContext& ctx) {
#if defined(__CUDA_ARCH__)
    if (ctx.threads() >= 2 * CholeskyTile::kTile) {
      run_in_registers(p, ctx);
      return;
    }
#endif
    constexpr int n = CholeskyTile::kTile;
    const double* l = CholeskyTile::at(p.a, p.lda, p.k, p.k);
    double* b = CholeskyTile::at(p.a, p.lda, p.i, p.k);
    auto* ls = static_cast<double*>(ctx.shared());  // L_kk, column-major, ld n
    double* bs = ls + n * n;                        // B, column-major, ld kStride
    for (int e = ctx.thread(); e < n * n; e += ctx.threads()) {
      const int r = e % n, c = e / n;
      ls[e] = l[r + static_cast<std::size_t>(c) * p.lda];
      bs[r + c * kStride] = b[r + static_cast<std::size_t>(c) * p.lda];
    }
    ctx.sync();
    const TileThreads share(ctx);
    for (int j = 0; j < n; ++j) {
      // B_j is final after the last step's barrier; each row's update scales it on the way
      // (X_rj), and B_j itself is scaled once every update of this step has read it.
      const double inverse = 1.0 / ls[j + j * n];
      if (!share.idle()) {
        for (int r = share.first_row; r < n; r += share.row_step) {
          const double x = bs[r + j * kStride] * inverse;
          for (int q = j + 1 + share.first_lane; q < n; q += share.lanes)
            bs[r + q * kStride] -= x * ls[q + j * n];
        }
      }
      ctx.sync();  // column j + 1 is final before the next step reads it
      for (int r = ctx.thread(); r < n; r += ctx.threads()) bs[r + j * kStride] *= inverse;
    }
    ctx.sync();
    for (int e = ctx.thread(); e < n * n; e += ctx.threads()) {
      const int r = e % n, c = e / n;
      b[r + static_cast<std::size_t>(c) * p.lda] = bs[r + c * kStride];
    }
  }

#if defined(__CUDA_ARCH__)
  // With 128 task threads or more: thread t keeps row r = t % 64 of B's columns q = 2 s + h
  // (h = t / 64) in registers and L_kk sits in shared memory. Step j: the owners of column j
  // (h = j % 2) scale it to X_rj and put it in shared memory (ping-pong buffers: one barrier
  // per step); every thread then updates its later columns with B_rq -= X_rj L_qj.
  __device__ static void run_in_registers(Payload& p, const weft::gpu::BlockContext& ctx) {
    constexpr int n = CholeskyTile::kTile, kCols = n / 2;
    const double* l = CholeskyTile::at(p.a, p.lda, p.k, p.k);
    double* b = CholeskyTile::at(p.a, p.lda, p.i, p.k);
    auto* ls = static_cast<double*>(ctx.shared());  // L_kk, column-major, ld n
    double* column = ls + n * n;                    // column[(j % 2) * n + row]: X_j
    for (int e = ctx.thread(); e < n * n; e += ctx.threads())
      ls[e] = l[(e % n) + static_cast<std::size_t>(e / n) * p.lda];
    const int t = ctx.thread(), r = t % n, h = t / n;
    const bool active = t < 2 * n;
    double x[kCols];
#pragma unroll
    for (int c = 0; c < kCols; ++c)
      x[c] = active ? b[r + static_cast<std::size_t>(2 * c + h) * p.lda] : 0.0;
    ctx.sync();  // L_kk is in shared memory
#pragma unroll
    for (int j = 0; j < n; ++j) {
      double* col = column + (j % 2) * n;
      if (active && h == j % 2) {
        x[j / 2] /= ls[j + j * n];
        col[r] = x[j / 2];
      }
      ctx.sync();
      const double xj = col[r];
      if (active) {
#pragma unroll
        for (int c = 0; c < kCols; ++c) {
          const int q = 2 * c + h;
          if (q > j) x[c] -= xj * ls[q + j * n];
        }
      }
    }
    if (active) {
#pragma unroll
      for (int c = 0; c < kCols; ++c) b[r + static_cast<std::size_t>(2 * c + h) * p.lda] = x[c];
    }
  }
#endif
};

// A_ij -= A_ik A_jk^T; with i == j (SYRK) only the lower triangle: the FP64 GEMM tile body
// (tensor cores on the GPU) with B = A_jk transposed.
struct UpdateTile {
  static constexpr std::uint32_t kId = 113;
  static constexpr std::size_t kSharedBytes = DgemmTile::kSharedBytes;
  struct Payload {
    double* a;
    int lda, i, j, k;
  };
  WEFT_HD static void run(Payload& p, const weft::gpu::BlockContext& ctx) {
    constexpr int n = CholeskyTile::kTile;
    DgemmTile::Payload g{CholeskyTile::at(p.a, p.lda, p.i, p.k),
                         CholeskyTile::at(p.a, p.lda, p.j, p.k),
                         CholeskyTile::at(p.a, p.lda, p.i, p.j),
                         n,
                         n,
                         n,
                         p.lda,
                         p.lda,
                         p.lda,
                         0,
                         0,
                         -1.0,
                         1.0};
    g.b_transposed = true;
    g.lower_only = p.i == p.j;
    DgemmTile::run(g, ctx);
  }
};

}  // namespace apps::gpu
