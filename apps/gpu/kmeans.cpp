#include "kmeans.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

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
  for (int i = first; i < first + count; ++i) {
    const auto c = static_cast<std::size_t>(labels[static_cast<std::size_t>(i)]);
    ++counts[c];
    const float* x = points.data() + static_cast<std::size_t>(i) * d;
    double* s = sums.data() + c * d;
    for (int t = 0; t < d; ++t) s[t] += x[t];
  }
}

void CentroidSums::move(int d, std::vector<float>& centroids) const {
  for (std::size_t c = 0; c < counts.size(); ++c) {
    if (counts[c] == 0) continue;
    for (int t = 0; t < d; ++t)
      centroids[c * d + t] = static_cast<float>(sums[c * d + t] / counts[c]);
  }
}

int partial_sums_for(const weft::cpu::Executor& workers, int n) {
  constexpr int kPointsPerPart = 2048;  // a part's sums (k x d doubles) are worth these points
  const int by_points = std::max(1, n / kPointsPerPart);
  return std::min(by_points, static_cast<int>(std::max<std::size_t>(1, workers.num_workers())));
}

void combine_sums(std::span<const CentroidSums> parts, int k, int d, CentroidSums& total,
                  weft::cpu::Executor& workers) {
  total.reset(k, d);
  weft::cpu::parallel_for(workers, 0, k, [&](std::int64_t centroid) {
    const auto c = static_cast<std::size_t>(centroid);
    double* s = total.sums.data() + c * d;
    for (const CentroidSums& part : parts) {
      total.counts[c] += part.counts[c];
      const double* from = part.sums.data() + c * d;
      for (int t = 0; t < d; ++t) s[t] += from[t];
    }
  });
}

void update_centroids(std::span<const float> points, int d, std::span<const int> labels, int k,
                      std::vector<float>& centroids, weft::cpu::Executor* workers) {
  const std::string where = "apps::gpu::update_centroids: ";
  if (d < 1 || k < 1) {
    throw std::invalid_argument(where + "need d >= 1 and k >= 1 (got d " + std::to_string(d) +
                                ", k " + std::to_string(k) + ")");
  }
  if (labels.size() > points.size() / static_cast<std::size_t>(d) ||
      labels.size() > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    throw std::invalid_argument(where + std::to_string(labels.size()) + " labels for " +
                                std::to_string(points.size() / static_cast<std::size_t>(d)) +
                                " points");
  }
  if (centroids.size() < static_cast<std::size_t>(k) * static_cast<std::size_t>(d)) {
    throw std::invalid_argument(
        where + "centroids hold " + std::to_string(centroids.size()) +
        " floats, fewer than k x d = " + std::to_string(static_cast<std::size_t>(k) * d));
  }
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] < 0 || labels[i] >= k) {
      throw std::invalid_argument(where + "label " + std::to_string(labels[i]) + " of point " +
                                  std::to_string(i) + " is not in [0, " + std::to_string(k) + ")");
    }
  }
  CentroidSums total;
  const int n = static_cast<int>(labels.size());
  if (workers == nullptr) {
    total.reset(k, d);
    total.add(points, d, labels, 0, n);
  } else {
    std::vector<CentroidSums> parts(static_cast<std::size_t>(partial_sums_for(*workers, n)));
    const auto count = static_cast<std::int64_t>(parts.size());
    weft::cpu::parallel_for(*workers, 0, count, [&](std::int64_t part) {
      const auto first = static_cast<int>(n * part / count);
      const auto last = static_cast<int>(n * (part + 1) / count);
      parts[static_cast<std::size_t>(part)].reset(k, d);
      parts[static_cast<std::size_t>(part)].add(points, d, labels, first, last - first);
    });
    combine_sums(parts, k, d, total, *workers);
  }
  total.move(d, centroids);
}

void check_kmeans(const char* caller, std::span<const float> points, int d, int k, int iterations) {
  const std::string where = std::string("apps::gpu::") + caller + ": ";
  if (d < 1 || k < 1 || k > KmeansAssign::kMaxCentroids || iterations < 1) {
    throw std::invalid_argument(
        where + "need d >= 1, 1 <= k <= " + std::to_string(KmeansAssign::kMaxCentroids) +
        " and iterations >= 1 (got d " + std::to_string(d) + ", k " + std::to_string(k) +
        ", iterations " + std::to_string(iterations) + ")");
  }
  const std::size_t n = points.size() / static_cast<std::size_t>(d);
  if (points.size() % static_cast<std::size_t>(d) != 0 || n < static_cast<std::size_t>(k) ||
      n > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    throw std::invalid_argument(where + std::to_string(points.size()) +
                                " floats are not whole points of d = " + std::to_string(d) +
                                ", at least k = " + std::to_string(k) + " and at most 2^31 - 1");
  }
}

KmeansResult reference_kmeans(std::span<const float> points, int d, int k, int iterations) {
  check_kmeans("reference_kmeans", points, d, k, iterations);
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
