#include "tnn.hpp"

#include <random>

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

std::vector<std::vector<Neighbour>> reference_tnn(const PointSet& p, int t) {
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

NeighbourHeaps::NeighbourHeaps(int n, int t) : t_(t), heaps_(static_cast<std::size_t>(n)) {}

void NeighbourHeaps::offer(int point, Neighbour candidate) {
  auto& h = heaps_[static_cast<std::size_t>(point)];
  if (static_cast<int>(h.size()) < t_) {
    h.push(candidate);
  } else if (candidate < h.top()) {
    h.pop();
    h.push(candidate);
  }
}

std::vector<std::vector<Neighbour>> NeighbourHeaps::sorted() const {
  std::vector<std::vector<Neighbour>> out;
  out.reserve(heaps_.size());
  for (auto h : heaps_) {  // a copy: popping empties it
    std::vector<Neighbour> v;
    while (!h.empty()) {
      v.push_back(h.top());
      h.pop();
    }
    std::reverse(v.begin(), v.end());
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace apps::gpu
