// bench/gpu/cuda_check.hpp - the GPU benchmarks' and demo's CUDA error check: a failed call
// throws std::runtime_error naming the call and the CUDA error.
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#define WEFT_BENCH_CUDA(call)                                                       \
  do {                                                                              \
    const cudaError_t e_ = (call);                                                  \
    if (e_ != cudaSuccess) {                                                        \
      throw std::runtime_error(std::string(#call) + ": " + cudaGetErrorString(e_)); \
    }                                                                               \
  } while (0)
