#include "cholesky.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#if APPS_HAVE_CBLAS
#include <cblas.h>
#endif

namespace apps::gpu {

CholeskyGraph::CholeskyGraph(int n, int block) : block_(block) {
  if (block < 1 || block > CholeskyBlock::kMaxTiles) {
    throw std::invalid_argument("apps::gpu::CholeskyGraph: block must be 1 to " +
                                std::to_string(CholeskyBlock::kMaxTiles) + " tiles (got " +
                                std::to_string(block) + ")");
  }
  const int nb = CholeskyTile::kTile * block;
  if (n < nb || n % nb != 0) {
    throw std::invalid_argument("apps::gpu::CholeskyGraph: n must be a positive multiple of " +
                                std::to_string(nb) + " (got " + std::to_string(n) + ")");
  }
  tiles_ = n / nb;
  const auto t = static_cast<std::size_t>(tiles_);
  // 2343 tiles a side make the most tasks an int counts: t (t + 1) (t + 2) / 6 <= 2^31 - 1.
  constexpr std::size_t kMaxTilesASide = 2343;
  static_assert(kMaxTilesASide * (kMaxTilesASide + 1) * (kMaxTilesASide + 2) / 6 <=
                static_cast<std::size_t>(std::numeric_limits<int>::max()));
  if (t > kMaxTilesASide) {
    throw std::invalid_argument("apps::gpu::CholeskyGraph: n = " + std::to_string(n) + " makes " +
                                std::to_string(t) + " tiles a side; at most " +
                                std::to_string(kMaxTilesASide) +
                                " (2^31 - 1 tasks; larger blocks make fewer)");
  }
  // The last task to write each tile so far (-1: none), updated as the steps k go on: what the
  // next task on that tile waits for.
  std::vector<int> potrf(t, -1), trsm(t * t, -1), syrk(t, -1), gemm(t * t, -1);
  auto ix = [t](int i, int j) {
    return static_cast<std::size_t>(i) * t + static_cast<std::size_t>(j);
  };
  const int tiles = tiles_;
  for (int k = 0; k < tiles; ++k) {
    potrf[k] = add({Kind::potrf, k, k, k});
    if (k > 0) depends(potrf[k], syrk[k]);  // SYRK (k, k, k - 1)
    for (int i = k + 1; i < tiles; ++i) {
      const int x = trsm[ix(i, k)] = add({Kind::trsm, i, k, k});
      depends(x, potrf[k]);
      if (k > 0) depends(x, gemm[ix(i, k)]);  // GEMM (i, k, k - 1)
    }
    for (int i = k + 1; i < tiles; ++i) {
      const int previous = syrk[i];  // SYRK (i, i, k - 1), or -1
      const int s = syrk[i] = add({Kind::syrk, i, i, k});
      depends(s, trsm[ix(i, k)]);
      if (k > 0) depends(s, previous);
      for (int j = k + 1; j < i; ++j) {
        const int before = gemm[ix(i, j)];  // GEMM (i, j, k - 1), or -1
        const int g = gemm[ix(i, j)] = add({Kind::gemm, i, j, k});
        depends(g, trsm[ix(i, k)]);
        depends(g, trsm[ix(j, k)]);
        if (k > 0) depends(g, before);
      }
    }
  }
}

int CholeskyGraph::add(Task t) {
  tasks_.push_back(t);
  deps_.push_back(0);
  succ_.emplace_back();
  return static_cast<int>(tasks_.size()) - 1;
}

void CholeskyGraph::depends(int task, int on) {
  ++deps_[static_cast<std::size_t>(task)];
  succ_[static_cast<std::size_t>(on)].push_back(task);
}

std::vector<weft::gpu::Edge> CholeskyGraph::edges() const {
  std::vector<weft::gpu::Edge> edges;
  for (std::size_t from = 0; from < succ_.size(); ++from) {
    for (const int to : succ_[from]) {
      edges.push_back({static_cast<std::uint32_t>(from), static_cast<std::uint32_t>(to)});
    }
  }
  return edges;
}

std::vector<int> CholeskyGraph::priorities() const {
  std::vector<int> priorities;
  priorities.reserve(tasks_.size());
  for (const Task& t : tasks_) priorities.push_back(on_critical_path(t) ? 1 : 0);
  return priorities;
}

std::vector<double> spd_matrix(int n) {
  if (n < 1) {
    throw std::invalid_argument("apps::gpu::spd_matrix: n must be >= 1 (got " + std::to_string(n) +
                                ")");
  }
  std::vector<double> a(static_cast<std::size_t>(n) * n);
  for (int c = 0; c < n; ++c) {
    for (int r = 0; r < n; ++r) {
      a[r + static_cast<std::size_t>(c) * n] = r == c ? n + 1.0 : 1.0 / (1.0 + std::abs(r - c));
    }
  }
  return a;
}

double cholesky_residual(const std::vector<double>& a, const std::vector<double>& factored, int n) {
  const std::size_t elements =
      n < 1 ? 0 : static_cast<std::size_t>(n) * static_cast<std::size_t>(n);
  if (n < 1 || a.size() < elements || factored.size() < elements) {
    throw std::invalid_argument("apps::gpu::cholesky_residual: n = " + std::to_string(n) +
                                " needs n >= 1 and n x n elements in each (got " +
                                std::to_string(a.size()) + " and " +
                                std::to_string(factored.size()) + ")");
  }
  const auto nn = static_cast<std::size_t>(n);
  std::vector<double> l(nn * nn, 0.0), llt(nn * nn, 0.0);
  for (std::size_t c = 0; c < nn; ++c) {
    for (std::size_t r = c; r < nn; ++r) l[r + c * nn] = factored[r + c * nn];
  }
#if APPS_HAVE_CBLAS
  cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, n, n, n, 1.0, l.data(), n, l.data(), n, 0.0,
              llt.data(), n);
#else
  for (std::size_t c = 0; c < nn; ++c) {
    for (std::size_t r = 0; r < nn; ++r) {
      double s = 0;
      for (std::size_t q = 0; q <= std::min(r, c); ++q) s += l[r + q * nn] * l[c + q * nn];
      llt[r + c * nn] = s;
    }
  }
#endif
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < nn * nn; ++i) {
    diff += (a[i] - llt[i]) * (a[i] - llt[i]);
    norm += a[i] * a[i];
  }
  return std::sqrt(diff / norm);
}

}  // namespace apps::gpu
