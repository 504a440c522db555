// Latency probe for the GPU pool: push->pop of one task after 0 / 200 us / 20 ms of quiet, for
// several pool configurations (lanes, blocks per SM, deep idle on/off); p10/p50/p99 in us.
// Build and run on the GPU machine from the repository root:
//   cd scripts/probes && nvcc -O2 -std=c++20 -gencode=arch=compute_90,code=sm_90 -I../../include \
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
#include "weft/gpu/device.cuh"
#include "weft/gpu/pool.hpp"
using namespace weft::gpu;
struct Empty {
  static constexpr std::uint32_t kId = 1;
  struct Payload {
    std::uint64_t seq;
  };
  WEFT_HD static void run(Payload&, const BlockContext&) {}
};
using Types = TaskTypes<Empty>;
using P = Pool<Types, 16>;
double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
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
__global__ void mailbox_kernel(unsigned* box, int n) {
  cuda::atomic_ref<unsigned, cuda::thread_scope_system> in(box[0]), out(box[32]);
  for (int i = 1; i <= n; ++i) {
    while (in.load(cuda::memory_order_acquire) != static_cast<unsigned>(i)) {
    }
    out.store(static_cast<unsigned>(i), cuda::memory_order_release);
  }
}
void mailbox(int gap_us) {
  unsigned* box = nullptr;
  cudaHostAlloc(reinterpret_cast<void**>(&box), 256, cudaHostAllocMapped);
  std::memset(box, 0, 256);
  unsigned* dbox = nullptr;
  cudaHostGetDevicePointer(reinterpret_cast<void**>(&dbox), box, 0);
  const int n = 300;
  mailbox_kernel<<<1, 32>>>(dbox, n);
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
  std::printf("%-40s gap %6d us: p10 %7.2f p50 %7.2f p99 %7.2f\n", "bare mailbox (floor)", gap_us,
              lat[30], lat[150], lat[297]);
}
int main() {
  using us = std::chrono::microseconds;
  for (int gap : {0, 200}) mailbox(gap);
  for (int gap : {0, 200}) {
    run("default", PoolOptions{}, gap, false);
    run("default try_pop spin", PoolOptions{}, gap, true);
    PoolOptions a;
    a.warm_idle = us(10'000'000);
    run("never deep idle", a, gap, true);
    PoolOptions b;
    b.scheduler_lanes = 1;
    run("1 lane", b, gap, true);
    PoolOptions c;
    c.blocks_per_sm = 1;
    run("1 block/SM", c, gap, true);
    PoolOptions d;
    d.blocks_per_sm = 1;
    d.warm_idle = us(10'000'000);
    run("1 block/SM never deep", d, gap, true);
    PoolOptions e;
    e.scheduler_lanes = 1;
    e.warm_idle = us(10'000'000);
    run("1 lane never deep", e, gap, true);
    PoolOptions f;
    f.blocks_per_sm = 1;
    f.ring_depth = 1;
    f.scheduler_lanes = 1;
    f.warm_idle = us(10'000'000);
    run("1 block/SM depth 1, 1 lane never deep", f, gap, true);
  }
}
