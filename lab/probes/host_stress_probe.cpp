// The host backend under the exactly-once stress test's load (8 pushers of single tasks with
// 8- and 200-byte payloads, 4 output queues with one consumer each, 4 host blocks with rings of
// one slot, 1 lane, capacity 256), printing progress every
// second: pushed, delivered, popped, unfinished per queue, lane sleeps. For telling a slow run
// from a stuck one on a many-core machine. Build from the repository root:
//   g++ -O2 -std=c++20 -pthread -Iinclude lab/probes/host_stress_probe.cpp \
//     src/gpu/host_blocks.cpp src/gpu/device_blocks_unavailable.cpp -o probe
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "weft/gpu/pool.hpp"

using namespace weft::gpu;
struct Small {
  static constexpr std::uint32_t kId = 1;
  struct Payload {
    std::uint32_t x, result;
  };
  WEFT_HD static void run(Payload& p, const BlockContext&) { p.result = 2 * p.x; }
};
struct Large {  // the test's largest payload
  static constexpr std::uint32_t kId = 3;
  struct Payload {
    unsigned char bytes[200];
  };
  WEFT_HD static void run(Payload& p, const BlockContext&) { p.bytes[0] ^= 1; }
};
using P = Pool<TaskTypes<Small, Large>, 256>;

int main(int argc, char** argv) {
  const std::uint64_t per = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 125'000;
  constexpr int kPushers = 8, kQueues = 4;
  P pool(PoolOptions{
      .host_blocks = 4, .output_queues = kQueues, .scheduler_lanes = 1, .ring_depth = 1});
  std::atomic<std::uint64_t> popped{0};
  std::atomic<bool> done{false};
  std::vector<std::thread> threads;
  for (int p = 0; p < kPushers; ++p) {
    threads.emplace_back([&, p] {
      std::uint64_t rng = 0x9E3779B97F4A7C15ull * (p + 1);
      for (std::uint64_t k = 0; k < per; ++k) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        if (rng % 3 == 0) {
          pool.push<Large>(Large::Payload{}, rng % kQueues, k);
        } else {
          pool.push<Small>({static_cast<std::uint32_t>(k), 0}, rng % kQueues, k);
        }
      }
    });
  }
  for (int q = 0; q < kQueues; ++q) {
    threads.emplace_back([&, q] {
      try {
        for (;;) {
          (void)pool.pop(q);
          popped.fetch_add(1);
        }
      } catch (const weft::ShutDown&) {
      }
    });
  }
  std::thread monitor([&] {
    const auto t0 = std::chrono::steady_clock::now();
    while (!done.load()) {
      std::this_thread::sleep_for(std::chrono::seconds(1));
      const auto s = pool.stats();
      std::printf("%5.1f s: pushed %llu completed %llu popped %llu sleeps %llu unfinished",
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                  static_cast<unsigned long long>(s.pushed),
                  static_cast<unsigned long long>(s.completed),
                  static_cast<unsigned long long>(popped.load()),
                  static_cast<unsigned long long>(s.scheduler_sleeps));
      for (int q = 0; q < kQueues; ++q) std::printf(" %zu", pool.unfinished(q));
      std::printf("\n");
      std::fflush(stdout);
    }
  });
  for (int p = 0; p < kPushers; ++p) threads[p].join();
  std::printf("pushers done\n");
  pool.no_more_tasks();
  for (std::size_t t = kPushers; t < threads.size(); ++t) threads[t].join();
  done = true;
  monitor.join();
  std::printf("all done: popped %llu of %llu\n", static_cast<unsigned long long>(popped.load()),
              static_cast<unsigned long long>(per * kPushers));
}
