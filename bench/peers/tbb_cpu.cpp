// oneTBB versions of the CPU benchmarks: the same kernels (bench/cpu/common.hpp), scheduled the
// way a TBB user would write them (task_group for recursion, parallel_for with the static
// partitioner for STREAM).
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>
#include <tbb/spin_mutex.h>
#include <tbb/task_arena.h>
#include <tbb/task_group.h>

#include <algorithm>
#include <mutex>

#include "../cpu/common.hpp"
#include "../cpu/kernels.hpp"

namespace weft::bench::cpu {

long fib_tbb(int n) {
  if (n < 2) return n;
  long a = 0;
  tbb::task_group g;
  g.run([&] { a = fib_tbb(n - 1); });
  const long b = fib_tbb(n - 2);
  g.wait();
  return a + b;
}

namespace {
long nqueens_tbb_rec(int n, int j, const common::Board& a) {
  if (j == n) return 1;
  std::array<long, common::kMaxQueens> counts{};
  tbb::task_group g;
  for (int i = 0; i < n; ++i) {
    common::Board b = a;
    b[static_cast<std::size_t>(j)] = static_cast<char>(i);
    if (common::queens_ok(j, b)) {
      g.run([&counts, n, j, i, b] {
        counts[static_cast<std::size_t>(i)] = nqueens_tbb_rec(n, j + 1, b);
      });
    }
  }
  g.wait();
  long total = 0;
  for (int i = 0; i < n; ++i) total += counts[static_cast<std::size_t>(i)];
  return total;
}

std::uint64_t uts_tbb_rec(std::uint64_t seed, int depth, const UtsParams& p) {
  const int k = common::uts_children(seed, depth, p);
  if (k == 0) return 1;
  common::ChildCounts counts(k);
  tbb::task_group g;
  for (int i = 0; i < k; ++i) {
    g.run([&p, slot = &counts[i], s = common::uts_child_seed(seed, i), depth] {
      *slot = uts_tbb_rec(s, depth + 1, p);
    });
  }
  g.wait();
  return 1 + counts.sum();
}

using I = std::int32_t;
void merge_tbb(const I* a, const I* a_end, const I* b, const I* b_end, I* out) {
  const std::size_t na = static_cast<std::size_t>(a_end - a);
  const std::size_t nb = static_cast<std::size_t>(b_end - b);
  if (na + nb <= common::kMergeSize) {
    common::seq_merge(a, a_end, b, b_end, out);
    return;
  }
  if (na < nb) {
    merge_tbb(b, b_end, a, a_end, out);
    return;
  }
  const common::MergeSplit split = common::merge_split(a, a_end, b, b_end, out);
  const I* a_mid = split.a_mid;
  const I* b_mid = split.b_mid;
  I* out_mid = split.out_mid;
  tbb::task_group g;
  g.run([=] { merge_tbb(a, a_mid, b, b_mid, out); });
  merge_tbb(a_mid, a_end, b_mid, b_end, out_mid);
  g.wait();
}

void cilksort_tbb(I* low, I* tmp, std::size_t size) {
  if (size < common::kQuickSize) {
    std::sort(low, low + size);
    return;
  }
  const std::size_t q = size / 4;
  I *a = low, *b = a + q, *c = b + q, *d = c + q;
  I *ta = tmp, *tb = ta + q, *tc = tb + q, *td = tc + q;
  const std::size_t last = size - 3 * q;
  {
    tbb::task_group g;
    g.run([=] { cilksort_tbb(a, ta, q); });
    g.run([=] { cilksort_tbb(b, tb, q); });
    g.run([=] { cilksort_tbb(c, tc, q); });
    cilksort_tbb(d, td, last);
    g.wait();
  }
  {
    tbb::task_group g;
    g.run([=] { merge_tbb(a, a + q, b, b + q, ta); });
    merge_tbb(c, c + q, d, d + last, tc);
    g.wait();
  }
  merge_tbb(ta, ta + 2 * q, tc, tc + q + last, a);
}
}  // namespace

long nqueens_tbb(int n) { return nqueens_tbb_rec(n, 0, common::Board{}); }
std::uint64_t uts_tbb(const UtsParams& p) { return uts_tbb_rec(p.root_seed, 0, p); }

void sparselu_tbb(SparseMatrix& m) {
  const int nb = m.nb, bs = m.bs;
  for (int k = 0; k < nb; ++k) {
    common::lu0(m.at(k, k)->data(), bs);
    const float* diag = m.at(k, k)->data();
    {
      tbb::task_group g;
      for (int j = k + 1; j < nb; ++j) {
        if (auto* b = m.at(k, j)) g.run([=] { common::fwd(diag, b->data(), bs); });
      }
      for (int i = k + 1; i < nb; ++i) {
        if (auto* b = m.at(i, k)) g.run([=] { common::bdiv(diag, b->data(), bs); });
      }
      g.wait();
    }
    tbb::task_group g;
    for (int i = k + 1; i < nb; ++i) {
      if (m.at(i, k) == nullptr) continue;
      for (int j = k + 1; j < nb; ++j) {
        if (m.at(k, j) == nullptr) continue;
        auto& inner = common::ensure_block(m, i, j);
        const float* row = m.at(i, k)->data();
        const float* col = m.at(k, j)->data();
        float* out = inner.data();
        g.run([=] { common::bmod(row, col, out, bs); });
      }
    }
    g.wait();
  }
}

void multisort_tbb(std::vector<std::int32_t>& data) {
  std::vector<std::int32_t> tmp(data.size());
  cilksort_tbb(data.data(), tmp.data(), data.size());
}

std::vector<int> alignment_tbb(const std::vector<std::string>& seqs) {
  const std::size_t n = seqs.size();
  std::vector<int> scores(n * n, 0);
  tbb::task_group g;
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = i + 1; j < n; ++j) {
      g.run([&, i, j] { scores[i * n + j] = align_pair(seqs[i], seqs[j]); });
    }
  }
  g.wait();
  return scores;
}

