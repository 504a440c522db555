// GCC OpenMP versions of the CPU benchmarks: the same kernels (bench/cpu/common.hpp) written as
// an OpenMP user would (parallel + single + task/taskwait, as BOTS does; parallel for with a
// static schedule for STREAM; task depend for the chain; a flag array for the LU wavefront as
// in NAS LU-OMP).
#include <omp.h>

#include <atomic>
#include <thread>

#include "../cpu/common.hpp"
#include "../cpu/kernels.hpp"

namespace weft::bench::cpu {

namespace {
long fib_omp_rec(int n) {
  if (n < 2) return n;
  long a = 0;
#pragma omp task shared(a) firstprivate(n)
  a = fib_omp_rec(n - 1);
  const long b = fib_omp_rec(n - 2);
#pragma omp taskwait
  return a + b;
}

long nqueens_omp_rec(int n, int j, const common::Board& a) {
  if (j == n) return 1;
  std::array<long, common::kMaxQueens> counts{};
  for (int i = 0; i < n; ++i) {
    common::Board b = a;
    b[static_cast<std::size_t>(j)] = static_cast<char>(i);
    if (common::queens_ok(j, b)) {
#pragma omp task shared(counts) firstprivate(b, i, j, n)
      counts[static_cast<std::size_t>(i)] = nqueens_omp_rec(n, j + 1, b);
    }
  }
#pragma omp taskwait
  long total = 0;
  for (int i = 0; i < n; ++i) total += counts[static_cast<std::size_t>(i)];
  return total;
}

std::uint64_t uts_omp_rec(std::uint64_t seed, int depth, const UtsParams& p) {
  const int k = common::uts_children(seed, depth, p);
  if (k == 0) return 1;
  common::ChildCounts counts(k);
  for (int i = 0; i < k; ++i) {
    std::uint64_t* slot = &counts[i];
    const std::uint64_t s = common::uts_child_seed(seed, i);
#pragma omp task firstprivate(slot, s, depth) shared(p)
    *slot = uts_omp_rec(s, depth + 1, p);
  }
#pragma omp taskwait
  return 1 + counts.sum();
}

using I = std::int32_t;
void merge_omp(const I* a, const I* a_end, const I* b, const I* b_end, I* out) {
  const std::size_t na = static_cast<std::size_t>(a_end - a);
  const std::size_t nb = static_cast<std::size_t>(b_end - b);
  if (na + nb <= common::kMergeSize) {
    common::seq_merge(a, a_end, b, b_end, out);
    return;
  }
  if (na < nb) {
    merge_omp(b, b_end, a, a_end, out);
    return;
  }
  const common::MergeSplit split = common::merge_split(a, a_end, b, b_end, out);
  const I* a_mid = split.a_mid;
  const I* b_mid = split.b_mid;
  I* out_mid = split.out_mid;
#pragma omp task firstprivate(a, a_mid, b, b_mid, out)
  merge_omp(a, a_mid, b, b_mid, out);
  merge_omp(a_mid, a_end, b_mid, b_end, out_mid);
#pragma omp taskwait
}

void cilksort_omp(I* low, I* tmp, std::size_t size) {
  if (size < common::kQuickSize) {
    std::sort(low, low + size);
    return;
  }
  const std::size_t q = size / 4;
  I *a = low, *b = a + q, *c = b + q, *d = c + q;
  I *ta = tmp, *tb = ta + q, *tc = tb + q, *td = tc + q;
  const std::size_t last = size - 3 * q;
#pragma omp task firstprivate(a, ta, q)
  cilksort_omp(a, ta, q);
#pragma omp task firstprivate(b, tb, q)
  cilksort_omp(b, tb, q);
#pragma omp task firstprivate(c, tc, q)
  cilksort_omp(c, tc, q);
  cilksort_omp(d, td, last);
#pragma omp taskwait
#pragma omp task firstprivate(a, b, ta, q)
  merge_omp(a, a + q, b, b + q, ta);
  merge_omp(c, c + q, d, d + last, tc);
#pragma omp taskwait
  merge_omp(ta, ta + 2 * q, tc, tc + q + last, a);
}
}  // namespace

long fib_omp(int n) {
  long r = 0;
#pragma omp parallel
#pragma omp single
  r = fib_omp_rec(n);
  return r;
}

long nqueens_omp(int n) {
  long r = 0;
#pragma omp parallel
#pragma omp single
  r = nqueens_omp_rec(n, 0, common::Board{});
  return r;
}

std::uint64_t uts_omp(const UtsParams& p) {
  std::uint64_t r = 0;
#pragma omp parallel
#pragma omp single
  r = uts_omp_rec(p.root_seed, 0, p);
  return r;
}

void sparselu_omp(SparseMatrix& m) {
  const int nb = m.nb, bs = m.bs;
#pragma omp parallel
#pragma omp single
  for (int k = 0; k < nb; ++k) {
    common::lu0(m.at(k, k)->data(), bs);
    const float* diag = m.at(k, k)->data();
    for (int j = k + 1; j < nb; ++j) {
      if (auto* b = m.at(k, j)) {
#pragma omp task firstprivate(b, diag, bs)
        common::fwd(diag, b->data(), bs);
      }
    }
    for (int i = k + 1; i < nb; ++i) {
      if (auto* b = m.at(i, k)) {
#pragma omp task firstprivate(b, diag, bs)
        common::bdiv(diag, b->data(), bs);
      }
    }
#pragma omp taskwait
    for (int i = k + 1; i < nb; ++i) {
      if (m.at(i, k) == nullptr) continue;
      for (int j = k + 1; j < nb; ++j) {
        if (m.at(k, j) == nullptr) continue;
        auto& inner = common::ensure_block(m, i, j);
        const float* row = m.at(i, k)->data();
        const float* col = m.at(k, j)->data();
        float* out = inner.data();
#pragma omp task firstprivate(row, col, out, bs)
        common::bmod(row, col, out, bs);
      }
    }
#pragma omp taskwait
  }
}

void multisort_omp(std::vector<std::int32_t>& data) {
  std::vector<std::int32_t> tmp(data.size());
#pragma omp parallel
#pragma omp single
  cilksort_omp(data.data(), tmp.data(), data.size());
}

std::vector<int> alignment_omp(const std::vector<std::string>& seqs) {
  const std::size_t n = seqs.size();
  std::vector<int> scores(n * n, 0);
#pragma omp parallel
#pragma omp single
  {
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t j = i + 1; j < n; ++j) {
#pragma omp task firstprivate(i, j) shared(scores, seqs)
        scores[i * n + j] = align_pair(seqs[i], seqs[j]);
      }
    }
  }
  return scores;
}

