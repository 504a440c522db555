// Pipeline kernels: an IS-like histogram critical region and an LU-like wavefront, the two
// shapes weft::cpu::Team is for (point-to-point signals between neighbours); sequential
// references and weft's versions.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <mutex>

#include "common.hpp"
#include "kernels.hpp"
#include "weft/cpu/parallel.hpp"
#include "weft/cpu/team.hpp"

namespace weft::bench::cpu {

using weft::cpu::StaticPartition;
using weft::cpu::Team;

IsInput is_input(std::size_t keys, int max_key, std::uint64_t seed) {
  IsInput in;
  in.max_key = max_key;
  in.keys.resize(keys);
  std::uint64_t s = seed;
  for (auto& k : in.keys) {
    s = common::splitmix(s);
    // NAS IS draws keys as a sum of uniforms (bell-shaped); four quarters do the same.
    const std::uint64_t q = max_key / 4;
    k = static_cast<std::int32_t>(((s & 0xFFFF) % q) + (((s >> 16) & 0xFFFF) % q) +
                                  (((s >> 32) & 0xFFFF) % q) + ((s >> 48) % q));
  }
  return in;
}

std::vector<std::int64_t> is_histogram_seq(const IsInput& in, int rounds) {
  std::vector<std::int64_t> h(static_cast<std::size_t>(in.max_key), 0);
  for (auto k : in.keys) ++h[static_cast<std::size_t>(k)];
  for (std::size_t k = 0; k < h.size(); ++k)
    h[k] *= bucket_weight(static_cast<std::int64_t>(k), rounds);
  return h;
}

namespace {
double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The critical region's update; rounds == 0 (IS) is a plain, vectorisable add.
void merge_range(std::vector<std::int64_t>& shared, const std::vector<std::int64_t>& mine,
                 std::int64_t b, std::int64_t e, int rounds) {
  if (rounds == 0) {
    for (std::int64_t k = b; k < e; ++k)
      shared[static_cast<std::size_t>(k)] += mine[static_cast<std::size_t>(k)];
    return;
  }
  for (std::int64_t k = b; k < e; ++k) {
    shared[static_cast<std::size_t>(k)] +=
        mine[static_cast<std::size_t>(k)] * bucket_weight(k, rounds);
  }
}

void count_part(const IsInput& in, std::int64_t b, std::int64_t e, std::vector<std::int64_t>& h) {
  h.assign(static_cast<std::size_t>(in.max_key), 0);
  for (std::int64_t i = b; i < e; ++i)
    ++h[static_cast<std::size_t>(in.keys[static_cast<std::size_t>(i)])];
}
}  // namespace

std::vector<std::int64_t> is_histogram_weft(Executor& ex, const IsInput& in, int blocks,
                                            double* merge_seconds, int rounds) {
  const std::size_t p = ex.num_workers();
  std::vector<std::int64_t> shared(static_cast<std::size_t>(in.max_key), 0);
  std::vector<std::vector<std::int64_t>> priv(p);
  const StaticPartition keys(0, static_cast<std::int64_t>(in.keys.size()),
                             static_cast<std::int64_t>(p));
  const StaticPartition buckets(0, in.max_key, std::max(blocks, 1));
  std::mutex lock;
  double t0 = 0;
  weft::cpu::run_team(ex, p, [&](Team& t) {
    const auto r = static_cast<std::int64_t>(t.rank());
    auto& mine = priv[static_cast<std::size_t>(r)];
    count_part(in, keys.begin(r), keys.end(r), mine);
    t.barrier();
    if (r == 0) t0 = now();
    if (blocks == 0) {
      std::lock_guard<std::mutex> g(lock);
      merge_range(shared, mine, 0, static_cast<std::int64_t>(mine.size()), rounds);
    } else {
      // The critical region as a pipeline: block b passes from rank 0 to rank p-1.
      for (int b = 0; b < blocks; ++b) {
        t.wait_prev();
        merge_range(shared, mine, buckets.begin(b), buckets.end(b), rounds);
        t.signal_next();
      }
    }
    t.barrier();
    if (r == 0 && merge_seconds != nullptr) *merge_seconds = now() - t0;
  });
  return shared;
}

// ---- LU-like wavefront ----
Grid lu_input(int n, int nz) {
  Grid g;
  g.n = n;
  g.nz = nz;
  g.v.assign(static_cast<std::size_t>(nz) * n * n, 0.0);
  std::uint64_t s = 7;
  for (int i = 0; i < n * n; ++i) {  // plane 0 holds the input
    s = common::splitmix(s);
    g.v[static_cast<std::size_t>(i)] = static_cast<double>(s % 1000) / 1000.0;
  }
  return g;
}

void lu_wavefront_seq(Grid& g) {
  for (int k = 1; k < g.nz; ++k) {
    for (int i = 0; i < g.n; ++i) common::lu_row(g, k, i);
  }
}

void lu_wavefront_weft(Executor& ex, Grid& g, int participants) {
  weft::cpu::run_team(ex, static_cast<std::size_t>(participants), 0, g.n, [&](Team& t) {
    for (int k = 1; k < g.nz; ++k) {
      t.iter_wait(t.my_begin() - 1);  // row begin-1 of plane k, from the previous rank
      for (std::int64_t i = t.my_begin(); i < t.my_end(); ++i)
        common::lu_row(g, k, static_cast<int>(i));
      t.iter_post(t.my_end());  // row end may start on plane k
    }
  });
}

double grid_max_diff(const Grid& a, const Grid& b) {
  if (a.v.size() != b.v.size()) return 1e300;
  double worst = 0;
  for (std::size_t i = 0; i < a.v.size(); ++i) worst = std::max(worst, std::abs(a.v[i] - b.v[i]));
  return worst;
}

}  // namespace weft::bench::cpu
