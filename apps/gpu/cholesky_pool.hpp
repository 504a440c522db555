// apps/gpu/cholesky_pool.hpp - the tiled Cholesky's own pool (docs/apps.md): blocks of 256
// task threads, one a SM, whose update of a block of 2 x 2 tiles is one 128 x 128 product on
// eight warps (UpdateBlockWide), and whose POTRF and TRSM give each row of a tile four lanes.
// It factors faster than the shared AppPool's two blocks of 128 task threads a SM, in blocks
// of 2 tiles (from n = 4096, cholesky_block_for) and tile by tile below
// (docs/decisions/043-cholesky-wide-update-blocks.md, 045-cholesky-four-part-window.md).
//
//   apps::gpu::CholeskyPool pool(apps::gpu::cholesky_pool_options({0}));
//   apps::gpu::CholeskyPlan<apps::gpu::CholeskyPool> plan(pool, 8192);
//   plan.factor(a, 8192);
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <weft/gpu/pool.hpp>

#include "cholesky_tiles.hpp"

namespace apps::gpu {

/// UpdateBlock (its id and payload: records made for UpdateBlock run it) whose blocks of 2 x 2
/// tiles, on 256 task threads or more of an sm_90 GPU, are one 128 x 128 product: eight warps
/// of 64 x 32 on FP64 mma m16n8k4, A_ik's and A_jk's columns staged 16 deep, 16 bytes a copy,
/// into four buffers. Other block sizes, fewer threads, a matrix not aligned for 16-byte copies
/// and the host run UpdateBlock.
struct UpdateBlockWide {
  static constexpr std::uint32_t kId = UpdateBlock::kId;
  static constexpr bool kOutOfLine = true;               // its own registers (docs/gpu.md)
  static constexpr int kWide = 2 * CholeskyTile::kTile;  // the product's side
  static constexpr int kDepth = 16, kStages = 4, kThreads = 256;
  static constexpr int kStride = kWide + 4;  // both operands depth-major: x[kk * kStride + r]
  static constexpr int kStageElems = 2 * kDepth * kStride;
  static constexpr std::size_t kWideShared = sizeof(double) * kStageElems * kStages;
  static constexpr std::size_t kSharedBytes =
      kWideShared > UpdateBlock::kSharedBytes ? kWideShared : UpdateBlock::kSharedBytes;
  using Payload = UpdateBlock::Payload;

  WEFT_HD static void run(Payload& p, const weft::gpu::BlockContext& ctx) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (takes_wide_path(p, ctx)) {
      const Payload in = p;  // a copy (PotrfTile::run says why)
      wide(in, ctx);
      return;
    }
#endif
    UpdateBlock::run(p, ctx);
  }

