// bench/cpu/suite.hpp - `weft bench cpu`: the CPU suite against TBB, OpenMP and StarPU.
#pragma once

#include <string>
#include <vector>

#include "../harness/harness.hpp"
#include "weft/cpu/options.hpp"

namespace weft::bench::cpu {

struct CpuSuiteOptions {
  bool quick = false;  // small sizes, 3 samples: a smoke run (CI uses it)
  int samples = 5;     // medians of at least 5 per the issue
  int workers = 0;     // 0: the hardware threads this process may run on
  weft::cpu::Pinning pinning = weft::cpu::Pinning::automatic;  // weft's workers only
  std::vector<std::string> only;  // run only these benchmarks (empty: all)
};

/// Names of the benchmarks of the suite, in run order.
std::vector<std::string> cpu_benchmark_names();

/// Runs the suite; progress lines go to stderr. Returns the filled Suite.
Suite run_cpu_suite(const CpuSuiteOptions& options);

/// The peers compiled into this build ("tbb", "openmp", "starpu").
std::vector<std::string> available_peers();

}  // namespace weft::bench::cpu
