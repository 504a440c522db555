// A simulated machine for the split tables' tests: the GPU runs 100 a second alone and
// `gpu_beside` beside the cores; each of 4 cores runs 10 alone and 9 beside the GPU; every part
// pays a fixed latency; the GPU's times are off by up to `noise.gpu`, each core's by
// -`noise.cpu_low` to +`noise.cpu_high` (by default the spread decision 031 models). Runs
// `regions` regions of 10 work in bucket 5 from what `t` holds and returns the splits used; `t`
// is left as learned.
#pragma once

#include <algorithm>
#include <random>
#include <vector>

#include "weft/split/tables.hpp"

namespace weft::split::test {

struct MachineNoise {
  double gpu = 0.05;
  double cpu_low = 0.2;
  double cpu_high = 0.25;
};

inline std::vector<double> simulate(SplitTables& t, double gpu_beside, unsigned seed, int regions,
                                    MachineNoise noise = {}) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> gpu_noise(1 - noise.gpu, 1 + noise.gpu);
  std::uniform_real_distribution<double> cpu_noise(1 - noise.cpu_low, 1 + noise.cpu_high);
  constexpr double kWork = 10;
  std::vector<double> used;
  for (int region = 0; region < regions; ++region) {
    const double g = t.gsplit(5);
    used.push_back(g);
    const bool both = g > 0 && g < 1;
    RegionTiming r;
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

}  // namespace weft::split::test
