// K-means' centroid update alone on the CPU (apps/gpu/kmeans.hpp, decision 037): one thread,
// then update_centroids on an executor of W workers, three rounds, for n points of d = 1024
// into k = 128 centroids (labels spread evenly). Built against another tree's kmeans.cpp and
// kmeans.hpp (copy them, with gemm_tile.hpp, into a folder given with -I ahead of -Iapps/gpu,
// and compile that kmeans.cpp) it times that version: decision 037's A/B of dimension slices
// against ranges of points.
//   g++ -std=c++20 -O3 -DNDEBUG -Iinclude -Iapps/gpu lab/probes/kmeans_sums_probe.cpp
//     apps/gpu/kmeans.cpp build/src/libweft.a -lhwloc -lpthread -o /tmp/kmeans_sums &&
//     /tmp/kmeans_sums 100000 2     # n, workers
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <weft/cpu/executor.hpp>

#include "kmeans.hpp"

namespace {

double ms(std::chrono::steady_clock::time_point from, std::chrono::steady_clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 100000;
  const int workers = argc > 2 ? std::atoi(argv[2]) : 2;
  constexpr int d = 1024, k = 128;
  std::vector<float> points(static_cast<std::size_t>(n) * d);
  for (std::size_t i = 0; i < points.size(); ++i) {
    points[i] = static_cast<float>(static_cast<int>((i * 2654435761u) % 17) - 8);
  }
  std::vector<int> labels(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) labels[static_cast<std::size_t>(i)] = (i * 7919) % k;
  std::vector<float> centroids(points.begin(), points.begin() + k * d);
  weft::cpu::ExecutorOptions o;
  o.workers = static_cast<std::size_t>(workers);
  weft::cpu::Executor ex(o);
  for (int round = 0; round < 3; ++round) {
    const auto t0 = std::chrono::steady_clock::now();
    apps::gpu::update_centroids(points, d, labels, k, centroids);
    const auto t1 = std::chrono::steady_clock::now();
    apps::gpu::update_centroids(points, d, labels, k, centroids, &ex);
    const auto t2 = std::chrono::steady_clock::now();
    std::printf("n %d: one thread %.2f ms, %d workers %.2f ms\n", n, ms(t0, t1), workers,
                ms(t1, t2));
  }
}
