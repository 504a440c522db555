// What the host-mapped mailbox probes share (fence_probe, tagged_mailbox_probe): a clock, a
// percentile, and the mailbox itself. Header-only, so each probe still builds with the one
// nvcc line in its header (run from lab/probes).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <vector>

inline double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The sample at fraction p (0 to 1) of v sorted.
template <class T>
T pct(std::vector<T> v, double p) {
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(p * static_cast<double>(v.size() - 1))];
}

// Zeroed pinned host memory mapped for the GPU: `host` for the CPU, `device` for a kernel.
// Freed on destruction (after the kernel using it has been synchronized).
struct MappedBox {
  unsigned char* host = nullptr;
  unsigned char* device = nullptr;
  explicit MappedBox(std::size_t bytes) {
    cudaHostAlloc(reinterpret_cast<void**>(&host), bytes, cudaHostAllocMapped);
    std::memset(host, 0, bytes);
    cudaHostGetDevicePointer(reinterpret_cast<void**>(&device), host, 0);
  }
  ~MappedBox() { cudaFreeHost(host); }
  MappedBox(const MappedBox&) = delete;
  MappedBox& operator=(const MappedBox&) = delete;
};
