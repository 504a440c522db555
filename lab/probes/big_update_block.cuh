// UpdateBlock (apps/gpu/cholesky_tiles.hpp) for blocks of 2 x 2 tiles as one 128 x 128 product
// on 256 task threads (decision 040's probe body): A_ij -= A_ik A_jk^T over K = 128, 8 warps of
// 64 x 32 on mma m16n8k4, chunks of K 16 deep copied 16 bytes at a time into 4 buffers. With
// i == j (SYRK) only elements on or below the diagonal are written. Other block sizes, fewer
// threads and the host run UpdateBlock itself. Lab only: the pool's apps kernel is not built
// for 256 task threads.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cholesky_tiles.hpp"
#include "fp64_mma.cuh"

namespace lab {

struct UpdateBlockBig {
  static constexpr std::uint32_t kId = apps::gpu::UpdateBlock::kId;
  static constexpr bool kOutOfLine = true;
  static constexpr int kBig = 128, kDepth = 16, kStages = 4, kThreads = 256;
  static constexpr int kStride = kBig + 4;  // both operands depth-major: x[kk * kStride + r]
  static constexpr int kStageElems = 2 * kDepth * kStride;
  static constexpr std::size_t kBigShared = sizeof(double) * kStageElems * kStages;
  static constexpr std::size_t kSharedBytes = kBigShared > apps::gpu::UpdateBlock::kSharedBytes
                                                  ? kBigShared
                                                  : apps::gpu::UpdateBlock::kSharedBytes;
  using Payload = apps::gpu::UpdateBlock::Payload;

  WEFT_HD static void run(Payload& p, const weft::gpu::BlockContext& ctx) {
#if defined(__CUDA_ARCH__)
    if (p.nb == 2 && ctx.threads() >= kThreads) {
      const Payload in = p;
      big(in, ctx);
      return;
    }
#endif
    apps::gpu::UpdateBlock::run(p, ctx);
  }

#if defined(__CUDA_ARCH__)
  // Chunk `c` of K: A_ik's rows (i0 ..) and A_jk's rows (j0 ..), both over K columns k0 + c * 16.
  __device__ static void stage(const double* ai, const double* aj, int lda, double* buffer, int c,
                               const weft::gpu::BlockContext& ctx) {
    double* as = buffer;
    double* bs = buffer + kDepth * kStride;
#pragma unroll 1
    for (int i = ctx.thread(); i < kBig * kDepth / 2; i += ctx.threads()) {
      const int r = 2 * (i % (kBig / 2)), kk = i / (kBig / 2);
      const std::size_t at = r + static_cast<std::size_t>(c * kDepth + kk) * lda;
      lab::copy16(as + kk * kStride + r, ai + at);
      lab::copy16(bs + kk * kStride + r, aj + at);
    }
  }
  __device__ static void big(const Payload& p, const weft::gpu::BlockContext& ctx) {
    constexpr int n = apps::gpu::CholeskyTile::kTile;
    const int i0 = p.i * 2 * n, j0 = p.j * 2 * n, k0 = p.k * 2 * n;
    const double* ai = p.a + i0 + static_cast<std::size_t>(k0) * p.lda;
    const double* aj = p.a + j0 + static_cast<std::size_t>(k0) * p.lda;
    auto* buffers = static_cast<double*>(ctx.shared());
    const int warp = ctx.thread() / 32, lane = ctx.thread() % 32;
    const int g = lane / 4, q = lane % 4;
    const int wm = (warp / 4) * 64, wn = (warp % 4) * 32;  // 2 x 4 warps of 64 x 32
    constexpr int chunks = kBig / kDepth;
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
      const double* as = buffers + (c % kStages) * kStageElems;
      const double* bs = as + kDepth * kStride;
      if (!active) continue;
      // B's fragments for the step first, then A's one row of fragments at a time: 12 values
      // live beside the 64 sums, so that the body fits the pool's 168 registers.
      const double* a_at = as + q * kStride + wm + g;
      const double* b_at = bs + q * kStride + wn + g;
#pragma unroll 1
      for (int ks = 0; ks < kDepth; ks += 4) {
        double bf[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) bf[j] = b_at[ks * kStride + 8 * j];  // b: (q, g)
#pragma unroll
        for (int i = 0; i < 4; ++i) {  // a_r: row g + 8 r, column q
          const double af[2] = {a_at[ks * kStride + 16 * i], a_at[ks * kStride + 16 * i + 8]};
#pragma unroll
          for (int j = 0; j < 4; ++j) lab::mma_m16n8k4(acc[i][j], af, bf[j]);
        }
      }
    }
    asm volatile("cp.async.wait_group 0;\n" ::);
    ctx.sync();  // every thread's reads of the tiles are done before C, which may alias, changes
    if (!active) return;
    const bool lower_only = p.i == p.j;
    // c_r: row g + 8 (r / 2), column 2 q + r % 2 of fragment (i, j).
    double* c_at = p.a + i0 + wm + g + static_cast<std::size_t>(j0 + wn + 2 * q) * p.lda;
    const int row0 = wm + g, col0 = wn + 2 * q;
    // A row of fragments' 16 old values are loaded before any of them is stored: one at a time,
    // each load would wait for the store before it (they might alias), a trip to memory per
    // element (six_warp_tile_probe.cu; decision 043).
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

}  // namespace lab
