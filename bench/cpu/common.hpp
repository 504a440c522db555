// bench/cpu/common.hpp - the sequential building blocks every implementation shares, so that
// weft and its peers differ only in how they create and schedule work.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels.hpp"

namespace weft::bench::cpu::common {

// ---- N-Queens ----
inline constexpr int kMaxQueens = 20;
using Board = std::array<char, kMaxQueens>;
/// True when queen j (in row j at column a[j]) does not attack rows 0..j-1.
inline bool queens_ok(int j, const Board& a) {
  for (int i = 0; i < j; ++i) {
    const int p = a[static_cast<std::size_t>(i)];
    const int q = a[static_cast<std::size_t>(j)];
    if (p == q || q - p == j - i || p - q == j - i) return false;
  }
  return true;
}

// ---- External spawns ----
// Spins (without yielding the core) for `ns` nanoseconds: the pause of a thread that hands out
// work as it arrives.
inline void spin_for_ns(std::int64_t ns) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(ns);
  while (std::chrono::steady_clock::now() < until) {
  }
}

// ---- UTS ----
inline std::uint64_t splitmix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
/// Children of a node: geometric with mean `branching`, none below max_depth.
inline int uts_children(std::uint64_t seed, int depth, const UtsParams& p) {
  if (depth >= p.max_depth) return 0;
  const double u = static_cast<double>(splitmix(seed) >> 11) * (1.0 / 9007199254740992.0);
  const double prob = 1.0 / (1.0 + p.branching);
  return static_cast<int>(std::floor(std::log(1.0 - u) / std::log(1.0 - prob)));
}
inline std::uint64_t uts_child_seed(std::uint64_t seed, int i) {
  return splitmix(seed ^ (0xD1B54A32D192ED03ull * static_cast<std::uint64_t>(i + 1)));
}

/// Per-child subtree counts of one UTS node: on the stack for the usual few children.
class ChildCounts {
 public:
  explicit ChildCounts(int k) : k_(k) {
    if (k > static_cast<int>(small_.size())) big_.resize(static_cast<std::size_t>(k));
  }
  std::uint64_t& operator[](int i) {
    return big_.empty() ? small_[static_cast<std::size_t>(i)] : big_[static_cast<std::size_t>(i)];
  }
  [[nodiscard]] std::uint64_t sum() {
    std::uint64_t s = 0;
    for (int i = 0; i < k_; ++i) s += (*this)[i];
    return s;
  }

 private:
  int k_;
  std::array<std::uint64_t, 16> small_{};
  std::vector<std::uint64_t> big_;
};

// ---- SparseLU blocks (BOTS kernels) ----
// The SparseLU block kernels, like seq_merge below, are not inlined: every runtime calls the
// same machine code, so the benchmark compares scheduling and not code generation.
[[gnu::noinline]] inline void lu0(float* diag, int bs) {
  for (int k = 0; k < bs; ++k) {
    for (int i = k + 1; i < bs; ++i) {
      diag[i * bs + k] /= diag[k * bs + k];
      const float f = diag[i * bs + k];
      for (int j = k + 1; j < bs; ++j) diag[i * bs + j] -= f * diag[k * bs + j];
    }
  }
}
[[gnu::noinline]] inline void fwd(const float* diag, float* col, int bs) {
  for (int k = 0; k < bs; ++k) {
    for (int i = k + 1; i < bs; ++i) {
      const float f = diag[i * bs + k];
      for (int j = 0; j < bs; ++j) col[i * bs + j] -= f * col[k * bs + j];
    }
  }
}
[[gnu::noinline]] inline void bdiv(const float* diag, float* row, int bs) {
  for (int i = 0; i < bs; ++i) {
    for (int k = 0; k < bs; ++k) {
      row[i * bs + k] /= diag[k * bs + k];
      const float f = row[i * bs + k];
      for (int j = k + 1; j < bs; ++j) row[i * bs + j] -= f * diag[k * bs + j];
    }
  }
}
[[gnu::noinline]] inline void bmod(const float* row, const float* col, float* inner, int bs) {
  for (int i = 0; i < bs; ++i) {
    for (int k = 0; k < bs; ++k) {
      const float f = row[i * bs + k];
      for (int j = 0; j < bs; ++j) inner[i * bs + j] -= f * col[k * bs + j];
    }
  }
}
inline std::vector<float>& ensure_block(SparseMatrix& m, int i, int j) {
  auto& b = m.blocks[static_cast<std::size_t>(i * m.nb + j)];
  if (b.empty()) b.assign(static_cast<std::size_t>(m.bs * m.bs), 0.0f);
  return b;
}

