// Regions to converge and later drift of DB1's split on the simulated noisy machine of
// tests/split/split_tables_test.cpp (simulate), over many seeds and noise levels.
//
//   g++ -std=c++20 -O2 -Iinclude lab/probes/split_steady_sim.cpp src/split/split_tables.cpp \
//       -o /tmp/split_steady_sim && /tmp/split_steady_sim
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "weft/split/tables.hpp"

namespace ws = weft::split;

// GPU 100 a second alone, `gpu_beside` beside the cores; 4 cores of 10 alone, 9 beside; the
// GPU's times off by +-gpu_spread, each core's by -cpu_low..+cpu_high.
std::vector<double> simulate(ws::SplitTables& t, double gpu_beside, unsigned seed, int regions,
                             double gpu_spread, double cpu_low, double cpu_high) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> gpu_noise(1 - gpu_spread, 1 + gpu_spread);
  std::uniform_real_distribution<double> cpu_noise(1 - cpu_low, 1 + cpu_high);
  constexpr double kWork = 10;
  std::vector<double> used;
  for (int region = 0; region < regions; ++region) {
    const double g = t.gsplit(5);
    used.push_back(g);
    const bool both = g > 0 && g < 1;
    ws::RegionTiming r;
    r.gpu_work = g * kWork;
    r.gpu_seconds = g > 0 ? (0.002 + r.gpu_work / (both ? gpu_beside : 100.0)) * gpu_noise(rng) : 0;
    const std::vector<double> shares = t.csplit();
    for (std::size_t j = 0; j < 4; ++j) {
      const double w = (1 - g) * kWork * shares[j];
      r.core_work.push_back(w);
      r.core_seconds.push_back(w > 0 ? (0.001 + w / (both ? 9.0 : 10.0)) * cpu_noise(rng) : 0);
    }
    r.seconds =
        std::max(r.gpu_seconds, *std::max_element(r.core_seconds.begin(), r.core_seconds.end()));
    t.update(5, r);
  }
  return used;
}

// A region's time at split g without noise, the slowest of 4 cores taken at 1.16 times their
// mean (the noise's expected maximum): its minimum is near g = 0.72.
double model_seconds(double g) {
  if (g >= 1) return 0.002 + 10 / 100.0;
  if (g <= 0) return 1.16 * (0.001 + 10 / 40.0);
  return std::max(0.002 + g * 10 / 80, 1.16 * (0.001 + (1 - g) * 10 / 36));
}

int main() {
  struct Noise {
    double gpu, low, high;
  };
  for (const Noise n : {Noise{0.05, 0.2, 0.25}, Noise{0.02, 0.1, 0.1}, Noise{0.1, 0.3, 0.4}}) {
    double sum = 0;
    int worst = 0, over5 = 0, moves = 0;
    double drift = 0;
    double cost = 0;
    constexpr int kSeeds = 200;
    for (unsigned seed = 1; seed <= kSeeds; ++seed) {
      ws::SplitOptions o;
      o.buckets = 10;
      o.size_min = 0;
      o.size_max = 100;
      ws::SplitTables t(4, {300, 10}, o);
      // 10 cold regions (the bench's cold run), then 30 more (its timed rounds).
      std::vector<double> used = simulate(t, 80, seed, 40, n.gpu, n.low, n.high);
      const double cold_final = used[9];
      const double final_split = t.gsplit(5);
      int last_off = 0;
      for (int i = 0; i < 10; ++i) {
        if (std::abs(used[i] - final_split) > 0.02) last_off = i + 1;
      }
      const int regions = last_off + 1;
      sum += regions;
      worst = std::max(worst, regions);
      over5 += regions > 5;
      drift = std::max(drift, std::abs(final_split - cold_final));
      for (int i = 10; i < 40; ++i) moves += used[i] != used[i - 1];
      for (int i = 10; i < 40; ++i) cost += model_seconds(used[i]) / model_seconds(0.72);
    }
    std::printf(
        "noise gpu %.2f cores -%.2f/+%.2f: converge mean %.2f worst %d over-5 %d/%d; "
        "largest drift after the cold run %.3f; moves per later region %.2f; later regions "
        "cost %.4f of the balance's\n",
        n.gpu, n.low, n.high, sum / kSeeds, worst, over5, kSeeds, drift, moves / (30.0 * kSeeds),
        cost / (30.0 * kSeeds));
  }
}
