// apps/gpu/cholesky.hpp - the tiled Cholesky application (seed 000 §4.2; docs/apps.md): A = L L^T
// for a symmetric positive definite FP64 matrix, lower triangle in place, as POTRF, TRSM, SYRK
// and GEMM tile tasks (cholesky_tiles.hpp). CholeskyPlan prepares one size for many matrices
// and has two drivers: one tracks the dependencies on the host (a task is pushed as soon as the
// last task it depends on has been popped); the other pushes the whole task graph at once and
// the pool's blocks resolve the dependencies themselves (Pool::push_graph of a GraphShape
// prepared once). cholesky_on_pool and cholesky_graph_on_pool run one factorization each.
// Written against the public API only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <weft/gpu/pool.hpp>

#include "cholesky_tiles.hpp"

namespace apps::gpu {

/// The task graph of an n x n factorization in tiles of CholeskyTile::kTile, or in blocks of
/// `block` x `block` tiles, one task each (PotrfBlock, TrsmBlock, UpdateBlock).
class CholeskyGraph {
 public:
  enum class Kind : std::uint8_t { potrf, trsm, syrk, gemm };
  struct Task {
    Kind kind;
    int i, j, k;  // potrf: (k, k, k); trsm: (i, k, k); syrk: (i, i, k); gemm: (i, j, k)
  };
  /// Throws std::invalid_argument unless block is 1 to CholeskyBlock::kMaxTiles and n is a
  /// positive multiple of block tiles.
  explicit CholeskyGraph(int n, int block = 1);
  /// The graph's tiles (blocks) a side, and the 64-tiles a block's side.
  [[nodiscard]] int tiles() const noexcept { return tiles_; }
  [[nodiscard]] int block() const noexcept { return block_; }
  [[nodiscard]] const std::vector<Task>& tasks() const noexcept { return tasks_; }
  /// How many tasks each one waits for, and who waits for it.
  [[nodiscard]] const std::vector<int>& dependencies() const noexcept { return deps_; }
  [[nodiscard]] const std::vector<std::vector<int>>& successors() const noexcept { return succ_; }
  /// The dependencies as the pool's graph edges (Pool::prepare_graph), and one priority per
  /// task: 1 on the critical path (on_critical_path), else 0.
  [[nodiscard]] std::vector<weft::gpu::Edge> edges() const;
  [[nodiscard]] std::vector<int> priorities() const;

