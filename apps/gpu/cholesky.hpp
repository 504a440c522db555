// apps/gpu/cholesky.hpp - the tiled Cholesky application (seed 000 §4.2; docs/apps.md): A = L L^T
// for a symmetric positive definite FP64 matrix, lower triangle in place, as POTRF, TRSM, SYRK
// and GEMM tile tasks (cholesky_tiles.hpp) whose dependencies the host tracks: a task is
// pushed as soon as the last task it depends on has been popped. Written against the public
// API only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <weft/gpu/pool.hpp>

#include "cholesky_tiles.hpp"

namespace apps::gpu {

/// The task graph of an n x n factorization in tiles of CholeskyTile::kTile.
class CholeskyGraph {
 public:
  enum class Kind : std::uint8_t { potrf, trsm, syrk, gemm };
  struct Task {
    Kind kind;
    int i, j, k;  // potrf: (k, k, k); trsm: (i, k, k); syrk: (i, i, k); gemm: (i, j, k)
  };
  /// Throws std::invalid_argument unless n is a positive multiple of the tile size.
  explicit CholeskyGraph(int n);
  [[nodiscard]] int tiles() const noexcept { return tiles_; }
  [[nodiscard]] const std::vector<Task>& tasks() const noexcept { return tasks_; }
  /// How many tasks each one waits for, and who waits for it.
  [[nodiscard]] const std::vector<int>& dependencies() const noexcept { return deps_; }
  [[nodiscard]] const std::vector<std::vector<int>>& successors() const noexcept { return succ_; }

 private:
  int add(Task t);
  void depends(int task, int on);
  int tiles_;
  std::vector<Task> tasks_;
  std::vector<int> deps_;
  std::vector<std::vector<int>> succ_;
};

/// Whether a task is on the factorization's critical path one panel ahead (the lookahead that
/// StarPU's and PLASMA's tiled Cholesky give a high priority): POTRF, the TRSM of the next
/// row, and the updates of the next panel's column.
inline bool on_critical_path(const CholeskyGraph::Task& t) {
  switch (t.kind) {
    case CholeskyGraph::Kind::potrf:
      return true;
    case CholeskyGraph::Kind::trsm:
      return t.i == t.k + 1;
    default:
      return t.j == t.k + 1;  // SYRK (k+1, k+1, k) and GEMM (i, k+1, k)
  }
}

/// Factors the n x n matrix at `a` (leading dimension lda, where the pool's blocks reach it)
/// through `pool`, on output queue `out`. Tasks on the critical path (on_critical_path) are
/// pushed with priority 1, the others with 0: in a pool of QueueOrder::priority they overtake
/// the queued updates; a FIFO pool ignores priorities. Throws std::runtime_error when a task
/// fails or the matrix is not positive definite (naming the column).
template <class Pool>
void cholesky_on_pool(Pool& pool, double* a, int n, int lda, std::size_t out = 0) {
  using Record = typename Pool::Record;
  const CholeskyGraph graph(n);
  const auto& tasks = graph.tasks();
  std::vector<int> waiting = graph.dependencies();
  auto record = [&](int t) {
    const CholeskyGraph::Task& x = tasks[static_cast<std::size_t>(t)];
    const auto tag = static_cast<std::uint64_t>(t);
    switch (x.kind) {
      case CholeskyGraph::Kind::potrf:
        return Record::template make<PotrfTile>({a, lda, x.k, 0}, tag);
      case CholeskyGraph::Kind::trsm:
        return Record::template make<TrsmTile>({a, lda, x.i, x.k}, tag);
      default:
        return Record::template make<UpdateTile>({a, lda, x.i, x.j, x.k}, tag);
    }
  };
  std::vector<Record> ready, urgent;  // urgent: on the critical path
  auto make_ready = [&](int t) {
    (on_critical_path(tasks[static_cast<std::size_t>(t)]) ? urgent : ready).push_back(record(t));
  };
  for (int t = 0; t < static_cast<int>(tasks.size()); ++t) {
    if (waiting[static_cast<std::size_t>(t)] == 0) make_ready(t);
  }
  std::vector<Record> done(tasks.size());
  for (std::size_t finished = 0; finished < tasks.size();) {
    if (!urgent.empty()) {
      pool.push_batch(urgent, out, 1);
      urgent.clear();
    }
    if (!ready.empty()) {
      pool.push_batch(ready, out, 0);
      ready.clear();
    }
    const std::size_t got = pool.pop_batch(done, out);
    for (std::size_t d = 0; d < got; ++d) {
      const Record& r = done[d];
      const auto t = static_cast<std::size_t>(r.tag);
      if (!r.ok()) {
        throw std::runtime_error("apps::gpu::cholesky: a tile task ended " +
                                 std::string(weft::gpu::to_string(r.status)));
      }
      if (tasks[t].kind == CholeskyGraph::Kind::potrf && r.template as<PotrfTile>().info != 0) {
        throw std::runtime_error(
            "apps::gpu::cholesky: the matrix is not positive definite (column " +
            std::to_string(tasks[t].k * CholeskyTile::kTile + r.template as<PotrfTile>().info - 1) +
            ")");
      }
      for (const int s : graph.successors()[t]) {
        if (--waiting[static_cast<std::size_t>(s)] == 0) make_ready(s);
      }
    }
    finished += got;
  }
}

/// A symmetric positive definite n x n matrix (column-major): 1 / (1 + |i - j|) off the
/// diagonal, n + 1 on it (diagonally dominant).
std::vector<double> spd_matrix(int n);

/// ||A - L L^T||_F / ||A||_F, with L the lower triangle of `factored` (OpenBLAS where the build
/// has it).
double cholesky_residual(const std::vector<double>& a, const std::vector<double>& factored, int n);

}  // namespace apps::gpu
