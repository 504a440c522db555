// BOTS-style kernels: sequential references and weft's versions.
#include <algorithm>
#include <array>
#include <atomic>
#include <random>

#include "common.hpp"
#include "kernels.hpp"
#include "weft/cpu/parallel.hpp"
#include "weft/cpu/task_group.hpp"

namespace weft::bench::cpu {

using weft::cpu::TaskGroup;

// ---------------------------------------------------------------------------- Fib
long fib_seq(int n) { return n < 2 ? n : fib_seq(n - 1) + fib_seq(n - 2); }

namespace {
long fib_weft_rec(Executor& ex, int n, int cutoff) {
  if (n < 2) return n;
  if (n < cutoff) return fib_seq(n);
  long a = 0;
  TaskGroup g(ex);
  g.spawn([&] { a = fib_weft_rec(ex, n - 1, cutoff); });
  const long b = fib_weft_rec(ex, n - 2, cutoff);
  g.wait();
  return a + b;
}
}  // namespace

// Every weft kernel enters the pool through one root task (Executor::run), as OpenMP's
// versions enter a parallel region and a single.
long fib_weft(Executor& ex, int n, int cutoff) {
  return ex.run([&] { return fib_weft_rec(ex, n, cutoff); });
}

// ---------------------------------------------------------------------------- N-Queens
namespace {
long nqueens_seq_rec(int n, int j, common::Board& a) {
  if (j == n) return 1;
  long count = 0;
  for (int i = 0; i < n; ++i) {
    a[static_cast<std::size_t>(j)] = static_cast<char>(i);
    if (common::queens_ok(j, a)) count += nqueens_seq_rec(n, j + 1, a);
  }
  return count;
}

long nqueens_weft_rec(Executor& ex, int n, int j, const common::Board& a) {
  if (j == n) return 1;
  std::array<long, common::kMaxQueens> counts{};
  TaskGroup g(ex);
  for (int i = 0; i < n; ++i) {
    common::Board b = a;  // each task gets its own copy of the board, as in BOTS
    b[static_cast<std::size_t>(j)] = static_cast<char>(i);
    if (common::queens_ok(j, b)) {
      g.spawn([&ex, &counts, n, j, i, b] {
        counts[static_cast<std::size_t>(i)] = nqueens_weft_rec(ex, n, j + 1, b);
      });
    }
  }
  g.wait();
  long total = 0;
  for (int i = 0; i < n; ++i) total += counts[static_cast<std::size_t>(i)];
  return total;
}
}  // namespace

long nqueens_seq(int n) {
  common::Board a{};
  return nqueens_seq_rec(n, 0, a);
}
long nqueens_weft(Executor& ex, int n) {
  return ex.run([&] { return nqueens_weft_rec(ex, n, 0, common::Board{}); });
}

// ---------------------------------------------------------------------------- UTS
namespace {
std::uint64_t uts_seq_rec(std::uint64_t seed, int depth, const UtsParams& p) {
  const int k = common::uts_children(seed, depth, p);
  std::uint64_t nodes = 1;
  for (int i = 0; i < k; ++i) nodes += uts_seq_rec(common::uts_child_seed(seed, i), depth + 1, p);
  return nodes;
}

std::uint64_t uts_weft_rec(Executor& ex, std::uint64_t seed, int depth, const UtsParams& p,
                           int seq_depth) {
  if (seq_depth >= 0 && depth >= seq_depth) return uts_seq_rec(seed, depth, p);
  const int k = common::uts_children(seed, depth, p);
  if (k == 0) return 1;
  common::ChildCounts counts(k);
  TaskGroup g(ex);
  for (int i = 0; i < k; ++i) {
    g.spawn([&ex, &p, slot = &counts[i], s = common::uts_child_seed(seed, i), depth, seq_depth] {
      *slot = uts_weft_rec(ex, s, depth + 1, p, seq_depth);
    });
  }
  g.wait();
  return 1 + counts.sum();
}
}  // namespace

std::uint64_t uts_seq(const UtsParams& p) { return uts_seq_rec(p.root_seed, 0, p); }
std::uint64_t uts_weft(Executor& ex, const UtsParams& p, int seq_depth) {
  return ex.run([&] { return uts_weft_rec(ex, p.root_seed, 0, p, seq_depth); });
}

// ---------------------------------------------------------------------------- SparseLU
SparseMatrix sparselu_input(int nb, int bs) {
  // BOTS genmat: a fixed sparsity pattern and an LCG fill.
  SparseMatrix m;
  m.nb = nb;
  m.bs = bs;
  m.blocks.resize(static_cast<std::size_t>(nb * nb));
  std::uint32_t init_val = 1325;
  for (int ii = 0; ii < nb; ++ii) {
    for (int jj = 0; jj < nb; ++jj) {
      bool null_entry = false;
      if ((ii < jj) && (ii % 3 != 0)) null_entry = true;
      if ((ii > jj) && (jj % 3 != 0)) null_entry = true;
      if (ii % 2 == 1) null_entry = true;
      if (jj % 2 == 1) null_entry = true;
      if (ii == jj) null_entry = false;
      if (ii == jj - 1) null_entry = false;
      if (ii - 1 == jj) null_entry = false;
      if (null_entry) continue;
      auto& b = m.blocks[static_cast<std::size_t>(ii * nb + jj)];
      b.resize(static_cast<std::size_t>(bs * bs));
      for (float& x : b) {
        init_val = (3125 * init_val) % 65536;
        x = static_cast<float>((static_cast<double>(init_val) - 32768.0) / 16384.0);
      }
      if (ii == jj) {  // diagonally dominant diagonal blocks keep the factorisation stable
        for (int d = 0; d < bs; ++d) b[static_cast<std::size_t>(d * bs + d)] += 4.0f * bs;
      }
    }
  }
  return m;
}

void sparselu_seq(SparseMatrix& m) {
  const int nb = m.nb, bs = m.bs;
  for (int k = 0; k < nb; ++k) {
    common::lu0(m.at(k, k)->data(), bs);
    for (int j = k + 1; j < nb; ++j) {
      if (auto* b = m.at(k, j)) common::fwd(m.at(k, k)->data(), b->data(), bs);
    }
    for (int i = k + 1; i < nb; ++i) {
      if (auto* b = m.at(i, k)) common::bdiv(m.at(k, k)->data(), b->data(), bs);
    }
    for (int i = k + 1; i < nb; ++i) {
      if (m.at(i, k) == nullptr) continue;
      for (int j = k + 1; j < nb; ++j) {
        if (m.at(k, j) == nullptr) continue;
        auto& inner = common::ensure_block(m, i, j);
        common::bmod(m.at(i, k)->data(), m.at(k, j)->data(), inner.data(), bs);
      }
    }
  }
}

namespace {
void sparselu_weft_root(Executor& ex, SparseMatrix& m) {
  const int nb = m.nb, bs = m.bs;
  for (int k = 0; k < nb; ++k) {
    common::lu0(m.at(k, k)->data(), bs);
    const float* diag = m.at(k, k)->data();
    {
      TaskGroup g(ex);
      for (int j = k + 1; j < nb; ++j) {
        if (auto* b = m.at(k, j)) g.spawn([=] { common::fwd(diag, b->data(), bs); });
      }
      for (int i = k + 1; i < nb; ++i) {
        if (auto* b = m.at(i, k)) g.spawn([=] { common::bdiv(diag, b->data(), bs); });
      }
      g.wait();
    }
    TaskGroup g(ex);
    for (int i = k + 1; i < nb; ++i) {
      if (m.at(i, k) == nullptr) continue;
      for (int j = k + 1; j < nb; ++j) {
        if (m.at(k, j) == nullptr) continue;
        auto& inner = common::ensure_block(m, i, j);  // allocated by the spawner: no race
        const float* row = m.at(i, k)->data();
        const float* col = m.at(k, j)->data();
        float* out = inner.data();
        g.spawn([=] { common::bmod(row, col, out, bs); });
      }
    }
    g.wait();
  }
}

}  // namespace

void sparselu_weft(Executor& ex, SparseMatrix& m) {
  ex.run([&] { sparselu_weft_root(ex, m); });
}

double sparselu_max_diff(const SparseMatrix& a, const SparseMatrix& b) {
  if (a.nb != b.nb || a.bs != b.bs) return 1e300;
  double worst = 0;
  for (std::size_t k = 0; k < a.blocks.size(); ++k) {
    if (a.blocks[k].empty() != b.blocks[k].empty()) return 1e300;
    for (std::size_t e = 0; e < a.blocks[k].size(); ++e) {
      const double x = a.blocks[k][e], y = b.blocks[k][e];
      worst = std::max(worst, std::abs(x - y) / std::max(1.0, std::abs(x)));
    }
  }
  return worst;
}

// ---------------------------------------------------------------------------- Multisort
std::vector<std::int32_t> multisort_input(std::size_t n, std::uint64_t seed) {
  std::vector<std::int32_t> v(n);
  std::uint64_t s = seed;
  for (auto& x : v) {
    s = common::splitmix(s);
    x = static_cast<std::int32_t>(s >> 33);
  }
  return v;
}

namespace {
using I = std::int32_t;

void merge_weft(Executor& ex, const I* a, const I* a_end, const I* b, const I* b_end, I* out) {
  const std::size_t na = static_cast<std::size_t>(a_end - a);
  const std::size_t nb = static_cast<std::size_t>(b_end - b);
  if (na + nb <= common::kMergeSize) {
    common::seq_merge(a, a_end, b, b_end, out);
    return;
  }
  if (na < nb) {
    merge_weft(ex, b, b_end, a, a_end, out);
    return;
  }
  const common::MergeSplit split = common::merge_split(a, a_end, b, b_end, out);
  const I* a_mid = split.a_mid;
  const I* b_mid = split.b_mid;
  I* out_mid = split.out_mid;
  TaskGroup g(ex);
  g.spawn([=, &ex] { merge_weft(ex, a, a_mid, b, b_mid, out); });
  merge_weft(ex, a_mid, a_end, b_mid, b_end, out_mid);
  g.wait();
}

void cilksort_weft(Executor& ex, I* low, I* tmp, std::size_t size) {
  if (size < common::kQuickSize) {
    std::sort(low, low + size);
    return;
  }
  const std::size_t q = size / 4;
  I* a = low;
  I* b = a + q;
  I* c = b + q;
  I* d = c + q;
  I* ta = tmp;
  I* tb = ta + q;
  I* tc = tb + q;
  I* td = tc + q;
  const std::size_t last = size - 3 * q;
  {
    TaskGroup g(ex);
    g.spawn([=, &ex] { cilksort_weft(ex, a, ta, q); });
    g.spawn([=, &ex] { cilksort_weft(ex, b, tb, q); });
    g.spawn([=, &ex] { cilksort_weft(ex, c, tc, q); });
    cilksort_weft(ex, d, td, last);
    g.wait();
  }
  {
    TaskGroup g(ex);
    g.spawn([=, &ex] { merge_weft(ex, a, a + q, b, b + q, ta); });
    merge_weft(ex, c, c + q, d, d + last, tc);
    g.wait();
  }
  merge_weft(ex, ta, ta + 2 * q, tc, tc + q + last, a);
}
}  // namespace

void multisort_weft(Executor& ex, std::vector<std::int32_t>& data) {
  std::vector<std::int32_t> tmp(data.size());
  ex.run([&] { cilksort_weft(ex, data.data(), tmp.data(), data.size()); });
}

// ---------------------------------------------------------------------------- Alignment
std::vector<std::string> alignment_input(int sequences, int min_len, int max_len,
                                         std::uint64_t seed) {
  static constexpr char kAmino[] = "ACDEFGHIKLMNPQRSTVWY";
  std::vector<std::string> out;
  std::uint64_t s = seed;
  for (int k = 0; k < sequences; ++k) {
    s = common::splitmix(s);
    const int len =
        min_len + static_cast<int>(s % static_cast<std::uint64_t>(max_len - min_len + 1));
    std::string q(static_cast<std::size_t>(len), 'A');
    for (char& ch : q) {
      s = common::splitmix(s);
      ch = kAmino[s % 20];
    }
    out.push_back(std::move(q));
  }
  return out;
}

int align_pair(const std::string& a, const std::string& b) {
  constexpr int kGap = -4;
  const std::size_t m = b.size();
  std::vector<int> prev(m + 1), cur(m + 1);
  for (std::size_t j = 0; j <= m; ++j) prev[j] = static_cast<int>(j) * kGap;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = static_cast<int>(i) * kGap;
    for (std::size_t j = 1; j <= m; ++j) {
      const int diag = prev[j - 1] + common::substitution(a[i - 1], b[j - 1]);
      cur[j] = std::max({diag, prev[j] + kGap, cur[j - 1] + kGap});
    }
    std::swap(prev, cur);
  }
  return prev[m];
}

std::vector<int> alignment_seq(const std::vector<std::string>& seqs) {
  const std::size_t n = seqs.size();
  std::vector<int> scores(n * n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = i + 1; j < n; ++j) scores[i * n + j] = align_pair(seqs[i], seqs[j]);
  }
  return scores;
}

std::vector<int> alignment_weft(Executor& ex, const std::vector<std::string>& seqs) {
  // BOTS' structure: one task per pair, spawned from a loop over i.
  const std::size_t n = seqs.size();
  std::vector<int> scores(n * n, 0);
  ex.run([&] {
    TaskGroup g(ex);
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t j = i + 1; j < n; ++j) {
        g.spawn([&, i, j] { scores[i * n + j] = align_pair(seqs[i], seqs[j]); });
      }
    }
    g.wait();
  });
  return scores;
}

}  // namespace weft::bench::cpu