// ---- Multisort (cilksort) ----
inline constexpr std::size_t kQuickSize = 2048;
inline constexpr std::size_t kMergeSize = 2048;

// Not inlined: every runtime's merge then calls the same machine code. Inlined, std::merge's
// loop was compiled differently into each runtime's recursive merge, and the benchmark compared
// code generation instead of scheduling
// (docs/decisions/030-shared-benchmark-kernels-are-out-of-line.md).
[[gnu::noinline]] inline void seq_merge(const std::int32_t* a, const std::int32_t* a_end,
                                        const std::int32_t* b, const std::int32_t* b_end,
                                        std::int32_t* out) {
  std::merge(a, a_end, b, b_end, out);
}
/// How a parallel merge splits: the larger input at its middle, the other where that middle
/// value would go; the two halves merge independently into [out, out_mid) and [out_mid, ...).
struct MergeSplit {
  const std::int32_t* a_mid;
  const std::int32_t* b_mid;
  std::int32_t* out_mid;
};
inline MergeSplit merge_split(const std::int32_t* a, const std::int32_t* a_end,
                              const std::int32_t* b, const std::int32_t* b_end, std::int32_t* out) {
  const std::int32_t* a_mid = a + (a_end - a) / 2;
  const std::int32_t* b_mid = std::lower_bound(b, b_end, *a_mid);
  return MergeSplit{a_mid, b_mid, out + (a_mid - a) + (b_mid - b)};
}

// ---- Alignment: Needleman-Wunsch score with a BLOSUM-like toy matrix, linear gaps ----
inline int substitution(char a, char b) {
  if (a == b) return 5;
  return ((a ^ b) & 1) != 0 ? -3 : -1;
}

// ---- LU-like wavefront: row i of plane k from plane k-1 and row i-1 of plane k ----
// Not inlined, as the SparseLU kernels: weft's and OpenMP's sweeps call one machine-code copy,
// so the comparison measures the pipelines, not two compilations of the loop.
[[gnu::noinline]] inline void lu_row(Grid& g, int k, int i) {
  const int n = g.n;
  double* cur = g.v.data() + (static_cast<std::size_t>(k) * n + i) * n;
  const double* below = cur - static_cast<std::size_t>(n) * n;
  const double* up = i > 0 ? cur - n : nullptr;
  double left = 0.0;
  for (int j = 0; j < n; ++j) {
    const double u = up != nullptr ? up[j] : 0.0;
    left = 0.25 * (below[j] + u + left) + 0.1 * std::sin(below[j]);
    cur[j] = left;
  }
}

// ---- STREAM: one op over [lo, hi) ----
inline void stream_range(StreamOp op, double* __restrict a, double* __restrict b,
                         double* __restrict c, double scalar, std::int64_t lo, std::int64_t hi) {
  switch (op) {
    case StreamOp::copy:
      for (std::int64_t i = lo; i < hi; ++i) c[i] = a[i];
      break;
    case StreamOp::scale:
      for (std::int64_t i = lo; i < hi; ++i) b[i] = scalar * c[i];
      break;
    case StreamOp::add:
      for (std::int64_t i = lo; i < hi; ++i) c[i] = a[i] + b[i];
      break;
    case StreamOp::triad:
      for (std::int64_t i = lo; i < hi; ++i) a[i] = b[i] + scalar * c[i];
      break;
  }
}

}  // namespace weft::bench::cpu::common
