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

namespace apps::gpu {

struct CholeskyTile {
  static constexpr int kTile = 64;
  // Tile (r, c) of the matrix at `a` (tile indices).
  WEFT_HD static double* at(double* a, int lda, int r, int c) {
    return a + static_cast<std::size_t>(c) * kTile * lda + static_cast<std::size_t>(r) * kTile;
  }
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
    constexpr int n = CholeskyTile::kTile;
    double* t = CholeskyTile::at(p.a, p.lda, p.k, p.k);
    auto* s = static_cast<double*>(ctx.shared());  // the tile, column-major, ld n
    for (int i = ctx.thread(); i < n * n; i += ctx.threads())
      s[i] = t[(i % n) + static_cast<std::size_t>(i / n) * p.lda];
    ctx.sync();
    int info = 0;
    for (int j = 0; j < n; ++j) {
      const double d = s[j + j * n];
      if (!(d > 0.0)) {  // also NaN
        info = j + 1;
        break;
      }
      const double r = std::sqrt(d);
      ctx.sync();  // every thread read s[j][j]
      for (int i = j + ctx.thread(); i < n; i += ctx.threads())
        s[i + j * n] = i == j ? r : s[i + j * n] / r;
      ctx.sync();
      // The trailing lower triangle: s[i][l] -= s[i][j] s[l][j] for j < l <= i.
      const int m = n - j - 1;
      for (int e = ctx.thread(); e < m * m; e += ctx.threads()) {
        const int i = j + 1 + e % m, l = j + 1 + e / m;
        if (l <= i) s[i + l * n] -= s[i + j * n] * s[l + j * n];
      }
      ctx.sync();
    }
    for (int i = ctx.thread(); i < n * n; i += ctx.threads()) {
      const int r = i % n, c = i / n;
      if (r >= c) t[r + static_cast<std::size_t>(c) * p.lda] = s[i];
    }
    if (ctx.thread() == 0) p.info = info;
  }
};

struct TrsmTile {
  static constexpr std::uint32_t kId = 112;
  static constexpr std::size_t kSharedBytes =
      sizeof(double) * CholeskyTile::kTile * CholeskyTile::kTile;
  struct Payload {
    double* a;
    int lda, i, k;
  };
  // Row r of A_ik solves x L^T = b: x_j = (b_j - sum_{l<j} x_l L_jl) / L_jj, one row per thread.
  WEFT_HD static void run(Payload& p, const weft::gpu::BlockContext& ctx) {
    constexpr int n = CholeskyTile::kTile;
    const double* l = CholeskyTile::at(p.a, p.lda, p.k, p.k);
    double* b = CholeskyTile::at(p.a, p.lda, p.i, p.k);
    auto* s = static_cast<double*>(ctx.shared());  // L_kk, column-major, ld n
    for (int e = ctx.thread(); e < n * n; e += ctx.threads())
      s[e] = l[(e % n) + static_cast<std::size_t>(e / n) * p.lda];
    ctx.sync();
    for (int r = ctx.thread(); r < n; r += ctx.threads()) {
      for (int j = 0; j < n; ++j) {
        double x = b[r + static_cast<std::size_t>(j) * p.lda];
        for (int q = 0; q < j; ++q) x -= b[r + static_cast<std::size_t>(q) * p.lda] * s[j + q * n];
        b[r + static_cast<std::size_t>(j) * p.lda] = x / s[j + j * n];
      }
    }
  }
};

// A_ij -= A_ik A_jk^T; with i == j (SYRK) only the lower triangle.
struct UpdateTile {
  static constexpr std::uint32_t kId = 113;
  struct Payload {
    double* a;
    int lda, i, j, k;
  };
  WEFT_HD static void run(Payload& p, const weft::gpu::BlockContext& ctx) {
    constexpr int n = CholeskyTile::kTile;
    const double* x = CholeskyTile::at(p.a, p.lda, p.i, p.k);
    const double* y = CholeskyTile::at(p.a, p.lda, p.j, p.k);
    double* c = CholeskyTile::at(p.a, p.lda, p.i, p.j);
    for (int e = ctx.thread(); e < n * n; e += ctx.threads()) {
      const int r = e % n, q = e / n;
      if (p.i == p.j && r < q) continue;
      double sum = 0;
      for (int t = 0; t < n; ++t) {
        sum +=
            x[r + static_cast<std::size_t>(t) * p.lda] * y[q + static_cast<std::size_t>(t) * p.lda];
      }
      c[r + static_cast<std::size_t>(q) * p.lda] -= sum;
    }
  }
};

}  // namespace apps::gpu