  /// Whether the 128 x 128 path takes the task: blocks of 2 tiles, enough threads, and every
  /// 16-byte copy aligned (an even lda and a 16-byte aligned matrix).
  WEFT_HD static bool fits(const Payload& p, const weft::gpu::BlockContext& ctx) {
    return p.nb == 2 && ctx.threads() >= kThreads && p.lda % 2 == 0 &&
           reinterpret_cast<std::uintptr_t>(p.a) % 16 == 0;
  }
  /// Whether run() takes the 128 x 128 path here: fits(), in code built for sm_90 or later.
  WEFT_HD static bool takes_wide_path(const Payload& p, const weft::gpu::BlockContext& ctx) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    return fits(p, ctx);
#else
    (void)p;
    (void)ctx;
    return false;
#endif
  }

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
 private:
  // 16 bytes from global to shared memory, asynchronously, past L1.
  __device__ __forceinline__ static void copy16(double* to, const double* from) {
    const auto shared = static_cast<unsigned>(__cvta_generic_to_shared(to));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(shared), "l"(from));
  }
  // d += a b on one m16n8k4 FP64 fragment (lane l: g = l / 4, q = l % 4): a (g, q) and
  // (g + 8, q), b (q, g), d_r (g + 8 (r / 2), 2 q + r % 2) (the PTX ISA's layout).
  __device__ __forceinline__ static void mma(double (&d)[4], const double (&a)[2], double b) {
    asm volatile(
        "mma.sync.aligned.m16n8k4.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5}, {%6}, "
        "{%0,%1,%2,%3};"
        : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
        : "d"(a[0]), "d"(a[1]), "d"(b));
  }
  // Chunk `c` of K into `buffer`: A_ik's rows (ai ..) and A_jk's (aj ..), columns c * 16 ...
  __device__ static void stage(const double* ai, const double* aj, int lda, double* buffer, int c,
                               const weft::gpu::BlockContext& ctx) {
    double* as = buffer;
    double* bs = buffer + kDepth * kStride;
#pragma unroll 1
    for (int i = ctx.thread(); i < kWide * kDepth / 2; i += ctx.threads()) {
      const int r = 2 * (i % (kWide / 2)), kk = i / (kWide / 2);
      const std::size_t at = r + static_cast<std::size_t>(c * kDepth + kk) * lda;
      copy16(as + kk * kStride + r, ai + at);
      copy16(bs + kk * kStride + r, aj + at);
    }
    __syncwarp();  // the warp together again (its lanes' trips may differ) before a barrier
  }
  // A_ij -= A_ik A_jk^T over K = 128: warp w < 8 owns rows 64 (w / 4) .. and columns
  // 32 (w % 4) .. of the block; with i == j (SYRK) only elements on or below the diagonal are
  // written.
  __device__ static void wide(const Payload& p, const weft::gpu::BlockContext& ctx) {
    const int i0 = p.i * kWide, j0 = p.j * kWide, k0 = p.k * kWide;
    const double* ai = p.a + i0 + static_cast<std::size_t>(k0) * p.lda;
    const double* aj = p.a + j0 + static_cast<std::size_t>(k0) * p.lda;
    auto* buffers = static_cast<double*>(ctx.shared());
    const int warp = ctx.thread() / 32, lane = ctx.thread() % 32;
    const int g = lane / 4, q = lane % 4;
    const int wm = (warp / 4) * 64, wn = (warp % 4) * 32;
    constexpr int chunks = kWide / kDepth;
    const bool active = warp < 8;
    for (int s = 0; s < kStages - 1; ++s) {
      stage(ai, aj, p.lda, buffers + s * kStageElems, s, ctx);
      asm volatile("cp.async.commit_group;\n" ::);
    }
    double acc[4][4][4] = {};
    for (int c = 0; c < chunks; ++c) {
      asm volatile("cp.async.wait_group %0;\n" ::"n"(kStages - 2));
      ctx.sync();  // chunk c is visible; chunk c - 1's buffer is free
      if (c + kStages - 1 < chunks) {
        stage(ai, aj, p.lda, buffers + ((c + kStages - 1) % kStages) * kStageElems, c + kStages - 1,
              ctx);
      }
      asm volatile("cp.async.commit_group;\n" ::);
      if (!active) continue;
      // B's fragments for the step first, then A's a row of fragments at a time: 12 values live
      // beside the 64 sums, so that at the apps' 168 registers a thread it spills little.
      const double* as = buffers + (c % kStages) * kStageElems;
      const double* a_at = as + q * kStride + wm + g;
      const double* b_at = as + kDepth * kStride + q * kStride + wn + g;
#pragma unroll 1
      for (int ks = 0; ks < kDepth; ks += 4) {
        double bf[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) bf[j] = b_at[ks * kStride + 8 * j];  // b: (q, g)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const double af[2] = {a_at[ks * kStride + 16 * i], a_at[ks * kStride + 16 * i + 8]};
#pragma unroll
          for (int j = 0; j < 4; ++j) mma(acc[i][j], af, bf[j]);
        }
      }
    }
    asm volatile("cp.async.wait_group 0;\n" ::);
    ctx.sync();  // every thread's reads of the tiles are done before A_ij, which may be one,
                 // changes
    if (active) subtract(p, i0 + wm + g, j0 + wn + 2 * q, p.i == p.j, acc);
    // The lanes part in subtract's lower-triangle test. Back in the resident kernel the next
    // barrier is an aligned bar.sync, which a warp must reach converged (synccheck reports it
    // otherwise): the call returns with the warp together.
    __syncwarp();
  }
  // A_ij -= the sums, element (row0 + 16 i + 8 (r / 2), col0 + 8 j + r % 2) from acc[i][j][r].
  // A row of fragments' 16 old values are loaded before any of them is stored: one at a time,
  // each load would wait for the store before it (they might alias), a trip to memory for
  // every element in turn.
  __device__ static void subtract(const Payload& p, int row0, int col0, bool lower_only,
                                  const double (&acc)[4][4][4]) {
    double* c_at = p.a + row0 + static_cast<std::size_t>(col0) * p.lda;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      double old[4][4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const int row = 16 * i + 8 * (r / 2), col = 8 * j + r % 2;
          const bool writes = !(lower_only && row0 + row < col0 + col);
          old[j][r] = writes ? c_at[row + static_cast<std::size_t>(col) * p.lda] : 0.0;
        }
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const int row = 16 * i + 8 * (r / 2), col = 8 * j + r % 2;
          if (lower_only && row0 + row < col0 + col) continue;
          c_at[row + static_cast<std::size_t>(col) * p.lda] = old[j][r] - acc[i][j][r];
        }
      }
    }
  }
#endif
};

/// The tile and block tasks of the factorization: POTRF and TRSM on a window of 4 parts from
/// 256 task threads, UpdateBlockWide in UpdateBlock's place.
using CholeskyTasks = weft::gpu::TaskTypes<PotrfTileT<4>, TrsmTileT<4>, UpdateTile, PotrfBlockT<4>,
                                           TrsmBlockT<4>, UpdateBlockWide>;
inline constexpr std::size_t kCholeskyCapacity = 64;  // every payload is at most 32 bytes
using CholeskyPool = weft::gpu::Pool<CholeskyTasks, kCholeskyCapacity>;

/// The resident kernel of CholeskyTasks, for PoolOptions::program (an invalid program in a
/// build without CUDA: a device pool then says so).
weft::gpu::DeviceProgram cholesky_program();

/// Options of a CholeskyPool on the GPUs (`devices`: empty, every one): 256 task threads a
/// block, as many blocks a SM as fit (one: the update's staging takes 132 KiB of shared
/// memory), and a graph table of `graph_capacity` tasks (n = 8192 in blocks of 2 has 45,760).
weft::gpu::PoolOptions cholesky_pool_options(std::vector<int> devices = {},
                                             std::size_t graph_capacity = std::size_t{1} << 16);

}  // namespace apps::gpu
