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

#if defined(__CUDA_ARCH__)
// The register layout of POTRF and TRSM on a GPU block of at least Parts x 64 task threads
// (Parts = 2 from 128 threads, 4 from 256): thread t = 32 w + lane (t < 64 Parts) works on row
// (32 / Parts) w + lane / Parts of the tile, the Parts lanes of a row sharing it by parts
// h = lane % Parts. At step j, part h holds the row's columns j + kWidth h + c,
// c = 0..kWidth - 1, in x[c]; slide() computes step j's update and moves every column down one
// place in the same pass, so the loop over the 64 steps stays rolled (its unrolled form
// overflows the instruction cache) with no dynamically indexed register. A step's values of L
// come from shared memory as rows of kRow positions, the parts at offset(h): 16-byte aligned
// pairs on distinct banks. More parts give each thread fewer columns a step.
// (Panels of 16 columns, a warp factoring each diagonal block with shuffles, were slower in
// the pool: docs/decisions/041-cholesky-tile-bodies-in-panels.md.)
template <int Parts>
struct SlidingWindow {
  static_assert(Parts == 2 || Parts == 4);
  static constexpr int kThreads = Parts * CholeskyTile::kTile;
  static constexpr int kWidth = CholeskyTile::kTile / Parts;
  // Each part's kWidth positions and a pad of 2: [0, 32) | pad | [34, 66) | pad with 2 parts.
  static constexpr int kRow = CholeskyTile::kTile + 2 * Parts;
  __device__ static constexpr int offset(int part) { return (kWidth + 2) * part; }

  int lane, half, row;  // half: the part, 0 .. Parts - 1
  bool active;
  __device__ explicit SlidingWindow(const weft::gpu::BlockContext& ctx)
      : lane(ctx.thread() % 32),
        half(lane % Parts),
        row((ctx.thread() / 32) * (32 / Parts) + lane / Parts),
        active(ctx.thread() < kThreads) {}
  // The first part's value of `v` to every lane of the row (the warp's lanes all call it).
  __device__ double from_first_half(double v) const {
    return __shfl_sync(0xffffffffu, v, lane & ~(Parts - 1));
  }
  // x[c] = x[c + 1] - s v[c], the last column coming from the next part's x[0] (zero for the
  // last part: past the tile). v: this part's kWidth values, 16-byte aligned.
  __device__ void slide(double (&x)[kWidth], double s, const double* v) const {
    const double next = __shfl_down_sync(0xffffffffu, x[0], 1);
    const double last = half < Parts - 1 ? next : 0.0;
    const auto* pairs = reinterpret_cast<const double2*>(v);
#pragma unroll
    for (int c = 0; c < kWidth; c += 2) {
      const double2 vc = pairs[c / 2];
      x[c] = x[c + 1] - s * vc.x;
      x[c + 1] = (c + 2 < kWidth ? x[c + 2] : last) - s * vc.y;
    }
  }
};
#endif

struct PotrfTilePayload {
  double* a;
  int lda, k;
  int info;  // 0, or j + 1 when the tile's leading minor of order j + 1 is not positive
};