void stream_omp(StreamArrays& s, StreamOp op, double scalar) {
  double* __restrict a = s.a.data();
  double* __restrict b = s.b.data();
  double* __restrict c = s.c.data();
  const auto n = static_cast<std::int64_t>(s.a.size());
  switch (op) {
    case StreamOp::copy:
#pragma omp parallel for schedule(static)
      for (std::int64_t i = 0; i < n; ++i) c[i] = a[i];
      break;
    case StreamOp::scale:
#pragma omp parallel for schedule(static)
      for (std::int64_t i = 0; i < n; ++i) b[i] = scalar * c[i];
      break;
    case StreamOp::add:
#pragma omp parallel for schedule(static)
      for (std::int64_t i = 0; i < n; ++i) c[i] = a[i] + b[i];
      break;
    case StreamOp::triad:
#pragma omp parallel for schedule(static)
      for (std::int64_t i = 0; i < n; ++i) a[i] = b[i] + scalar * c[i];
      break;
  }
}

std::int64_t empty_tasks_omp(std::int64_t n) {
  std::vector<CountSlot> slots(kMaxCountSlots);
#pragma omp parallel
#pragma omp single
  {
    for (std::int64_t i = 0; i < n; ++i) {
#pragma omp task shared(slots)
      ++slots[static_cast<std::size_t>(omp_get_thread_num())].v;
    }
  }
  std::int64_t total = 0;
  for (const auto& s : slots) total += s.v;
  return total;
}

std::int64_t task_chain_omp(std::int64_t n) {
  std::int64_t ran = 0;
  int token = 0;
#pragma omp parallel
#pragma omp single
  {
    for (std::int64_t i = 0; i < n; ++i) {
#pragma omp task depend(inout : token) firstprivate(i) shared(ran)
      {
        if (ran == i) ++ran;
      }
    }
  }
  (void)token;
  return ran;
}

std::vector<std::int64_t> is_histogram_omp(const IsInput& in, int threads) {
  std::vector<std::int64_t> shared(static_cast<std::size_t>(in.max_key), 0);
  const auto n = static_cast<std::int64_t>(in.keys.size());
#pragma omp parallel num_threads(threads)
  {
    std::vector<std::int64_t> mine(static_cast<std::size_t>(in.max_key), 0);
#pragma omp for schedule(static)
    for (std::int64_t i = 0; i < n; ++i)
      ++mine[static_cast<std::size_t>(in.keys[static_cast<std::size_t>(i)])];
#pragma omp critical
    for (std::size_t k = 0; k < mine.size(); ++k) shared[k] += mine[k];
  }
  return shared;
}

void lu_wavefront_omp(Grid& g, int threads) {
  // NAS LU-OMP's pipeline: one flag per thread, polled by its successor.
  std::vector<std::atomic<int>> done(static_cast<std::size_t>(threads));
  for (auto& d : done) d.store(0);
  const int n = g.n;
#pragma omp parallel num_threads(threads)
  {
    const int r = omp_get_thread_num();
    const int p = omp_get_num_threads();
    const int q = (n + p - 1) / p;
    const int rem = p * q - n;
    const int begin = r <= p - rem ? r * q : (p - rem) * q + (r - (p - rem)) * (q - 1);
    const int end = begin + (r < p - rem ? q : q - 1);
    for (int k = 1; k < g.nz; ++k) {
      if (r > 0) {
        while (done[static_cast<std::size_t>(r - 1)].load(std::memory_order_acquire) < k) {
        }
      }
      for (int i = begin; i < end; ++i) common::lu_row(g, k, i);
      done[static_cast<std::size_t>(r)].store(k, std::memory_order_release);
    }
  }
}

}  // namespace weft::bench::cpu
