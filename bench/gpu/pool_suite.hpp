// bench/gpu/pool_suite.hpp - `weft bench gpu-pool`: the GPU pool against kernel launches and
// CUDA graphs on the same empty tasks (seed 000 §4.1).
#pragma once

#include "../harness/harness.hpp"

namespace weft::bench::gpu {

struct GpuPoolSuiteOptions {
  bool quick = false;
  int samples = 5;
};

/// True when this build has CUDA and a GPU is usable.
bool gpu_available(std::string& why);

Suite run_gpu_pool_suite(const GpuPoolSuiteOptions& options);

}  // namespace weft::bench::gpu
