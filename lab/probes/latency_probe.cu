// Latency probe for the GPU pool: push->pop of one task after 0 / 200 us / 20 ms of quiet, for
// several pool configurations (lanes, blocks per SM, deep idle on/off); p10/p50/p99 in us.
// Build and run on the GPU machine from the repository root:
//   cd lab/probes && nvcc -O2 -std=c++20 -gencode=arch=compute_90,code=sm_90 -I../../include \
//     latency_probe.cu ../../src/gpu/device_blocks.cu ../../src/gpu/host_blocks.cpp -o probe &&
//     ./probe
#include <cuda_runtime.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <cuda/atomic>
#include <thread>
#include <vector>
#include "empty_pool.cuh"
void run(const char* name, PoolOptions o, int gap_us, bool spin_try) {
  o.backend = Backend::device;
  o.program = device_program<Types, 16>();
  P pool(o);
  std::vector<double> lat;
  for (int i = 0; i < 300; ++i) {
    std::this_thread::sleep_for(std::chrono::microseconds(gap_us));
    double t0 = now();
    pool.push<Empty>({(std::uint64_t)i});
    if (spin_try) {
      P::Record r;
      while (!pool.try_pop(r, 0)) {
      }
    } else
      pool.pop(0);
    lat.push_back((now() - t0) * 1e6);
  }
  std::sort(lat.begin(), lat.end());
  std::printf("%-40s gap %6d us: p10 %7.2f p50 %7.2f p99 %7.2f lanes %zu\n", name, gap_us, lat[30],
              lat[150], lat[297], pool.num_lanes());
}
// The floor: a bare host-mapped mailbox, one block polling one word, CPU -> GPU -> CPU.
// Variant 1 also reads a 64-byte payload (another line) after seeing the word, as a pool
// block does; variant 2 also writes results back and publishes them behind a system-scope
// fence, as a pool block does.
__global__ void mailbox_kernel(unsigned* box, int n, int variant) {
  cuda::atomic_ref<unsigned, cuda::thread_scope_system> in(box[0]), out(box[32]);
  __shared__ uint4 payload[4];
  for (int i = 1; i <= n; ++i) {
    if (threadIdx.x == 0) {
      while (in.load(cuda::memory_order_acquire) != static_cast<unsigned>(i)) {
      }
    }
    __syncthreads();
    if (variant >= 1 && threadIdx.x < 4)
      payload[threadIdx.x] = reinterpret_cast<uint4*>(box + 64)[threadIdx.x];
    __syncthreads();
    if (variant >= 2 && threadIdx.x < 4)
      reinterpret_cast<uint4*>(box + 96)[threadIdx.x] = payload[threadIdx.x];
    __syncthreads();
    if (threadIdx.x == 0) {
      if (variant >= 2)
        cuda::atomic_thread_fence(cuda::memory_order_acq_rel, cuda::thread_scope_system);
      out.store(static_cast<unsigned>(i),
                variant >= 2 ? cuda::memory_order_relaxed : cuda::memory_order_release);
    }
  }
}
void mailbox(int gap_us, int variant) {
  unsigned* box = nullptr;
  cudaHostAlloc(reinterpret_cast<void**>(&box), 512, cudaHostAllocMapped);
  std::memset(box, 0, 512);
  unsigned* dbox = nullptr;
  cudaHostGetDevicePointer(reinterpret_cast<void**>(&dbox), box, 0);
  const int n = 300;
  mailbox_kernel<<<1, 128>>>(dbox, n, variant);
  std::atomic_ref<unsigned> in(box[0]), out(box[32]);
  std::vector<double> lat;
  for (int i = 1; i <= n; ++i) {
    std::this_thread::sleep_for(std::chrono::microseconds(gap_us));
    const double t0 = now();
    in.store(static_cast<unsigned>(i), std::memory_order_release);
    while (out.load(std::memory_order_acquire) != static_cast<unsigned>(i)) {
    }
    lat.push_back((now() - t0) * 1e6);
  }
  cudaDeviceSynchronize();
  cudaFreeHost(box);
  std::sort(lat.begin(), lat.end());
  const char* names[] = {"bare mailbox (floor)", "mailbox + payload read",
                         "mailbox + payload + fence"};
  std::printf("%-40s gap %6d us: p10 %7.2f p50 %7.2f p99 %7.2f\n", names[variant], gap_us, lat[30],
              lat[150], lat[297]);
}
int main() {
  using us = std::chrono::microseconds;
  for (int variant : {0, 1, 2}) {
    for (int gap : {0, 200}) mailbox(gap, variant);
  }
  for (int gap : {0, 200}) {
    run("default", PoolOptions{}, gap, false);
    run("default try_pop spin", PoolOptions{}, gap, true);
    PoolOptions a;
    a.standby_blocks = false;
    run("no standby blocks", a, gap, false);
    PoolOptions b;
    b.scheduler_lanes = 1;
    run("1 lane", b, gap, false);
    PoolOptions c;
    c.blocks_per_sm = 1;
    run("1 block/SM", c, gap, false);
    PoolOptions f;
    f.blocks_per_sm = 1;
    f.ring_depth = 1;
    f.scheduler_lanes = 1;
    run("1 block/SM depth 1, 1 lane", f, gap, false);
    PoolOptions g;
    g.consumer_spin = us(0);
    run("consumer sleeps at once", g, gap, false);
  }
}
