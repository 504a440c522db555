// bench/gpu/apps_suite.hpp - `weft bench gpu-apps`: seed 000's applications through the GPU
// pool against cuBLAS (and, as they land, cuSOLVER, cuSPARSE and streams) on the same
// problems, every result checked against a CPU reference.
#pragma once

#include "../harness/harness.hpp"

namespace weft::bench::gpu {

struct GpuAppsSuiteOptions {
  bool quick = false;
  int samples = 5;
};

Suite run_gpu_apps_suite(const GpuAppsSuiteOptions& options);

}  // namespace weft::bench::gpu
