// apps/gpu/cholesky.hpp - the tiled Cholesky application (seed 000 §4.2; docs/apps.md): A = L L^T
// for a symmetric positive definite FP64 matrix, lower triangle in place, as POTRF, TRSM, SYRK
// and GEMM tile tasks (cholesky_tiles.hpp). Two drivers: cholesky_on_pool tracks the
// dependencies on the host (a task is pushed as soon as the last task it depends on has been
// popped); cholesky_graph_on_pool pushes the whole task graph at once and the pool's blocks
// resolve the dependencies themselves (Pool::push_graph). Written against the public API only.
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

/// The records of the factorization's tasks (tag = task index), at `a` with leading dimension
/// lda.
template <class Record>
std::vector<Record> cholesky_records(const CholeskyGraph& graph, double* a, int lda) {
  std::vector<Record> records;
  records.reserve(graph.tasks().size());
  for (std::size_t t = 0; t < graph.tasks().size(); ++t) {
    const CholeskyGraph::Task& x = graph.tasks()[t];
    switch (x.kind) {
      case CholeskyGraph::Kind::potrf:
        records.push_back(Record::template make<PotrfTile>({a, lda, x.k, 0}, t));
        break;
      case CholeskyGraph::Kind::trsm:
        records.push_back(Record::template make<TrsmTile>({a, lda, x.i, x.k}, t));
        break;
      default:
        records.push_back(Record::template make<UpdateTile>({a, lda, x.i, x.j, x.k}, t));
    }
  }
  return records;
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
  const std::vector<Record> records = cholesky_records<Record>(graph, a, lda);
  std::vector<Record> ready, urgent;  // urgent: on the critical path
  auto make_ready = [&](int t) {
    const auto i = static_cast<std::size_t>(t);
    (on_critical_path(tasks[i]) ? urgent : ready).push_back(records[i]);
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

/// The same factorization as one task graph (Pool::push_graph): the blocks start each tile
/// task as soon as its inputs are final, with no round trip through the host, the tasks on
/// the critical path (on_critical_path) before the others. Needs a pool
/// whose graph_capacity() holds the graph's tasks (CholeskyGraph(n).tasks().size(); n / 64
/// tiles t make t (t + 1) (t + 2) / 6). Throws std::invalid_argument when it does not, and
/// std::runtime_error as cholesky_on_pool does. A matrix that is not positive definite is
/// reported once every task has ended (the tasks after the failing POTRF run on its result).
template <class Pool>
void cholesky_graph_on_pool(Pool& pool, double* a, int n, int lda, std::size_t out = 0) {
  using Record = typename Pool::Record;
  const CholeskyGraph graph(n);
  const auto& tasks = graph.tasks();
  if (tasks.size() > pool.graph_capacity()) {
    throw std::invalid_argument("apps::gpu::cholesky_graph_on_pool: " +
                                std::to_string(tasks.size()) + " tasks, more than the pool's " +
                                "graph_capacity() (" + std::to_string(pool.graph_capacity()) + ")");
  }
  const std::vector<Record> records = cholesky_records<Record>(graph, a, lda);
  std::vector<weft::gpu::Edge> edges;
  std::vector<int> priorities;  // the critical path urgent, as cholesky_on_pool pushes it
  priorities.reserve(tasks.size());
  for (std::size_t from = 0; from < tasks.size(); ++from) {
    for (const int to : graph.successors()[from]) {
      edges.push_back({static_cast<std::uint32_t>(from), static_cast<std::uint32_t>(to)});
    }
    priorities.push_back(on_critical_path(tasks[from]) ? 1 : 0);
  }
  pool.push_graph(records, edges, out, priorities);
  std::vector<Record> done(tasks.size());
  int first_bad_column = -1;
  const char* failure = nullptr;
  for (std::size_t finished = 0; finished < tasks.size();) {
    const std::size_t got = pool.pop_batch(std::span<Record>(done).subspan(finished), out);
    for (std::size_t d = finished; d < finished + got; ++d) {
      const Record& r = done[d];
      const CholeskyGraph::Task& x = tasks[static_cast<std::size_t>(r.tag)];
      if (!r.ok()) {
        if (failure == nullptr || r.status != weft::gpu::TaskStatus::cancelled) {
          failure = weft::gpu::to_string(r.status);  // the cause, not the cancellations after
        }
      } else if (x.kind == CholeskyGraph::Kind::potrf && r.template as<PotrfTile>().info != 0) {
        const int column = x.k * CholeskyTile::kTile + r.template as<PotrfTile>().info - 1;
        if (first_bad_column < 0 || column < first_bad_column) first_bad_column = column;
      }
    }
    finished += got;
  }
  if (failure != nullptr) {
    throw std::runtime_error("apps::gpu::cholesky: a tile task ended " + std::string(failure));
  }
  if (first_bad_column >= 0) {
    throw std::runtime_error("apps::gpu::cholesky: the matrix is not positive definite (column " +
                             std::to_string(first_bad_column) + ")");
  }
}

/// A symmetric positive definite n x n matrix (column-major): 1 / (1 + |i - j|) off the
/// diagonal, n + 1 on it (diagonally dominant).
std::vector<double> spd_matrix(int n);

/// ||A - L L^T||_F / ||A||_F, with L the lower triangle of `factored` (OpenBLAS where the build
/// has it).
double cholesky_residual(const std::vector<double>& a, const std::vector<double>& factored, int n);

}  // namespace apps::gpu