 private:
  int add(Task t);
  void depends(int task, int on);
  int tiles_;
  int block_;
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

/// Writes the records of the factorization's tasks (tag = task index), at `a` with leading
/// dimension lda, into `records` (its capacity is kept: a plan rewrites them for every matrix).
template <class Record>
void cholesky_records(const CholeskyGraph& graph, double* a, int lda,
                      std::vector<Record>& records) {
  records.clear();
  records.reserve(graph.tasks().size());
  const int nb = graph.block();
  for (std::size_t t = 0; t < graph.tasks().size(); ++t) {
    const CholeskyGraph::Task& x = graph.tasks()[t];
    if (nb > 1) {
      switch (x.kind) {
        case CholeskyGraph::Kind::potrf:
          records.push_back(Record::template make<PotrfBlock>({a, lda, x.k, nb, 0}, t));
          break;
        case CholeskyGraph::Kind::trsm:
          records.push_back(Record::template make<TrsmBlock>({a, lda, x.i, x.k, nb}, t));
          break;
        default:
          records.push_back(Record::template make<UpdateBlock>({a, lda, x.i, x.j, x.k, nb}, t));
      }
      continue;
    }
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
}

/// The column where a finished POTRF task of `graph` found the matrix not positive definite,
/// or -1.
template <class Record>
int first_bad_column(const CholeskyGraph& graph, const CholeskyGraph::Task& x, const Record& r) {
  if (x.kind != CholeskyGraph::Kind::potrf) return -1;
  const int info =
      graph.block() > 1 ? r.template as<PotrfBlock>().info : r.template as<PotrfTile>().info;
  return info == 0 ? -1 : x.k * graph.block() * CholeskyTile::kTile + info - 1;
}

/// The block side, in tiles, that CholeskyPlan(pool, n) takes: 1 (tile by tile) below
/// n = 4096, where the chain of dependent steps bounds the time and larger tasks lengthen it;
/// 2 from there where n allows, where the host's work per task bounds it (decision 039).
[[nodiscard]] constexpr int cholesky_block_for(int n) noexcept {
  constexpr int kBlock = 2;
  return n >= 4096 && n % (kBlock * CholeskyTile::kTile) == 0 ? kBlock : 1;
}

/// Factorizations of one size n, prepared once and run on many matrices through `pool`: the
/// task graph, the records' and results' buffers, and, where the pool runs task graphs that
/// large, the graph's GraphShape (prepared on the first factor()). The pool must outlive it.
/// One thread at a time, and the output queue it factors on carries only its tasks meanwhile.
///
///   apps::gpu::CholeskyPlan plan(pool, n);
///   for (double* a : matrices) plan.factor(a, n);
template <class Pool>
class CholeskyPlan {
 public:
  using Record = typename Pool::Record;
  /// Tasks of cholesky_block_for(n) tiles a side.
  /// Throws std::invalid_argument unless n is a positive multiple of the tile size.
  CholeskyPlan(Pool& pool, int n) : CholeskyPlan(pool, n, cholesky_block_for(n)) {}
  /// Tasks of `block` x `block` tiles (CholeskyGraph). Throws std::invalid_argument as
  /// CholeskyGraph does.
  CholeskyPlan(Pool& pool, int n, int block) : pool_(pool), graph_(n, block) {}

  [[nodiscard]] const CholeskyGraph& graph() const noexcept { return graph_; }
  /// Whether factor() runs the factorization as one task graph (the pool's graph_capacity()
  /// holds it) rather than tracking the dependencies on the host.
  [[nodiscard]] bool as_graph() const { return graph_.tasks().size() <= pool_.graph_capacity(); }

  /// The order n of the matrices the plan factors.
  [[nodiscard]] int order() const noexcept {
    return graph_.tiles() * graph_.block() * CholeskyTile::kTile;
  }

  /// Factors the n x n matrix at `a` (leading dimension lda, where the pool's blocks reach it)
  /// on output queue `out`, as one task graph where as_graph(), else host-tracked. Throws
  /// std::invalid_argument, before any task is pushed, for a null `a` or lda < n, and
  /// std::runtime_error when a task fails or the matrix is not positive definite (naming the
  /// column).
  void factor(double* a, int lda, std::size_t out = 0) {
    if (as_graph()) {
      factor_as_graph(a, lda, out);
    } else {
      factor_host_tracked(a, lda, out);
    }
  }

  /// The blocks start each tile task as soon as its inputs are final, with no round trip
  /// through the host, the tasks on the critical path (on_critical_path) before the others. A
  /// matrix that is not positive definite is reported once every task has ended (the tasks
  /// after the failing POTRF run on its result). Throws std::invalid_argument unless
  /// as_graph().
  void factor_as_graph(double* a, int lda, std::size_t out = 0) {
    if (!as_graph()) {
      throw std::invalid_argument(
          "apps::gpu::CholeskyPlan::factor_as_graph: " + std::to_string(graph_.tasks().size()) +
          " tasks, more than the pool's graph_capacity() (" +
          std::to_string(pool_.graph_capacity()) + ")");
    }
    check_matrix(a, lda, "factor_as_graph");
    if (shape_.tasks() != graph_.tasks().size()) shape_ = prepare_shape();
    record(a, lda);
    pool_.push_graph(shape_, records_, out);
    done_.resize(records_.size());
    int bad_column = -1;
    const char* failure = nullptr;
    for (std::size_t finished = 0; finished < done_.size();) {
      const std::size_t got = pool_.pop_batch(std::span<Record>(done_).subspan(finished), out);
      for (std::size_t d = finished; d < finished + got; ++d) {
        const Record& r = done_[d];
        if (!r.ok()) {
          if (failure == nullptr || r.status != weft::gpu::TaskStatus::cancelled) {
            failure = weft::gpu::to_string(r.status);  // the cause, not the cancellations after
          }
          continue;
        }
        const int column =
            first_bad_column(graph_, graph_.tasks()[static_cast<std::size_t>(r.tag)], r);
        if (column >= 0 && (bad_column < 0 || column < bad_column)) bad_column = column;
      }
      finished += got;
    }
    if (failure != nullptr) {
      throw std::runtime_error("apps::gpu::cholesky: a tile task ended " + std::string(failure));
    }
    if (bad_column >= 0) throw std::runtime_error(not_positive_definite(bad_column));
  }

  /// A task is pushed as soon as the last task it depends on has been popped. Tasks on the
  /// critical path (on_critical_path) are pushed with priority 1, the others with 0: in a
  /// pool of QueueOrder::priority they overtake the queued updates; a FIFO pool ignores
  /// priorities. On a failure nothing more is pushed, and what was pushed is popped before the
  /// error is thrown: the plan (and its queue) can go on to the next matrix.
  void factor_host_tracked(double* a, int lda, std::size_t out = 0) {
    check_matrix(a, lda, "factor_host_tracked");
    const auto& tasks = graph_.tasks();
    waiting_ = graph_.dependencies();
    record(a, lda);
    ready_.clear();
    urgent_.clear();
    auto make_ready = [&](int t) {
      const auto i = static_cast<std::size_t>(t);
      (on_critical_path(tasks[i]) ? urgent_ : ready_).push_back(records_[i]);
    };
    for (int t = 0; t < static_cast<int>(tasks.size()); ++t) {
      if (waiting_[static_cast<std::size_t>(t)] == 0) make_ready(t);
    }
    done_.resize(tasks.size());
    std::string error;  // the first failure: from then on the pushed tasks are only drained
    std::size_t pushed = 0;
    for (std::size_t finished = 0;
         finished < pushed || (error.empty() && finished < tasks.size());) {
      if (error.empty()) {
        pushed += push_ready(urgent_, out, 1) + push_ready(ready_, out, 0);
      }
      const std::size_t got = pool_.pop_batch(done_, out);
      for (std::size_t d = 0; d < got && error.empty(); ++d) {
        const Record& r = done_[d];
        const auto t = static_cast<std::size_t>(r.tag);
        if (!r.ok()) {
          error = "apps::gpu::cholesky: a tile task ended " +
                  std::string(weft::gpu::to_string(r.status));
        } else if (const int column = first_bad_column(graph_, tasks[t], r); column >= 0) {
          error = not_positive_definite(column);
        } else {
          for (const int s : graph_.successors()[t]) {
            if (--waiting_[static_cast<std::size_t>(s)] == 0) make_ready(s);
          }
        }
      }
      finished += got;
    }
    if (!error.empty()) throw std::runtime_error(error);
  }

 private:
  weft::gpu::GraphShape prepare_shape() const {
    return pool_.prepare_graph(graph_.tasks().size(), graph_.edges(), graph_.priorities());
  }
  std::size_t push_ready(std::vector<Record>& tasks, std::size_t out, int priority) {
    const std::size_t n = tasks.size();
    if (n > 0) pool_.push_batch(tasks, out, priority);
    tasks.clear();
    return n;
  }
  void check_matrix(const double* a, int lda, const char* call) const {
    const std::string where = std::string("apps::gpu::CholeskyPlan::") + call + ": ";
    if (a == nullptr) throw std::invalid_argument(where + "the matrix is null");
    if (lda < order()) {
      throw std::invalid_argument(where + "lda " + std::to_string(lda) +
                                  " is less than the plan's order n = " + std::to_string(order()));
    }
  }
  // The tasks' records for the matrix at `a` (leading dimension lda). They depend on nothing
  // else, and no driver changes them, so a plan factoring the same matrix again keeps them.
  void record(double* a, int lda) {
    if (a == recorded_a_ && lda == recorded_lda_ && records_.size() == graph_.tasks().size()) {
      return;
    }
    cholesky_records(graph_, a, lda, records_);
    recorded_a_ = a;
    recorded_lda_ = lda;
  }
  static std::string not_positive_definite(int column) {
    return "apps::gpu::cholesky: the matrix is not positive definite (column " +
           std::to_string(column) + ")";
  }

  Pool& pool_;
  CholeskyGraph graph_;
  weft::gpu::GraphShape shape_;
  std::vector<Record> records_, done_, ready_, urgent_;
  double* recorded_a_ = nullptr;  // the matrix records_ were made for
  int recorded_lda_ = 0;
  std::vector<int> waiting_;
};

/// One factorization, host-tracked (CholeskyPlan::factor_host_tracked): for many matrices of
/// one size, keep a CholeskyPlan instead.
template <class Pool>
void cholesky_on_pool(Pool& pool, double* a, int n, int lda, std::size_t out = 0) {
  CholeskyPlan<Pool>(pool, n).factor_host_tracked(a, lda, out);
}

/// One factorization as one task graph (CholeskyPlan::factor_as_graph). Needs a pool whose
/// graph_capacity() holds the graph's tasks (CholeskyPlan(pool, n).graph().tasks().size(); t
/// tasks a side make t (t + 1) (t + 2) / 6); throws std::invalid_argument when it does not.
template <class Pool>
void cholesky_graph_on_pool(Pool& pool, double* a, int n, int lda, std::size_t out = 0) {
  CholeskyPlan<Pool>(pool, n).factor_as_graph(a, lda, out);
}

/// A symmetric positive definite n x n matrix (column-major): 1 / (1 + |i - j|) off the
/// diagonal, n + 1 on it (diagonally dominant).
std::vector<double> spd_matrix(int n);

/// ||A - L L^T||_F / ||A||_F, with L the lower triangle of `factored` (OpenBLAS where the build
/// has it). Throws std::invalid_argument unless n >= 1 and both hold n x n elements.
double cholesky_residual(const std::vector<double>& a, const std::vector<double>& factored, int n);

}  // namespace apps::gpu
