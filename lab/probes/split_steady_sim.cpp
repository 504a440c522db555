// Regions to converge and later drift of DB1's split on the simulated noisy machine of
// tests/split/simulated_machine.hpp (the split tables' tests use it too), over many seeds and
// noise levels.
//
//   g++ -std=c++20 -O2 -Iinclude lab/probes/split_steady_sim.cpp src/split/split_tables.cpp \
//       -o /tmp/split_steady_sim && /tmp/split_steady_sim
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "../../tests/split/simulated_machine.hpp"
#include "weft/split/tables.hpp"

namespace ws = weft::split;

// A region's time at split g without noise, the slowest of 4 cores taken at 1.16 times their
// mean (the noise's expected maximum): its minimum is near g = 0.72.
double model_seconds(double g) {
  if (g >= 1) return 0.002 + 10 / 100.0;
  if (g <= 0) return 1.16 * (0.001 + 10 / 40.0);
  return std::max(0.002 + g * 10 / 80, 1.16 * (0.001 + (1 - g) * 10 / 36));
}

int main() {
  using ws::test::MachineNoise;
  for (const MachineNoise n :
       {MachineNoise{0.05, 0.2, 0.25}, MachineNoise{0.02, 0.1, 0.1}, MachineNoise{0.1, 0.3, 0.4}}) {
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
      std::vector<double> used = ws::test::simulate(t, 80, seed, 40, n);
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
        n.gpu, n.cpu_low, n.cpu_high, sum / kSeeds, worst, over5, kSeeds, drift,
        moves / (30.0 * kSeeds), cost / (30.0 * kSeeds));
  }
}
