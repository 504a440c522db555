#include "tnn.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>

#include <weft/cpu/parallel.hpp>

namespace apps::gpu {

PointSet PointSet::random(int n, int d, std::uint64_t seed) {
  if (n < 2 || d < 1)
    throw std::invalid_argument("apps::gpu::PointSet::random: need n >= 2, d >= 1");
  std::mt19937_64 rng(seed);
  PointSet p;
  p.n = n;
  p.d = d;
  p.row_major.resize(static_cast<std::size_t>(n) * d);
  p.col_major.resize(p.row_major.size());
  p.norms.assign(static_cast<std::size_t>(n), 0.0f);
  for (int i = 0; i < n; ++i) {
    for (int k = 0; k < d; ++k) {
      const auto v = static_cast<float>(static_cast<int>(rng() % 9) - 4);
      p.row_major[static_cast<std::size_t>(i) * d + k] = v;
      p.col_major[i + static_cast<std::size_t>(k) * n] = v;
      p.norms[i] += v * v;
    }
  }
  return p;
}

void check_tnn(const char* caller, const PointSet& points, int t) {
  const std::string where = std::string("apps::gpu::") + caller + ": ";
  if (points.n < 2 || points.d < 1) {
    throw std::invalid_argument(where + "need n >= 2 and d >= 1 (got n " +
                                std::to_string(points.n) + ", d " + std::to_string(points.d) + ")");
  }
  const auto n = static_cast<std::size_t>(points.n);
  const std::size_t coordinates = n * static_cast<std::size_t>(points.d);
  if (points.norms.size() != n || points.col_major.size() != coordinates ||
      points.row_major.size() != coordinates) {
    throw std::invalid_argument(
        where + "the point set is not whole: " + std::to_string(points.norms.size()) + " norms, " +
        std::to_string(points.col_major.size()) + " / " + std::to_string(points.row_major.size()) +
        " coordinates (column / row major) for n " + std::to_string(n) + ", d " +
        std::to_string(points.d));
  }
  if (t < 1 || t >= points.n) {
    throw std::invalid_argument(where + "T must be in [1, n) (got " + std::to_string(t) + ")");
  }
}

std::vector<std::vector<Neighbour>> tnn_from_gram(weft::cpu::Executor& workers,
                                                  const PointSet& points, const float* gram,
                                                  int t) {
  check_tnn("tnn_from_gram", points, t);
  if (gram == nullptr) throw std::invalid_argument("apps::gpu::tnn_from_gram: gram is null");
  const int n = points.n;
  NeighbourHeaps heaps(n, t);
  weft::cpu::parallel_for(workers, 0, (n + 63) / 64, [&](std::int64_t band) {
    std::vector<float> dist(static_cast<std::size_t>(n));
    const int first = static_cast<int>(band) * 64, last = std::min(n, first + 64);
    for (int i = first; i < last; ++i) {
      const float* column = gram + static_cast<std::size_t>(i) * n;
      for (int j = 0; j < n; ++j) {
        dist[static_cast<std::size_t>(j)] = points.norms[i] + points.norms[j] + column[j];
      }
      const std::span<const float> all(dist);
      heaps.offer_run(i, 0, all.first(static_cast<std::size_t>(i)));
      heaps.offer_run(i, i + 1, all.subspan(static_cast<std::size_t>(i) + 1));
    }
  });
  return heaps.sorted();
}

std::vector<std::vector<Neighbour>> reference_tnn(const PointSet& p, int t) {
  check_tnn("reference_tnn", p, t);
  NeighbourHeaps heaps(p.n, t);
  for (int i = 0; i < p.n; ++i) {
    for (int j = 0; j < p.n; ++j) {
      if (i == j) continue;
      float dist = 0;
      for (int k = 0; k < p.d; ++k) {
        const float diff = p.row_major[static_cast<std::size_t>(i) * p.d + k] -
                           p.row_major[static_cast<std::size_t>(j) * p.d + k];
        dist += diff * diff;
      }
      heaps.offer(i, {dist, j});
    }
  }
  return heaps.sorted();
}

namespace {

std::size_t checked_count(int value, const char* what) {
  if (value < 1) {
    throw std::invalid_argument(std::string("apps::gpu::NeighbourHeaps: ") + what +
                                " must be at least 1 (got " + std::to_string(value) + ")");
  }
  return static_cast<std::size_t>(value);
}

}  // namespace

NeighbourHeaps::NeighbourHeaps(int n, int t)
    : t_(checked_count(t, "T")),
      kept_(checked_count(n, "n") * t_),
      size_(static_cast<std::size_t>(n), 0),
      bound_(static_cast<std::size_t>(n), std::numeric_limits<float>::infinity()) {}

namespace {

constexpr std::uint32_t kSignBit = 0x80000000u;

// A neighbour as one integer in Neighbour's order: the distance's bits mapped so that unsigned
// order is the floats' order (negatives flipped whole, the others' sign bit set), then the
// index. Adding 0.0f turns -0.0 into 0.0, which the floats count as equal.
std::uint64_t key_of(Neighbour n) {
  std::uint32_t bits = std::bit_cast<std::uint32_t>(n.first + 0.0f);
  bits = (bits & kSignBit) != 0 ? ~bits : bits | kSignBit;
  return static_cast<std::uint64_t>(bits) << 32 | static_cast<std::uint32_t>(n.second);
}

Neighbour neighbour_of(std::uint64_t key) {
  auto bits = static_cast<std::uint32_t>(key >> 32);
  bits = (bits & kSignBit) != 0 ? bits & ~kSignBit : ~bits;
  return {std::bit_cast<float>(bits), static_cast<int>(static_cast<std::uint32_t>(key))};
}

float distance_of(std::uint64_t key) { return neighbour_of(key).first; }

// Puts `key` in place of a max-heap's top and sifts it down: one pass, where a pop and a push
// would take two.
void replace_top(std::uint64_t* heap, std::size_t size, std::uint64_t key) {
  std::size_t at = 0;
  for (std::size_t child = 1; child < size; child = 2 * at + 1) {
    if (child + 1 < size && heap[child + 1] > heap[child]) ++child;
    if (heap[child] <= key) break;
    heap[at] = heap[child];
    at = child;
  }
  heap[at] = key;
}

}  // namespace

void NeighbourHeaps::offer_to_heap(int point, Neighbour candidate) {
  if (std::isnan(candidate.first)) return;
  if (candidate.second < 0) {
    throw std::invalid_argument("apps::gpu::NeighbourHeaps::offer: candidate index " +
                                std::to_string(candidate.second) + " is negative");
  }
  const auto p = static_cast<std::size_t>(point);
  std::uint64_t* heap = kept_.data() + p * t_;
  const std::uint64_t key = key_of(candidate);
  std::size_t& size = size_[p];
  if (size < t_) {
    heap[size++] = key;
    std::push_heap(heap, heap + size);
    if (size == t_) bound_[p] = distance_of(heap[0]);
    return;
  }
  if (key >= heap[0]) return;  // the same distance as the farthest kept, a higher index
  replace_top(heap, t_, key);
  bound_[p] = distance_of(heap[0]);
}

namespace {

// Calls offer(q) for each q in [0, count) where one may be kept: the distances are tested
// eight at once (may_keep(q), a loop the compiler can make vector compares), and only an eight
// with one that may be kept goes to the heaps; once the heaps are full, most hold none. A bound
// read before an offer lowered it is still safe: offer() checks again. A NaN distance is never
// kept, so an eight of NaNs is skipped.
template <class MayKeep, class Offer>
void offer_eights(std::size_t count, MayKeep may_keep, Offer offer) {
  constexpr std::size_t kEight = 8;
  for (std::size_t q0 = 0; q0 < count; q0 += kEight) {
    const std::size_t m = std::min(kEight, count - q0);
    bool any = m < kEight;  // a last, short eight goes to the heaps untested
    for (std::size_t k = 0; k < kEight && !any; ++k) any |= may_keep(q0 + k);
    if (!any) continue;
    for (std::size_t k = 0; k < m; ++k) offer(q0 + k);
  }
}

}  // namespace

void NeighbourHeaps::offer_run(int point, int first_candidate, std::span<const float> dist) {
  check_points(point, 1);
  const float bound = bound_[static_cast<std::size_t>(point)];
  offer_eights(
      dist.size(), [&](std::size_t q) { return dist[q] <= bound; },
      [&](std::size_t q) {
        offer(point, {dist[q], first_candidate + static_cast<int>(q)});
      });
}

void NeighbourHeaps::offer_to_run(int first_point, int candidate, std::span<const float> dist) {
  check_points(first_point, dist.size());
  const float* bound = bound_.data() + first_point;
  offer_eights(
      dist.size(), [&](std::size_t q) { return dist[q] <= bound[q]; },
      [&](std::size_t q) {
        offer(first_point + static_cast<int>(q), {dist[q], candidate});
      });
}

std::vector<std::vector<Neighbour>> NeighbourHeaps::sorted() const {
  std::vector<std::vector<Neighbour>> out;
  out.reserve(size_.size());
  std::vector<std::uint64_t> keys;
  for (std::size_t p = 0; p < size_.size(); ++p) {
    const std::uint64_t* heap = kept_.data() + p * t_;
    keys.assign(heap, heap + size_[p]);
    std::sort(keys.begin(), keys.end());
    std::vector<Neighbour> v;
    v.reserve(keys.size());
    for (const std::uint64_t key : keys) v.push_back(neighbour_of(key));
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace apps::gpu
