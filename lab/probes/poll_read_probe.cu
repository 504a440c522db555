// How long does one poll of a slot in host-mapped memory take on the GPU, by the shape of the
// read? The pool's tagged-record poll (tree 8bb7057) came back only every ~2.3 us with 256 ns of
// sleep between polls (latency_trace's reads in 200 us, p50 79-94:
// lab/results/h100/tagged_variants-8bb7057.txt). One warp polls a 128-byte-aligned
// host-mapped line the
// CPU does not write, 2000 times, each read timed with %globaltimer from before the loads to
// after every value has been used (a __syncwarp after a shared store of each), no sleep.
// Build and run on the GPU machine from lab/probes:
//   nvcc -O2 -std=c++20 -gencode=arch=compute_90,code=sm_90 poll_read_probe.cu -o poll_read_probe
//   ./poll_read_probe
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cuda/atomic>
#include <vector>

#include "mailbox.cuh"

namespace {

constexpr int kReads = 2000;

enum Variant : int {
  state_acquire_8x4 = 0,   // 8 lanes, 4-byte acquire loads (the old control-line poll)
  tagged_relaxed_8x8 = 1,  // 8 lanes, 8-byte relaxed loads: the whole 64-byte record
  tagged_pool_6x8 = 2,     // words 0, 1, 4-7 relaxed (6 lanes): the pool's words, all relaxed
  tagged_pool_acq = 3,     // words 1, 4-7 relaxed, word 0 acquire by lane 31 (the pool, 8bb7057)
  tagged_one_acquire = 4,  // 8 lanes, 8-byte acquire loads
  single_lane_v2 = 5,      // one lane, 4 relaxed loads of 8 bytes in a row (as a vector would)
  kVariants = 6
};
const char* kNames[kVariants] = {"8 lanes x 4 B acquire (state words)",
                                 "8 lanes x 8 B relaxed (whole record)",
                                 "6 lanes x 8 B relaxed (pool's words)",
                                 "5 relaxed + word 0 acquire, lane 31 (pool)",
                                 "8 lanes x 8 B acquire",
                                 "1 lane, 8 x 8 B relaxed in a row"};

__device__ inline unsigned long long gtime() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ inline std::uint64_t ld_relaxed(const std::uint64_t* p) {
  return cuda::atomic_ref<std::uint64_t, cuda::thread_scope_system>(*const_cast<std::uint64_t*>(p))
      .load(cuda::memory_order_relaxed);
}
__device__ inline std::uint64_t ld_acquire(const std::uint64_t* p) {
  return cuda::atomic_ref<std::uint64_t, cuda::thread_scope_system>(*const_cast<std::uint64_t*>(p))
      .load(cuda::memory_order_acquire);
}
__device__ inline std::uint32_t ld_acquire32(const std::uint32_t* p) {
  return cuda::atomic_ref<std::uint32_t, cuda::thread_scope_system>(*const_cast<std::uint32_t*>(p))
      .load(cuda::memory_order_acquire);
}

__global__ void poll_kernel(const unsigned char* line, int variant, unsigned long long* ns) {
  __shared__ volatile std::uint64_t seen[32];  // volatile: the stores stay
  const unsigned lane = threadIdx.x;
  const auto* w = reinterpret_cast<const std::uint64_t*>(line);
  for (int r = 0; r < kReads; ++r) {
    const unsigned long long t0 = gtime();
    std::uint64_t v = 0;
    switch (variant) {
      case state_acquire_8x4:
        if (lane < 8) v = ld_acquire32(reinterpret_cast<const std::uint32_t*>(line) + lane);
        break;
      case tagged_relaxed_8x8:
        if (lane < 8) v = ld_relaxed(w + lane);
        break;
      case tagged_pool_6x8:
        if (lane < 6) v = ld_relaxed(w + (lane < 2 ? lane : lane + 2));
        break;
      case tagged_pool_acq:
        if (lane < 5) v = ld_relaxed(w + (lane == 0 ? 1 : lane + 3));
        if (lane == 31) v = ld_acquire(w);
        break;
      case tagged_one_acquire:
        if (lane < 8) v = ld_acquire(w + lane);
        break;
      case single_lane_v2:
        if (lane == 0) {
          std::uint64_t a[8];
#pragma unroll
          for (int k = 0; k < 8; ++k) a[k] = ld_relaxed(w + k);
#pragma unroll
          for (int k = 0; k < 8; ++k) v += a[k];
        }
        break;
    }
    seen[lane] = v;  // the value is used before the clock is read again
    __syncwarp();
    if (lane == 0) ns[r] = gtime() - t0;
    __syncwarp();
  }
}

}  // namespace

int main() {
  const MappedBox box(4096);
  unsigned long long* ns = nullptr;
  cudaMalloc(&ns, kReads * sizeof(unsigned long long));
  std::vector<unsigned long long> host(kReads);
  for (int round = 0; round < 2; ++round) {
    for (int v = 0; v < kVariants; ++v) {
      poll_kernel<<<1, 32>>>(box.device, v, ns);
      cudaMemcpy(host.data(), ns, kReads * sizeof(unsigned long long), cudaMemcpyDeviceToHost);
      std::vector<double> t(host.begin() + 100, host.end());  // warmed up
      std::printf("%-44s one read: p10 %6.0f p50 %6.0f p90 %6.0f ns\n", kNames[v], pct(t, 0.1),
                  pct(t, 0.5), pct(t, 0.9));
    }
  }
  cudaFree(ns);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