// MaxParts: the most parts of the GPU's sliding window (SlidingWindow) the body may take, 2
// (from 128 task threads) or 4 (from 256). Every instance has the same id and payload; a pool
// registers one (PotrfTile in the applications' pool, PotrfTileT<4> in CholeskyPool), and
// records made for PotrfTile run on either.
template <int MaxParts = 2>
struct PotrfTileT {
  static_assert(MaxParts == 2 || MaxParts == 4);
  static constexpr std::uint32_t kId = 111;
  static constexpr bool kOutOfLine = true;  // its own registers (docs/gpu.md)
  static constexpr std::size_t kSharedBytes =
      sizeof(double) * CholeskyTile::kTile * CholeskyTile::kTile;
  using Payload = PotrfTilePayload;
  // The steps take the payload by value: `p` lives in the block's shared memory, where every
  // step's stores would make the compiler read its fields again (docs/gpu.md, "Task types").
  WEFT_HD static void run(Payload& p, const weft::gpu::BlockContext& ctx) {
    const int info = factor(p, ctx);
    if (ctx.thread() == 0) p.info = info;
  }
  // Factors the tile; returns info, thread 0's value being the tile's (on the GPU's sliding
  // window, threads past the window's return 0).
  WEFT_HD APPS_GEMM_INLINE static int factor(const Payload p, const weft::gpu::BlockContext& ctx) {
#if defined(__CUDA_ARCH__)
    if constexpr (MaxParts >= 4) {
      if (ctx.threads() >= SlidingWindow<4>::kThreads) return run_in_registers<4>(p, ctx);
    }
    if (ctx.threads() >= SlidingWindow<2>::kThreads) return run_in_registers<2>(p, ctx);
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
  // With SlidingWindow<Parts>::kThreads task threads or more: a sliding window. Rows exchange
  // their column-j values through shared memory, one barrier per step (ping-pong buffers): row
  // q writes a_qj at position P(q - j), where P(0) = 0 holds the pivot and
  // P(1 + kWidth h + c) = 2 + offset(h) + c, so that each part reads its kWidth values as
  // aligned pairs.
  // Positions no row writes hold zeros or an earlier step's finite values; they only reach
  // window columns past a row's diagonal, which are never stored. A pivot that is not positive
  // sets info and the steps go on (every thread takes the same number of barriers).
  template <int Parts>
  __device__ __forceinline__ static int run_in_registers(const Payload p,
                                                         const weft::gpu::BlockContext& ctx) {
    using W = SlidingWindow<Parts>;
    constexpr int n = CholeskyTile::kTile;
    double* tile = CholeskyTile::at(p.a, p.lda, p.k, p.k);
    auto* buffers = static_cast<double*>(ctx.shared());  // two of W::kRow positions
    for (int e = ctx.thread(); e < 2 * W::kRow; e += ctx.threads()) buffers[e] = 0.0;
    ctx.sync();  // the zeros land before any row's value
    const W w(ctx);
    double x[W::kWidth];
#pragma unroll
    for (int c = 0; c < W::kWidth; ++c) {
      const int q = W::kWidth * w.half + c;
      x[c] = w.active && q <= w.row ? tile[w.row + static_cast<std::size_t>(q) * p.lda] : 0.0;
    }
    int info = 0;
    double* out = tile + w.row;
#pragma unroll 1
    for (int j = 0; j < n; ++j) {
      double* col = buffers + (j % 2) * W::kRow;
      if (w.active && w.half == 0 && w.row >= j) col[position<Parts>(w.row - j)] = x[0];
      ctx.sync();
      if (!w.active) continue;
      const double d = col[0];
      if (!(d > 0.0) && info == 0) info = j + 1;
      const double rs = rsqrt(d);
      const double aij = w.from_first_half(x[0]);
      if (w.half == 0 && w.row >= j) {
        out[static_cast<std::size_t>(j) * p.lda] = w.row == j ? d * rs : aij * rs;
      }
      w.slide(x, aij * (rs * rs), col + 2 + W::offset(w.half));
    }
    return info;
  }
  template <int Parts>
  __device__ static int position(int k) {
    using W = SlidingWindow<Parts>;
    return k == 0 ? 0 : 2 + W::offset((k - 1) / W::kWidth) + (k - 1) % W::kWidth;
  }
#endif
};
using PotrfTile = PotrfTileT<2>;

struct TrsmTilePayload {
  double* a;
  int lda, i, k;
};

// MaxParts as PotrfTileT's.
template <int MaxParts = 2>
struct TrsmTileT {
  static_assert(MaxParts == 2 || MaxParts == 4);
  static constexpr std::uint32_t kId = 112;
  static constexpr bool kOutOfLine = true;                 // its own registers (docs/gpu.md)
  static constexpr int kStride = CholeskyTile::kTile + 1;  // B's columns, padded
  // The shared-memory path's L and B; the window's rows of L and inverses are fewer.
  static constexpr std::size_t kSharedBytes =
      sizeof(double) * CholeskyTile::kTile * (CholeskyTile::kTile + kStride);
  using Payload = TrsmTilePayload;
  // X L^T = B, column by column (right-looking): X_j = B_j / L_jj, then B_q -= X_j L_qj for
  // every later column q. L_kk and B = A_ik sit in shared memory; each step's updates are
  // shared by the task threads as TileThreads says.
  // The steps take the payload by value (PotrfTile::run says why).
  WEFT_HD static void run(Payload& p, const weft::gpu::BlockContext& ctx) { solve(p, ctx); }
  WEFT_HD APPS_GEMM_INLINE static void solve(const Payload p, const weft::gpu::BlockContext& ctx) {
#if defined(__CUDA_ARCH__)
    if constexpr (MaxParts >= 4) {
      if (ctx.threads() >= SlidingWindow<4>::kThreads) {
        run_in_registers<4>(p, ctx);
        return;
      }
    }
    if (ctx.threads() >= SlidingWindow<2>::kThreads) {
      run_in_registers<2>(p, ctx);
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
  // With SlidingWindow<Parts>::kThreads task threads or more: a sliding window over each row
  // of B, and no barrier after L_kk is staged (rows are independent; a row's lanes share X_rj
  // by shuffle). Shared memory holds column j of L below the diagonal as a row of W::kRow
  // positions, S[j][offset(h) + c] = L(j + 1 + kWidth h + c, j) (zero past the tile), then
  // 1 / L_jj.
  template <int Parts>
  __device__ __forceinline__ static void run_in_registers(const Payload p,
                                                          const weft::gpu::BlockContext& ctx) {
    using W = SlidingWindow<Parts>;
    constexpr int n = CholeskyTile::kTile;
    const double* l = CholeskyTile::at(p.a, p.lda, p.k, p.k);
    double* b = CholeskyTile::at(p.a, p.lda, p.i, p.k);
    auto* s = static_cast<double*>(ctx.shared());
    double* inverse = s + n * W::kRow;
    for (int e = ctx.thread(); e < n * n; e += ctx.threads()) {
      const int k = e % n, j = e / n, row = j + 1 + k;
      s[j * W::kRow + W::offset(k / W::kWidth) + k % W::kWidth] =
          row < n ? l[row + static_cast<std::size_t>(j) * p.lda] : 0.0;
    }
    for (int j = ctx.thread(); j < n; j += ctx.threads())
      inverse[j] = 1.0 / l[j + static_cast<std::size_t>(j) * p.lda];
    const W w(ctx);
    double x[W::kWidth];
#pragma unroll
    for (int c = 0; c < W::kWidth; ++c) {
      x[c] = w.active ? b[w.row + static_cast<std::size_t>(W::kWidth * w.half + c) * p.lda] : 0.0;
    }
    ctx.sync();  // L_kk is staged
    if (!w.active) return;
    double* out = b + w.row;
#pragma unroll 1
    for (int j = 0; j < n; ++j) {
      const double xj = w.from_first_half(x[0] * inverse[j]);
      if (w.half == 0) out[static_cast<std::size_t>(j) * p.lda] = xj;
      w.slide(x, xj, s + j * W::kRow + W::offset(w.half));
    }
  }
#endif
};
using TrsmTile = TrsmTileT<2>;

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

struct PotrfBlockPayload {
  double* a;
  int lda, k, nb;
  int info;  // 0, or j + 1 when the block's leading minor of order j + 1 is not positive
};

// MaxParts: its tile bodies' (PotrfTileT, TrsmTileT); same id and payload for every instance.
template <int MaxParts = 2>
struct PotrfBlockT {
  static_assert(MaxParts == 2 || MaxParts == 4);
  static constexpr std::uint32_t kId = 114;
  static constexpr bool kOutOfLine = true;  // its own registers (docs/gpu.md)
  static constexpr std::size_t kSharedBytes = CholeskyBlock::kSharedBytes;
  using Payload = PotrfBlockPayload;
  WEFT_HD static void run(Payload& p, const weft::gpu::BlockContext& ctx) {
    const Payload in = p;  // a copy (PotrfTile::run says why)
    const int k0 = in.k * in.nb;
    int info = 0;  // thread 0's is the block's (PotrfTile::factor)
    for (int s = 0; s < in.nb; ++s) {
      const int diagonal = k0 + s;
      const int tile_info = PotrfTileT<MaxParts>::factor({in.a, in.lda, diagonal, 0}, ctx);
      if (info == 0 && tile_info != 0) info = s * CholeskyTile::kTile + tile_info;
      ctx.sync();
      for (int r = s + 1; r < in.nb; ++r) {
        TrsmTileT<MaxParts>::solve({in.a, in.lda, k0 + r, diagonal}, ctx);
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
using PotrfBlock = PotrfBlockT<2>;

// X L^T = B for block (i, k): column s of X is B's, less X's columns before it times L's row s,
// then solved with the tile L_ss. The updates go one 64-deep tile at a time: the GEMM body's
// depth stays a constant, which the resident kernels' registers need
// (docs/decisions/039-cholesky-in-blocks-of-tiles.md).
struct TrsmBlockPayload {
  double* a;
  int lda, i, k, nb;
};

// MaxParts as PotrfBlockT's.
template <int MaxParts = 2>
struct TrsmBlockT {
  static_assert(MaxParts == 2 || MaxParts == 4);
  static constexpr std::uint32_t kId = 115;
  static constexpr bool kOutOfLine = true;  // its own registers (docs/gpu.md)
  static constexpr std::size_t kSharedBytes = CholeskyBlock::kSharedBytes;
  using Payload = TrsmBlockPayload;
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
        TrsmTileT<MaxParts>::solve({in.a, in.lda, i0 + r, k0 + s}, ctx);
        ctx.sync();
      }
    }
  }
};
using TrsmBlock = TrsmBlockT<2>;

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
