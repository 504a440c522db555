// apps/gpu/multi_gpu_gemm.hpp - one large DGEMM over every GPU of a pool (seed 000 §4.5;
// docs/apps.md): C = A B (n x n, column-major) cut into 64x64 tiles of C, each a task that any
// GPU of the pool may run. A and B are replicated, one copy per GPU; a task reads the copy of
// the GPU its block is on (the pool numbers the blocks of its GPUs one GPU after the other,
// `blocks_per_gpu` each: docs/gpu.md "Several GPUs") and writes its tile of C, which lives on
// one GPU (the others write it over peer access). Written against the public API only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <weft/gpu/pool.hpp>

#include "gemm_tile.hpp"

namespace apps::gpu {

struct ReplicatedGemmTile {
  static constexpr std::uint32_t kId = 141;
  static constexpr int kMaxGpus = 4;
  static constexpr std::size_t kSharedBytes = DgemmTile::kSharedBytes;
  struct Payload {
    const double* a[kMaxGpus];
    const double* b[kMaxGpus];
    double* c;
    int n, row0, col0, blocks_per_gpu, gpus;
  };
  WEFT_HD static void run(Payload& p, const weft::gpu::BlockContext& ctx) {
    int g = ctx.block() / p.blocks_per_gpu;
    if (g >= p.gpus) g = p.gpus - 1;
    DgemmTile::Payload t{p.a[g], p.b[g], p.c,    p.n,    p.n, p.n, p.n,
                         p.n,    p.n,    p.row0, p.col0, 1.0, 0.0};
    DgemmTile::run(t, ctx);
  }
};

/// The tasks of C = A B; `a` and `b` hold one copy per GPU of the pool (in the pool's device
/// order), `blocks_per_gpu` the pool's blocks per GPU.
template <std::size_t Capacity>
std::vector<weft::gpu::TaskRecord<Capacity>> replicated_gemm_tasks(std::span<const double* const> a,
                                                                   std::span<const double* const> b,
                                                                   double* c, int n,
                                                                   int blocks_per_gpu) {
  static_assert(sizeof(ReplicatedGemmTile::Payload) <= Capacity, "the payload does not fit");
  if (a.empty() || a.size() != b.size() ||
      a.size() > static_cast<std::size_t>(ReplicatedGemmTile::kMaxGpus) || n < 1 ||
      blocks_per_gpu < 1) {
    throw std::invalid_argument(
        "apps::gpu::replicated_gemm_tasks: need one copy of A and of B per GPU (1 to " +
        std::to_string(ReplicatedGemmTile::kMaxGpus) + "), n >= 1 and blocks_per_gpu >= 1");
  }
  for (std::size_t g = 0; g < a.size(); ++g) {
    if (a[g] == nullptr || b[g] == nullptr) {
      throw std::invalid_argument("apps::gpu::replicated_gemm_tasks: GPU " + std::to_string(g) +
                                  "'s copy of " + (a[g] == nullptr ? "A" : "B") + " is null");
    }
  }
  if (c == nullptr) throw std::invalid_argument("apps::gpu::replicated_gemm_tasks: c is null");
  ReplicatedGemmTile::Payload p{};
  for (std::size_t g = 0; g < a.size(); ++g) {
    p.a[g] = a[g];
    p.b[g] = b[g];
  }
  p.c = c;
  p.n = n;
  p.blocks_per_gpu = blocks_per_gpu;
  p.gpus = static_cast<int>(a.size());
  std::vector<weft::gpu::TaskRecord<Capacity>> tasks;
  for (int col = 0; col < n; col += DgemmTile::kTile) {
    for (int row = 0; row < n; row += DgemmTile::kTile) {
      p.row0 = row;
      p.col0 = col;
      tasks.push_back(weft::gpu::TaskRecord<Capacity>::template make<ReplicatedGemmTile>(p));
    }
  }
  return tasks;
}

}  // namespace apps::gpu
