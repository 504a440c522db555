// weft/gpu/detail/cuda_check.cuh - the one way weft checks a CUDA runtime call (CUDA
// translation units only): WEFT_CUDA_CHECK(call) throws weft::CudaError naming the call, CUDA's
// error name and text, and the file and line of the call.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "weft/error.hpp"

namespace weft::gpu::detail {

[[noreturn]] inline void throw_cuda(const char* call, cudaError_t e, const char* file, int line) {
  throw CudaError(call, static_cast<int>(e),
                  std::string(call) + " failed: " + cudaGetErrorName(e) + " (" +
                      cudaGetErrorString(e) + ") at " + file + ":" + std::to_string(line));
}

}  // namespace weft::gpu::detail

#define WEFT_CUDA_CHECK(call)                                                \
  do {                                                                       \
    const cudaError_t weft_err_ = (call);                                    \
    if (weft_err_ != cudaSuccess)                                            \
      ::weft::gpu::detail::throw_cuda(#call, weft_err_, __FILE__, __LINE__); \
  } while (0)
