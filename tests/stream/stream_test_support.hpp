// What the task-stream tests share: expected contents, error-text checks and, in CUDA
// translation units, the GPU count and a kernel that writes its buffer late.
#pragma once

#include <cstddef>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#if defined(__CUDACC__)
#include <cuda_runtime.h>
#endif

namespace stream_test {

/// start, start + 1, ... (n values).
inline std::vector<std::int32_t> iota_from(std::int32_t start, std::size_t n) {
  std::vector<std::int32_t> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

#if defined(__CUDACC__)
/// GPUs this process can use (0 without a driver).
inline int gpus() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

/// out[i] = base + i, after spinning long enough that a copy not ordered after this kernel
/// would read the old contents.
__global__ void fill_slowly(int* out, std::size_t n, int base) {
  const long long start = clock64();
  while (clock64() - start < 2000000) {
  }
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    out[i] = base + static_cast<int>(i);
  }
}
#endif

}  // namespace stream_test
