// Why a new pool's first batch of one task per SM sometimes runs on fewer SMs (the device test
// GpuPool.ABatchOfOneTaskPerSmRunsOnePerSm, round 0; docs/decisions/016-gpu-placement.md "Still
// open"). Each trial makes a pool on GPU 0 (the test's options), waits as the mode says, pushes
// one batch of as many 200-us tasks as the GPU has SMs, and counts the SMs they ran on:
//   fresh    push at once (some lane thread may not have started yet)
//   awake    push 300 us after the constructor returned (every lane started, still spinning)
//   asleep   push 20 ms after (every lane asleep: past the default 1 ms idle spin)
// Prints, per mode, how many trials ran on every SM and the SM counts of the others.
//   one_per_sm_probe [trials]     (default 60)
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cuda_check.cuh"
#include "weft/gpu/device.cuh"
#include "weft/gpu/pool.hpp"

namespace {

struct OnWhichSm {  // as the device test's: works work_ns, reports its SM
  static constexpr std::uint32_t kId = 1;
  struct Payload {
    unsigned long long work_ns;
    unsigned sm;
  };
  WEFT_HD static void run(Payload& p, const weft::gpu::BlockContext& b) {
#if defined(__CUDA_ARCH__)
    const unsigned long long t0 = weft::gpu::detail::global_ns();
    float x = 1.0f + static_cast<float>(b.thread()) * 1e-7f;
    while (weft::gpu::detail::global_ns() - t0 < p.work_ns) {
      for (int i = 0; i < 64; ++i) x = fmaf(x, 0.999f, 1e-7f);
    }
    if (x == 12345.0f) p.work_ns = 0;  // keeps the arithmetic; never true
    if (b.thread() == 0) asm volatile("mov.u32 %0, %%smid;" : "=r"(p.sm));
#else
    (void)b;
    p.sm = 0;
#endif
  }
};

using Types = weft::gpu::TaskTypes<OnWhichSm>;
using SmPool = weft::gpu::Pool<Types, 32>;

// SMs the batch ran on.
std::size_t one_trial(int sms, std::chrono::microseconds wait) {
  weft::gpu::PoolOptions o;
  o.backend = weft::gpu::Backend::device;
  o.program = weft::gpu::device_program<Types, 32>();
  o.devices = {0};
  SmPool pool(o);
  if (wait.count() > 0) std::this_thread::sleep_for(wait);
  std::vector<SmPool::Record> batch(static_cast<std::size_t>(sms),
                                    SmPool::Record::make<OnWhichSm>({200'000, ~0u}));
  pool.push_batch(batch, 0);
  std::set<unsigned> on;
  for (int k = 0; k < sms; ++k) {
    const auto r = pool.pop(0);
    if (!r.ok()) {
      std::printf("a task failed\n");
      std::exit(1);
    }
    on.insert(r.as<OnWhichSm>().sm);
  }
  return on.size();
}

}  // namespace

int main(int argc, char** argv) {
  const int trials = argc > 1 ? std::atoi(argv[1]) : 60;
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  struct Mode {
    const char* name;
    std::chrono::microseconds wait;
  };
  for (const Mode& m : {Mode{"fresh", std::chrono::microseconds(0)},
                        Mode{"awake", std::chrono::microseconds(300)},
                        Mode{"asleep", std::chrono::microseconds(20'000)}}) {
    int whole = 0;
    std::string short_ones;
    for (int t = 0; t < trials; ++t) {
      const std::size_t used = one_trial(sms, m.wait);
      if (used == static_cast<std::size_t>(sms)) {
        ++whole;
      } else {
        short_ones += " " + std::to_string(used);
      }
    }
    std::printf("%-6s %d of %d trials on all %d SMs; the others on:%s\n", m.name, whole, trials,
                sms, short_ones.c_str());
  }
  return 0;
}
