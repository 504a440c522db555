// Why does the pool's publication fence cost ~2 us (latency_trace: "gpu: fence") when the bare
// mailbox with a result write and the same fence costs nothing measurable (latency_probe:
// "mailbox + payload + fence" = "mailbox + payload read")? One block serves a host-mapped
// mailbox as a pool block serves a slot: the CPU writes a payload, then the request word
// (release); the block acquires it, reads the payload, writes results, fences (acq_rel, system
// scope, thread 0), stores the answer word. The variants differ only in where and how the
// results are written; the block times its fence with clock64 and %globaltimer.
// Build and run on the GPU machine from the repository root:
//   cd lab/probes && nvcc -O2 -std=c++20 -gencode=arch=compute_90,code=sm_90 fence_probe.cu \
//     -o fence_probe && ./fence_probe
#include <cuda_runtime.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <cuda/atomic>
#include <thread>
#include <vector>

#include "mailbox.cuh"

namespace {

// Byte offsets in the 4 KiB mailbox (each its own 128-byte line unless said).
constexpr int kIn = 0;         // request word (CPU writes)
constexpr int kOut = 128;      // answer word (GPU writes)
constexpr int kPayload = 256;  // 64 bytes the CPU writes before the request, the GPU reads
constexpr int kClean = 512;    // a line the CPU never touches

enum Variant : int {
  none = 0,             // payload read, no result, no fence
  clean_full = 1,       // 64 B (4 x 16 B, one pass) into the clean line + fence
  clean_partial = 2,    // 16 B + a 4-byte status (two stores, as a pool block) into the clean line
  payload_partial = 3,  // same, into the payload's line (the line the CPU just wrote): the pool
  payload_full = 4,     // 64 B into the payload's line
  fence_only = 5,       // no result write, fence
  payload_partial_no_fence = 6,  // pool-like writes, release store instead of the fence
  kVariants = 7
};
const char* kNames[kVariants] = {"payload read only, no fence",
                                 "64 B into a clean line + fence",
                                 "16 B + 4 B into a clean line + fence",
                                 "16 B + 4 B into the payload line + fence (pool)",
                                 "64 B into the payload line + fence",
                                 "fence only",
                                 "16 B + 4 B into payload line, store.release"};

__device__ unsigned long long g_fence_cycles[512];
__device__ unsigned long long g_fence_ns[512];

__device__ inline unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void mailbox_kernel(unsigned char* box, int n, int variant) {
  cuda::atomic_ref<unsigned, cuda::thread_scope_system> in(*reinterpret_cast<unsigned*>(box + kIn));
  cuda::atomic_ref<unsigned, cuda::thread_scope_system> out(
      *reinterpret_cast<unsigned*>(box + kOut));
  __shared__ uint4 payload[4];
  for (int i = 1; i <= n; ++i) {
    if (threadIdx.x == 0) {
      while (in.load(cuda::memory_order_acquire) != static_cast<unsigned>(i)) {
      }
    }
    __syncthreads();
    if (threadIdx.x < 4)
      payload[threadIdx.x] = reinterpret_cast<uint4*>(box + kPayload)[threadIdx.x];
    __syncthreads();
    unsigned char* target =
        (variant == clean_full || variant == clean_partial) ? box + kClean : box + kPayload;
    const bool full = variant == clean_full || variant == payload_full;
    const bool partial = variant == clean_partial || variant == payload_partial ||
                         variant == payload_partial_no_fence;
    if (full && threadIdx.x < 4)
      reinterpret_cast<uint4*>(target)[threadIdx.x] = payload[threadIdx.x];
    if (partial && threadIdx.x == 0) {
      reinterpret_cast<uint4*>(target + 16)[0] = payload[0];  // the result word
      reinterpret_cast<unsigned*>(target)[2] = 0;             // the header's status
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      const long long c0 = clock64();
      const unsigned long long t0 = global_ns();
      const bool fence = variant != none && variant != payload_partial_no_fence;
      if (fence) cuda::atomic_thread_fence(cuda::memory_order_acq_rel, cuda::thread_scope_system);
      const long long c1 = clock64();
      const unsigned long long t1 = global_ns();
      if (i <= 512) {
        g_fence_cycles[i - 1] = static_cast<unsigned long long>(c1 - c0);
        g_fence_ns[i - 1] = t1 - t0;
      }
      out.store(static_cast<unsigned>(i),
                fence ? cuda::memory_order_relaxed : cuda::memory_order_release);
    }
  }
}

void mailbox(int variant, int gap_us) {
  const MappedBox mailbox_memory(4096);
  unsigned char* box = mailbox_memory.host;
  const int n = 400;
  mailbox_kernel<<<1, 128>>>(mailbox_memory.device, n, variant);
  std::atomic_ref<unsigned> in(*reinterpret_cast<unsigned*>(box + kIn));
  std::atomic_ref<unsigned> out(*reinterpret_cast<unsigned*>(box + kOut));
  std::vector<double> lat;
  for (int i = 1; i <= n; ++i) {
    std::this_thread::sleep_for(std::chrono::microseconds(gap_us));
    const double t0 = now();
    // As a pool lane: the payload (and header) first, then the request word with release.
    for (int w = 0; w < 16; ++w) reinterpret_cast<unsigned*>(box + kPayload)[w] = i + w;
    in.store(static_cast<unsigned>(i), std::memory_order_release);
    while (out.load(std::memory_order_acquire) != static_cast<unsigned>(i)) {
    }
    lat.push_back((now() - t0) * 1e6);
  }
  cudaDeviceSynchronize();
  std::vector<unsigned long long> cyc(n), ns(n);
  cudaMemcpyFromSymbol(cyc.data(), g_fence_cycles, n * sizeof(unsigned long long));
  cudaMemcpyFromSymbol(ns.data(), g_fence_ns, n * sizeof(unsigned long long));
  std::printf(
      "%-50s gap %4d us: round trip p50 %5.2f p99 %5.2f us; fence p50 %6llu cycles "
      "%5llu ns, p90 %5llu ns\n",
      kNames[variant], gap_us, pct(lat, 0.5), pct(lat, 0.99), pct(cyc, 0.5), pct(ns, 0.5),
      pct(ns, 0.9));
}

}  // namespace

int main() {
  for (int gap : {0, 200}) {
    for (int v = 0; v < kVariants; ++v) mailbox(v, gap);
  }
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
