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

// The GPU path of POTRF and TRSM (a block of at least kPanelThreads task threads): the tile in
// panels of kPanel columns. A panel's serial steps are each row's solve against the panel's
// diagonal block, rows independent; between panels the block updates the rest of the tile by
// the solved rows. Thread t < kPanelThreads owns row t % kTile of the tile (a warp: 32
// consecutive rows): `parity` = t / kTile 0 solves it, and in the updates each of the two takes
// every second column from its parity. Threads past kPanelThreads sit out.
struct PanelThreads {
  static constexpr int kPanel = 16;
  static constexpr int kPanelThreads = 2 * CholeskyTile::kTile;
  static constexpr int kRowStride = kPanel + 2;  // a panel row in shared memory: 16-byte aligned,
                                                 // eight rows of a quarter-warp on distinct banks
  int row, parity;
  bool active;
  WEFT_HD explicit PanelThreads(const weft::gpu::BlockContext& ctx)
      : row(ctx.thread() % CholeskyTile::kTile),
        parity(ctx.thread() / CholeskyTile::kTile),
        active(ctx.thread() < kPanelThreads) {}
  [[nodiscard]] WEFT_HD bool solves() const { return active && parity == 0; }
#if defined(__CUDA_ARCH__)
  // One row's x L^T = w against a panel's diagonal block L (lower), right-looking: step j sets
  // x_j = w_j / L_jj and takes x_j L_qj from every later w_q. The loop stays rolled, w sliding
  // down one place a step (w[c] holds column j + c), so that no register is indexed at run
  // time and the body, called out of line, keeps few registers: its caller's live values stay
  // in registers across the call. `lower(q, j)` is L_qj (j < q < kPanel), `inverse(j)` 1 / L_jj,
  // `put(j, x)` takes x_j.
  template <class Lower, class Inverse, class Put>
  __device__ static void solve_row(double (&w)[kPanel], Lower lower, Inverse inverse, Put put) {
#pragma unroll 1
    for (int j = 0; j < kPanel; ++j) {
      const double x = w[0] * inverse(j);
      put(j, x);
#pragma unroll
      for (int c = 0; c + 1 < kPanel; ++c) {
        const int q = j + 1 + c;
        w[c] = q < kPanel ? fma(-x, lower(q, j), w[c + 1]) : 0.0;
      }
    }
  }
  // x less the dot product of a row's kPanel panel values and the kPanel values at `l` (16-byte
  // aligned, and the same for the whole warp: every load a broadcast).
  __device__ static double minus_dot(double x, const double (&v)[kPanel], const double* l) {
    const auto* pairs = reinterpret_cast<const double2*>(l);
    double sum[4] = {0.0, 0.0, 0.0, 0.0};  // four chains: a quarter of the dependent FMAs
#pragma unroll
    for (int k = 0; k < kPanel; k += 2) {
      const double2 lk = pairs[k / 2];
      sum[k % 4] = fma(v[k], lk.x, sum[k % 4]);
      sum[k % 4 + 1] = fma(v[k + 1], lk.y, sum[k % 4 + 1]);
    }
    return x - ((sum[0] + sum[1]) + (sum[2] + sum[3]));
  }
#endif
};

