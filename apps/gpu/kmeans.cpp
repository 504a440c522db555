#include "kmeans.hpp"

#include <algorithm>

#include <weft/cpu/parallel.hpp>

namespace apps::gpu {

void centroid_norms(std::span<const float> centroids, int d, std::vector<float>& norms) {
  for (std::size_t c = 0; c < norms.size(); ++c) {
    float s = 0.0f;
    for (int t = 0; t < d; ++t) s += centroids[c * d + t] * centroids[c * d + t];
    norms[c] = s;
  }
}

void CentroidSums::reset(int k, int d) {
  sums.assign(static_cast<std::size_t>(k) * d, 0.0);
  counts.assign(static_cast<std::size_t>(k), 0);
}

void CentroidSums::add(std::span<const float> points, int d, std::span<const int> labels, int first,
                       int count) {
  add_counts(labels, first, count);
  add_dimensions(points, d, labels, first, count, 0, d);
}

void CentroidSums::add_counts(std::span<const int> labels, int first, int count) {
  for (int i = first; i < first + count; ++i)
    ++counts[static_cast<std::size_t>(labels[static_cast<std::size_t>(i)])];
}

void CentroidSums::add_dimensions(std::span<const float> points, int d, std::span<const int> labels,
                                  int first, int count, int dim_first, int dim_last) {
  for (int i = first; i < first + count; ++i) {
    const auto c = static_cast<std::size_t>(labels[static_cast<std::size_t>(i)]);
    const float* x = points.data() + static_cast<std::size_t>(i) * d;
    double* s = sums.data() + c * d;
    for (int t = dim_first; t < dim_last; ++t) s[t] += x[t];
  }
}

DimensionSlice DimensionSlice::of(int d, int slices, int slice) {
  return {static_cast<int>(static_cast<std::int64_t>(d) * slice / slices),
          static_cast<int>(static_cast<std::int64_t>(d) * (slice + 1) / slices)};
}

int dimension_slices(const weft::cpu::Executor& workers, int d) {
  return std::max(1, std::min(d, static_cast<int>(workers.num_workers())));
}

void CentroidSums::move(int d, std::vector<float>& centroids) const {
  for (std::size_t c = 0; c < counts.size(); ++c) {
    if (counts[c] == 0) continue;
    for (int t = 0; t < d; ++t)
      centroids[c * d + t] = static_cast<float>(sums[c * d + t] / counts[c]);
  }
}

void update_centroids(std::span<const float> points, int d, std::span<const int> labels, int k,
                      std::vector<float>& centroids, weft::cpu::Executor* workers) {
  CentroidSums s;
  s.reset(k, d);
  const int n = static_cast<int>(labels.size());
  if (workers == nullptr) {
    s.add(points, d, labels, 0, n);
  } else {
    s.add_counts(labels, 0, n);
    const int slices = dimension_slices(*workers, d);
    weft::cpu::parallel_for(*workers, 0, slices, [&](std::int64_t slice) {
      const DimensionSlice dims = DimensionSlice::of(d, slices, static_cast<int>(slice));
      s.add_dimensions(points, d, labels, 0, n, dims.first, dims.last);
    });
  }
  s.move(d, centroids);
}

KmeansResult reference_kmeans(std::span<const float> points, int d, int k, int iterations) {
  const int n = static_cast<int>(points.size() / d);
  KmeansResult r;
  r.centroids.assign(points.begin(), points.begin() + static_cast<std::ptrdiff_t>(k) * d);
  r.labels.assign(static_cast<std::size_t>(n), 0);
  std::vector<float> norms(static_cast<std::size_t>(k));
  for (int it = 0; it < iterations; ++it) {
    centroid_norms(r.centroids, d, norms);
    KmeansAssign::Payload p{
        points.data(), r.centroids.data(), norms.data(), r.labels.data(), d, k, 0, n};
    for (int i = 0; i < n; ++i) {
      int best = 0;
      float best_score = KmeansAssign::score(p, i, 0);
      for (int c = 1; c < k; ++c) {
        const float s = KmeansAssign::score(p, i, c);
        if (s < best_score) {
          best_score = s;
          best = c;
        }
      }
      r.labels[static_cast<std::size_t>(i)] = best;
    }
    update_centroids(points, d, r.labels, k, r.centroids);
  }
  return r;
}

}  // namespace apps::gpu