void stream_tbb(StreamArrays& s, StreamOp op, double scalar) {
  double* __restrict a = s.a.data();
  double* __restrict b = s.b.data();
  double* __restrict c = s.c.data();
  const std::size_t n = s.a.size();
  tbb::parallel_for(
      tbb::blocked_range<std::size_t>(0, n),
      [=](const tbb::blocked_range<std::size_t>& r) {
        common::stream_range(op, a, b, c, scalar, static_cast<std::int64_t>(r.begin()),
                             static_cast<std::int64_t>(r.end()));
      },
      tbb::static_partitioner());
}

std::int64_t empty_tasks_tbb(std::int64_t n) {
  std::vector<CountSlot> slots(kMaxCountSlots);
  tbb::task_group g;
  for (std::int64_t i = 0; i < n; ++i) {
    g.run([&slots] {
      ++slots[static_cast<std::size_t>(tbb::this_task_arena::current_thread_index())].v;
    });
  }
  g.wait();
  std::int64_t total = 0;
  for (const auto& s : slots) total += s.v;
  return total;
}

std::int64_t external_spawns_tbb(std::int64_t n, std::int64_t pause_ns) {
  std::vector<CountSlot> slots(kMaxCountSlots);
  tbb::task_group g;
  for (std::int64_t i = 0; i < n; i += 2) {
    for (std::int64_t k = i; k < std::min(n, i + 2); ++k) {
      g.run([&slots] {
        ++slots[static_cast<std::size_t>(tbb::this_task_arena::current_thread_index())].v;
      });
    }
    common::spin_for_ns(pause_ns);
  }
  g.wait();
  std::int64_t total = 0;
  for (const auto& s : slots) total += s.v;
  return total;
}

namespace {
struct TbbLink {
  tbb::task_group* group;
  std::int64_t* ran;
  std::int64_t i;
  std::int64_t n;
  void operator()() const {
    if (*ran != i) return;
    ++*ran;
    if (i + 1 < n) group->run(TbbLink{group, ran, i + 1, n});
  }
};
}  // namespace

std::int64_t task_chain_tbb(std::int64_t n) {
  std::int64_t ran = 0;
  tbb::task_group g;
  g.run(TbbLink{&g, &ran, 0, n});
  g.wait();
  return ran;
}

std::vector<std::int64_t> is_histogram_tbb(const IsInput& in, int threads) {
  std::vector<std::int64_t> shared(static_cast<std::size_t>(in.max_key), 0);
  tbb::spin_mutex lock;
  const std::size_t n = in.keys.size();
  tbb::parallel_for(
      tbb::blocked_range<std::size_t>(0, n, (n + threads - 1) / threads),
      [&](const tbb::blocked_range<std::size_t>& r) {
        std::vector<std::int64_t> mine(static_cast<std::size_t>(in.max_key), 0);
        for (std::size_t i = r.begin(); i < r.end(); ++i)
          ++mine[static_cast<std::size_t>(in.keys[i])];
        tbb::spin_mutex::scoped_lock g(lock);
        for (std::size_t k = 0; k < mine.size(); ++k) shared[k] += mine[k];
      },
      tbb::static_partitioner());
  return shared;
}

}  // namespace weft::bench::cpu
