// bench/gpu/apps_suite.hpp - `weft bench gpu-apps`: seed 000's applications through the GPU
// pool against cuBLAS (and, as they land, cuSOLVER, cuSPARSE and streams) on the same
// problems, every result checked against a CPU reference.
#pragma once

#include <string>
#include <vector>

#include "../harness/harness.hpp"

namespace weft::bench::gpu {

struct GpuAppsSuiteOptions {
  bool quick = false;
  int samples = 5;
  /// Applications to run (batched_gemm, cholesky, spmv_bs, tnn, kmeans, multi_gpu_gemm);
  /// empty: all of them.
  std::vector<std::string> only;
};

Suite run_gpu_apps_suite(const GpuAppsSuiteOptions& options);

}  // namespace weft::bench::gpu
