// apps/gpu/batched_gemm.hpp - the batched GEMM application (seed 000 §4.2; docs/apps.md): many
// independent products C_i = A_i B_i of equal or varied sizes, cut into 64x64 tile tasks of
// GemmTileBody and run through a weft::gpu::Pool. Written against the public API only.
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

struct GemmShape {
  int m = 0, n = 0, k = 0;
};

/// A batch of independent column-major products packed into three buffers (A, B, C): matrix i
/// starts at a_at[i], b_at[i], c_at[i], with leading dimensions m, k and m.
struct GemmBatch {
  std::vector<GemmShape> shapes;
  std::vector<std::size_t> a_at, b_at, c_at;
  std::size_t a_size = 0, b_size = 0, c_size = 0;

  /// The largest m, n or k a product may have.
  static constexpr int kMaxSide = 1 << 30;

  /// `count` products of m x k by k x n. Throws std::invalid_argument unless count >= 1 and
  /// 1 <= m, n, k <= kMaxSide.
  static GemmBatch uniform(int count, int m, int n, int k);
  /// `count` products with m, n and k drawn uniformly from [lo, hi] (a fixed seed: the same
  /// batch every time).
  /// Throws std::invalid_argument unless count >= 1 and 1 <= lo <= hi <= kMaxSide.
  static GemmBatch variable(int count, int lo, int hi, std::uint64_t seed);
  /// Throws std::invalid_argument, naming `caller`, the product and what is wrong, unless the
  /// batch is consistent: one offset of each kind per shape, every size in [1, kMaxSide], and
  /// every matrix inside its buffer's size (a batch assembled by hand, field by field); and,
  /// for a batch with products, naming the buffer when a, b or c is null.
  void check(const char* caller, const void* a, const void* b, const void* c) const;
  /// The 64x64 tile tasks of the batch.
  [[nodiscard]] std::size_t tiles() const;
  /// Floating-point operations of the batch (2 m n k each).
  [[nodiscard]] double flops() const;
};

/// Inputs with a fixed pattern (small integers over powers of two: exact in FP32 sums).
template <class T>
void fill_inputs(const GemmBatch& batch, std::vector<T>& a, std::vector<T>& b);

/// C = A B for every product, on the CPU (OpenBLAS where the build has it). Throws
/// std::invalid_argument as gemm_tasks does.
template <class T>
void reference_gemm(const GemmBatch& batch, const T* a, const T* b, T* c);

/// The largest |x - ref| / (1 + |ref|) over C.
template <class T>
double max_relative_error(std::span<const T> got, std::span<const T> ref);

/// The batch's tile tasks for a pool of payload capacity `Capacity`: C = A B with A, B and C
/// the buffers' addresses where the pool's blocks reach them (device memory on the device
/// backend, host memory on the host backend).
/// Throws std::invalid_argument for an inconsistent batch (GemmBatch::check) or a null buffer.
template <class T, std::size_t Capacity>
std::vector<weft::gpu::TaskRecord<Capacity>> gemm_tasks(const GemmBatch& batch, const T* a,
                                                        const T* b, T* c) {
  batch.check("gemm_tasks", a, b, c);
  using Tile = std::conditional_t<std::is_same_v<T, double>, DgemmTile, SgemmTile>;
  constexpr int kTile = Tile::kTile;
  std::vector<weft::gpu::TaskRecord<Capacity>> tasks;
  tasks.reserve(batch.tiles());
  for (std::size_t i = 0; i < batch.shapes.size(); ++i) {
    const GemmShape s = batch.shapes[i];
    for (int col = 0; col < s.n; col += kTile) {
      for (int row = 0; row < s.m; row += kTile) {
        typename Tile::Payload p{a + batch.a_at[i],
                                 b + batch.b_at[i],
                                 c + batch.c_at[i],
                                 s.m,
                                 s.n,
                                 s.k,
                                 s.m,
                                 s.k,
                                 s.m,
                                 row,
                                 col,
                                 T(1),
                                 T(0)};
        tasks.push_back(weft::gpu::TaskRecord<Capacity>::template make<Tile>(p, i));
      }
    }
  }
  return tasks;
}

/// Runs `tasks` through `pool` (one push, then pops until every one is back, on output queue
/// `out`, which carries this call's tasks alone meanwhile). Throws std::runtime_error naming
/// the first task popped that did not end ok, once every task is back: nothing of this call
/// is left in the queue for a later one. (With a watchdog, PoolOptions::task_deadline, tasks
/// that never end hold their blocks: the call waits for the tasks queued behind them.)
template <class Pool>
void run_tasks(Pool& pool, std::span<const typename Pool::Record> tasks, std::size_t out = 0) {
  pool.push_batch(tasks, out);
  std::vector<typename Pool::Record> done(std::min<std::size_t>(tasks.size(), 4096));
  std::string failure;
  for (std::size_t got = 0; got < tasks.size();) {
    // Never more than this call is owed: a record past them would be another's.
    const std::size_t owed = std::min(done.size(), tasks.size() - got);
    const std::size_t k = pool.pop_batch(std::span(done).first(owed), out);
    for (std::size_t j = 0; j < k && failure.empty(); ++j) {
      if (!done[j].ok()) {
        failure = "apps::gpu: a task of matrix " + std::to_string(done[j].tag) + " ended " +
                  weft::gpu::to_string(done[j].status);
      }
    }
    got += k;
  }
  if (!failure.empty()) throw std::runtime_error(failure);
}

}  // namespace apps::gpu
