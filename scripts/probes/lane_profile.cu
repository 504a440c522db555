// Where a scheduler lane's time goes: 10^6 empty tasks pushed in batches of 4096 by one thread
// and popped in batches by another (as `weft bench gpu-pool` does), for several lanes, blocks
// per SM and ring depths; each
// lane prints TSC cycles per task by phase at shutdown (WEFT_POOL_PROFILE), this program the
// time the pusher and the popper spent inside the pool's calls. Without WEFT_POOL_PROFILE it
// prints the times only (for A/Bs free of the profile's own cost).
// Build and run on the GPU machine from the repository root:
//   cd scripts/probes && nvcc -O2 -std=c++20 -DWEFT_POOL_PROFILE \
//     -gencode=arch=compute_90,code=sm_90 -I../../include lane_profile.cu \
//     ../../src/gpu/host_blocks.cpp \
//     ../../src/gpu/device_blocks.cu -o lane_profile && ./lane_profile
#include <cuda_runtime.h>
#include <sys/resource.h>
#include <x86intrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <span>
#include <thread>
#include <vector>

#include "empty_pool.cuh"

// Minor page faults of the whole process so far (every thread's: pusher, popper, lanes).
long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

void run(std::size_t lanes, int bps, std::size_t depth, std::uint64_t n) {
  PoolOptions o;
  o.ring_depth = depth;
  o.backend = Backend::device;
  o.program = device_program<Types, 16>();
  o.scheduler_lanes = lanes;
  o.blocks_per_sm = bps;
  P pool(o);
  std::vector<P::Record> records(n);
  for (std::uint64_t i = 0; i < n; ++i) records[i] = P::Record::make<Empty>({i});
  for (int rep = 0; rep < 2; ++rep) {
    double push_s = 0, pop_s = 0;
    std::uint64_t sum = 0;
    const std::uint64_t polls0 = pool.stats().host_polls;
    const long faults0 = minor_faults();
#if defined(WEFT_POOL_PROFILE)
    const std::uint64_t copy0 = detail::g_push_copy_cycles.load(),
                        lock0 = detail::g_push_lock_cycles.load(),
                        total0 = detail::g_push_total_cycles.load();
#endif
    const double t0 = now();
    std::thread pusher([&] {
      for (std::uint64_t i = 0; i < n; i += 4096) {
        const std::size_t len = std::min<std::uint64_t>(4096, n - i);
        const double a = now();
        pool.push_batch(std::span<const P::Record>(records.data() + i, len));
        push_s += now() - a;
      }
    });
    std::vector<P::Record> got(4096);
    for (std::uint64_t done = 0; done < n;) {
      const double a = now();
      const std::size_t k = pool.pop_batch(got);
      pop_s += now() - a;
      for (std::size_t j = 0; j < k; ++j) sum += got[j].as<Empty>().seq;
      done += k;
    }
    pusher.join();
    const double t = now() - t0;
    std::printf(
        "lanes %zu bps %d depth %zu rep %d: %.1f ns/task; pusher in push_batch %.1f ns/task, "
        "popper in pop_batch %.1f ns/task; host reads/task %.2f; page faults/1000 tasks %.2f; ",
        pool.num_lanes(), bps, depth, rep, t / n * 1e9, push_s / n * 1e9, pop_s / n * 1e9,
        static_cast<double>(pool.stats().host_polls - polls0) / n,
        static_cast<double>(minor_faults() - faults0) * 1000.0 / static_cast<double>(n));
#if defined(WEFT_POOL_PROFILE)
    std::printf(
        "push cycles/task: copy %.1f, lock %.1f, all %.1f; ",
        static_cast<double>(detail::g_push_copy_cycles.load() - copy0) / static_cast<double>(n),
        static_cast<double>(detail::g_push_lock_cycles.load() - lock0) / static_cast<double>(n),
        static_cast<double>(detail::g_push_total_cycles.load() - total0) / static_cast<double>(n));
#endif
    std::printf("sum %s\n", sum == n * (n - 1) / 2 ? "ok" : "WRONG");
  }
  std::fflush(stdout);
}

int main() {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::setvbuf(stderr, nullptr, _IOLBF, 0);
  const std::uint64_t t0 = __rdtsc();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  std::printf("TSC %.3f GHz\n", (__rdtsc() - t0) / 0.2e9);
  for (std::size_t lanes : {1, 4, 6, 8}) run(lanes, 0, 8, 1'000'000);  // the default pool's shape
  run(4, 2, 8, 1'000'000);
  return 0;
}