struct PotrfTile {
  static constexpr std::uint32_t kId = 111;
  static constexpr bool kOutOfLine = true;  // its own registers (docs/gpu.md)
  // The tile; on the GPU's panel path also a panel row per tile row and the reciprocals of the
  // diagonal.
  static constexpr std::size_t kSharedBytes =
      sizeof(double) * CholeskyTile::kTile * (CholeskyTile::kTile + PanelThreads::kRowStride + 1);
  struct Payload {
    double* a;
    int lda, k;
    int info;  // 0, or j + 1 when the tile's leading minor of order j + 1 is not positive
  };
  // The steps take the payload by value: `p` lives in the block's shared memory, where every
  // step's stores would make the compiler read its fields again (docs/gpu.md, "Task types").
  WEFT_HD static void run(Payload& p, const weft::gpu::BlockContext& ctx) {
    const int info = factor(p, ctx);
    if (ctx.thread() == 0) p.info = info;
  }
  // Factors the tile; returns info, thread 0's value being the tile's.
  WEFT_HD APPS_GEMM_INLINE static int factor(const Payload p, const weft::gpu::BlockContext& ctx) {
#if defined(__CUDA_ARCH__)
    if (ctx.threads() >= PanelThreads::kPanelThreads) return factor_in_panels(p, ctx);
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
    return info;
  }

#if defined(__CUDA_ARCH__)
  // With PanelThreads::kPanelThreads task threads or more, panel by panel: (1) warp 0 factors
  // the panel's diagonal block (factor_diagonal_block); (2) every row below it solves its panel
  // values against that block (PanelThreads::solve_row); (3) the block updates the trailing
  // lower triangle by those rows. The unfactored part of the tile stays in shared memory
  // (column-major), each row's panel values go to `rows` for the others to read, and every value of
  // L goes out as soon as it is final. A pivot that is not positive sets info and the steps go on
  // (every thread takes the same barriers).
  __device__ __forceinline__ static int factor_in_panels(const Payload p,
                                                         const weft::gpu::BlockContext& ctx) {
    using P = PanelThreads;
    constexpr int n = CholeskyTile::kTile;
    double* tile = CholeskyTile::at(p.a, p.lda, p.k, p.k);
    auto* s = static_cast<double*>(ctx.shared());  // the tile, column-major, ld n
    double* rows = s + n * n;                      // row r's panel values at r * kRowStride
    double* inverse = rows + n * P::kRowStride;    // 1 / L_jj
    for (int e = ctx.thread(); e < n * n; e += ctx.threads()) {
      const int r = e % n, c = e / n;
      if (r >= c) s[e] = tile[r + static_cast<std::size_t>(c) * p.lda];
    }
    ctx.sync();
    const P me(ctx);
    int info = 0;
#pragma unroll 1
    for (int c0 = 0; c0 < n; c0 += P::kPanel) {
      if (ctx.thread() < 32)
        info = factor_diagonal_block(s, rows, inverse, tile, p.lda, c0, ctx.thread(), info);
      ctx.sync();                      // the block's rows and reciprocals are in shared memory
      if (c0 + P::kPanel == n) break;  // no rows below (uniform)
      const bool below = me.active && me.row >= c0 + P::kPanel;
      if (below && me.solves()) {
        double w[P::kPanel];
#pragma unroll
        for (int k = 0; k < P::kPanel; ++k) w[k] = s[me.row + (c0 + k) * n];
        double* mine = rows + me.row * P::kRowStride;
        double* out = tile + me.row + static_cast<std::size_t>(c0) * p.lda;
        P::solve_row(
            w, [&](int q, int j) { return rows[(c0 + q) * P::kRowStride + j]; },
            [&](int j) { return inverse[c0 + j]; },
            [&](int j, double x) {
              mine[j] = x;
              out[static_cast<std::size_t>(j) * p.lda] = x;
            });
      }
      ctx.sync();  // every row's panel values are in `rows`
      if (below) {
        double v[P::kPanel];
        load_row(v, rows + me.row * P::kRowStride);
#pragma unroll 2
        for (int c = c0 + P::kPanel + me.parity; c <= me.row; c += 2)
          s[me.row + c * n] = P::minus_dot(s[me.row + c * n], v, rows + c * P::kRowStride);
      }
      ctx.sync();  // the trailing triangle is updated; `rows` may be written again
    }
    return info;
  }
  __device__ static void load_row(double (&v)[PanelThreads::kPanel], const double* row) {
    const auto* pairs = reinterpret_cast<const double2*>(row);
#pragma unroll
    for (int k = 0; k < PanelThreads::kPanel; k += 2) {
      const double2 vk = pairs[k / 2];
      v[k] = vk.x;
      v[k + 1] = vk.y;
    }
  }
  // Warp 0: factors the diagonal block of the panel at column c0 (in `s`, updated by the panels
  // before), lane i < kPanel holding its row i and lanes past it shadowing lane i - kPanel (the
  // shuffles take the whole warp). Step j's pivot and column go from lane to lane by shuffles,
  // with no barrier. The block's rows go to `rows` (zeros above the diagonal) and to the tile,
  // 1 / L_jj to `inverse`. Returns `info`, or c0 + j + 1 for the first pivot j that is not
  // positive when `info` is 0.
  __device__ __forceinline__ static int factor_diagonal_block(const double* s, double* rows,
                                                              double* inverse, double* tile,
                                                              int lda, int c0, int lane, int info) {
    using P = PanelThreads;
    constexpr int n = CholeskyTile::kTile;
    constexpr unsigned kWarp = 0xffffffffu;
    const int i = lane % P::kPanel;
    double d[P::kPanel];
#pragma unroll
    for (int k = 0; k < P::kPanel; ++k) d[k] = k <= i ? s[c0 + i + (c0 + k) * n] : 0.0;
#pragma unroll
    for (int j = 0; j < P::kPanel; ++j) {
      const double pivot = __shfl_sync(kWarp, d[j], j);
      if (!(pivot > 0.0) && info == 0) info = c0 + j + 1;  // also NaN
      const double rs = rsqrt(pivot);
      if (i >= j) d[j] = i == j ? pivot * rs : d[j] * rs;
#pragma unroll
      for (int q = j + 1; q < P::kPanel; ++q) {
        const double lq = __shfl_sync(kWarp, d[j], q);
        if (i >= q) d[q] = fma(-d[j], lq, d[q]);
      }
      if (lane == j) inverse[c0 + j] = rs;
    }
    if (lane < P::kPanel) {
      double* out = rows + (c0 + i) * P::kRowStride;
#pragma unroll
      for (int k = 0; k < P::kPanel; ++k) {
        out[k] = d[k];
        if (k <= i) tile[c0 + i + static_cast<std::size_t>(c0 + k) * lda] = d[k];
      }
    }
    return info;
  }
#endif
};

struct TrsmTile {
  static constexpr std::uint32_t kId = 112;
  static constexpr bool kOutOfLine = true;                 // its own registers (docs/gpu.md)
  static constexpr int kStride = CholeskyTile::kTile + 1;  // B's columns, padded
  // L's rows on the GPU's panel path: 16-byte aligned, the last place holding 1 / L_jj.
  static constexpr int kLRow = CholeskyTile::kTile + 2;
  // L and B: the shared-memory path's, or the panel path's (L by rows), whichever is larger.
  static constexpr std::size_t kSharedBytes =
      sizeof(double) * CholeskyTile::kTile *
      (CholeskyTile::kTile + (kStride > kLRow ? kStride : kLRow));
  struct Payload {
    double* a;
    int lda, i, k;
  };
  // X L^T = B, column by column (right-looking): X_j = B_j / L_jj, then B_q -= X_j L_qj for
  // every later column q. L_kk and B = A_ik sit in shared memory; each step's updates are
  // shared by the task threads as TileThreads says.
  // The steps take the payload by value (PotrfTile::run says why).
  WEFT_HD static void run(Payload& p, const weft::gpu::BlockContext& ctx) { solve(p, ctx); }
  WEFT_HD APPS_GEMM_INLINE static void solve(const Payload p, const weft::gpu::BlockContext& ctx) {
#if defined(__CUDA_ARCH__)
    if (ctx.threads() >= PanelThreads::kPanelThreads) {
      solve_in_panels(p, ctx);
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
  // With PanelThreads::kPanelThreads task threads or more, panel by panel: each row of B solves
  // its panel's values (X's: they go out, and over B's panel), then the two threads of the row
  // update its later columns by them, each taking every second column. L sits in shared memory
  // by rows (the 16 values a column's update reads are 8 broadcast reads), 1 / L_jj in the last
  // place of row j; B column-major.
  __device__ __forceinline__ static void solve_in_panels(const Payload p,
                                                         const weft::gpu::BlockContext& ctx) {
    using P = PanelThreads;
    constexpr int n = CholeskyTile::kTile;
    const double* l = CholeskyTile::at(p.a, p.lda, p.k, p.k);
    double* b = CholeskyTile::at(p.a, p.lda, p.i, p.k);
    auto* ls = static_cast<double*>(ctx.shared());  // L_kk by rows, kLRow apart
    double* bs = ls + n * kLRow;                    // B, column-major, ld n
    for (int e = ctx.thread(); e < n * n; e += ctx.threads()) {
      const int r = e % n, c = e / n;
      if (r >= c) ls[r * kLRow + c] = l[r + static_cast<std::size_t>(c) * p.lda];
      bs[e] = b[r + static_cast<std::size_t>(c) * p.lda];
    }
    for (int j = ctx.thread(); j < n; j += ctx.threads())
      ls[j * kLRow + n] = 1.0 / l[j + static_cast<std::size_t>(j) * p.lda];
    const P me(ctx);
#pragma unroll 1
    for (int c0 = 0; c0 < n; c0 += P::kPanel) {
      ctx.sync();  // L is staged; B's panel is updated by the panels before
      if (me.solves()) {
        double w[P::kPanel];
#pragma unroll
        for (int k = 0; k < P::kPanel; ++k) w[k] = bs[me.row + (c0 + k) * n];
        const double* block = ls + c0 * kLRow + c0;  // the panel's diagonal block
        double* panel = bs + me.row + c0 * n;
        double* out = b + me.row + static_cast<std::size_t>(c0) * p.lda;
        P::solve_row(
            w, [&](int q, int j) { return block[q * kLRow + j]; },
            [&](int j) { return block[j * kLRow + n - c0]; },
            [&](int j, double x) {
              panel[j * n] = x;  // X over B's panel, for the updates below
              out[static_cast<std::size_t>(j) * p.lda] = x;
            });
      }
      ctx.sync();  // X's panel is in shared memory
      if (!me.active) continue;
      double v[P::kPanel];
#pragma unroll
      for (int k = 0; k < P::kPanel; ++k) v[k] = bs[me.row + (c0 + k) * n];
#pragma unroll 2
      for (int c = c0 + P::kPanel + me.parity; c < n; c += 2)
        bs[me.row + c * n] = P::minus_dot(bs[me.row + c * n], v, ls + c * kLRow + c0);
    }
  }
#endif
};

// A_ij -= A_ik A_jk^T; with i == j (SYRK) only the lower triangle: the FP64 GEMM tile body
// (tensor cores on the GPU) with B = A_jk transposed.
struct UpdateTile {
  static constexpr std::uint32_t kId = 113;
  static constexpr bool kOutOfLine = true;  // its own registers (docs/gpu.md)
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
  // The update of tile (i, j) by tiles (i, k) and (j, k).
  WEFT_HD static void of(double* a, int lda, int i, int j, int k,
                         const weft::gpu::BlockContext& ctx) {
    Payload u{a, lda, i, j, k};
    run(u, ctx);
  }
};

// Blocks of nb x nb tiles, one task each (a CholeskyGraph of blocks): the same right-looking
// steps inside a block, tile by tile, with the tile bodies above and a barrier after each (a
// body may use the block's whole shared memory). Indices i, j, k count blocks. A graph of
// blocks has about nb^3 times fewer tasks, each about nb^3 tiles' work, and a longer chain of
// dependent bodies inside its POTRF and TRSM tasks.
struct CholeskyBlock {
  static constexpr int kMaxTiles = 8;  // nb, at most
  static constexpr std::size_t kSharedBytes = TrsmTile::kSharedBytes > UpdateTile::kSharedBytes
                                                  ? TrsmTile::kSharedBytes
                                                  : UpdateTile::kSharedBytes;
  static_assert(kSharedBytes >= PotrfTile::kSharedBytes);
};

struct PotrfBlock {
  static constexpr std::uint32_t kId = 114;
  static constexpr bool kOutOfLine = true;  // its own registers (docs/gpu.md)
  static constexpr std::size_t kSharedBytes = CholeskyBlock::kSharedBytes;
  struct Payload {
    double* a;
    int lda, k, nb;
    int info;  // 0, or j + 1 when the block's leading minor of order j + 1 is not positive
  };
  WEFT_HD static void run(Payload& p, const weft::gpu::BlockContext& ctx) {
    const Payload in = p;  // a copy (PotrfTile::run says why)
    const int k0 = in.k * in.nb;
    int info = 0;  // thread 0's is the block's (PotrfTile::factor)
    for (int s = 0; s < in.nb; ++s) {
      const int diagonal = k0 + s;
      const int tile_info = PotrfTile::factor({in.a, in.lda, diagonal, 0}, ctx);
      if (info == 0 && tile_info != 0) info = s * CholeskyTile::kTile + tile_info;
      ctx.sync();
      for (int r = s + 1; r < in.nb; ++r) {
        TrsmTile::solve({in.a, in.lda, k0 + r, diagonal}, ctx);
        ctx.sync();
      }
      for (int r = s + 1; r < in.nb; ++r) {
        for (int c = s + 1; c <= r; ++c) {
          UpdateTile::of(in.a, in.lda, k0 + r, k0 + c, diagonal, ctx);
          ctx.sync();
        }
      }
    }
    if (ctx.thread() == 0) p.info = info;
  }
};

// X L^T = B for block (i, k): column s of X is B's, less X's columns before it times L's row s,
// then solved with the tile L_ss. The updates go one 64-deep tile at a time: the GEMM body's
// depth stays a constant, which the resident kernels' registers need
// (docs/decisions/039-cholesky-in-blocks-of-tiles.md).
struct TrsmBlock {
  static constexpr std::uint32_t kId = 115;
  static constexpr bool kOutOfLine = true;  // its own registers (docs/gpu.md)
  static constexpr std::size_t kSharedBytes = CholeskyBlock::kSharedBytes;
  struct Payload {
    double* a;
    int lda, i, k, nb;
  };
  WEFT_HD static void run(Payload& p, const weft::gpu::BlockContext& ctx) {
    const Payload in = p;  // a copy (PotrfTile::run says why)
    const int i0 = in.i * in.nb, k0 = in.k * in.nb;
    for (int s = 0; s < in.nb; ++s) {
      for (int q = 0; q < s; ++q) {
        for (int r = 0; r < in.nb; ++r) {
          UpdateTile::of(in.a, in.lda, i0 + r, k0 + s, k0 + q, ctx);
          ctx.sync();
        }
      }
      for (int r = 0; r < in.nb; ++r) {
        TrsmTile::solve({in.a, in.lda, i0 + r, k0 + s}, ctx);
        ctx.sync();
      }
    }
  }
};

// A_ij -= A_ik A_jk^T on blocks, tile by tile (TrsmBlock says why); with i == j (SYRK) only the
// tiles on or below the diagonal, and of the diagonal tiles only their lower triangles.
struct UpdateBlock {
  static constexpr std::uint32_t kId = 116;
  static constexpr bool kOutOfLine = true;  // its own registers (docs/gpu.md)
  static constexpr std::size_t kSharedBytes = CholeskyBlock::kSharedBytes;
  struct Payload {
    double* a;
    int lda, i, j, k, nb;
  };
  WEFT_HD static void run(Payload& p, const weft::gpu::BlockContext& ctx) {
    const Payload in = p;  // a copy (PotrfTile::run says why)
    const int i0 = in.i * in.nb, j0 = in.j * in.nb, k0 = in.k * in.nb;
    for (int r = 0; r < in.nb; ++r) {
      for (int c = 0; c < (in.i == in.j ? r + 1 : in.nb); ++c) {
        for (int q = 0; q < in.nb; ++q) {
          UpdateTile::of(in.a, in.lda, i0 + r, j0 + c, k0 + q, ctx);
          ctx.sync();
        }
      }
    }
  }
};

}  // namespace apps::gpu
