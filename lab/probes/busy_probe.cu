// Why blocks are not busier with short tasks: every task records its block and the GPU clock at
// the start and end of its body; per block, the gap between one body's end and the next one's
// start is the pool's overhead per task (p10/p50/p90), and host reads per task show how many
// tasks a block finds per poll of its ring.
// Build and run on the GPU machine from the repository root:
//   cd lab/probes && nvcc -O2 -std=c++20 -gencode=arch=compute_90,code=sm_90 \
//     -I../../include busy_probe.cu ../../src/gpu/host_blocks.cpp ../../src/gpu/device_blocks.cu \
//     -o busy_probe && ./busy_probe [--short | --default | --pushers]
// With -DWEFT_PROBE_RING_LEVELS it also prints how many tasks a block's ring held before and
// after each of the lanes' collections from it.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "weft/gpu/device.cuh"
#include "weft/gpu/pool.hpp"

using namespace weft::gpu;
struct Timed {
  static constexpr std::uint32_t kId = 1;
  struct Payload {
    unsigned long long ns, t0, t1;
    int block, pad;
  };
  WEFT_HD static void run(Payload& p, const BlockContext& b) {
#if defined(__CUDA_ARCH__)
    const unsigned long long t0 = detail::global_ns();
    unsigned long long t = t0;
    while (t - t0 < p.ns) t = detail::global_ns();
    b.sync();
    if (b.thread() == 0) {
      p.t0 = t0;
      p.t1 = detail::global_ns();
      p.block = b.block();
    }
#else
    (void)p;
    (void)b;
#endif
  }
};
using Types = TaskTypes<Timed>;
using P = Pool<Types, 32>;

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void run(int bps, std::size_t depth, std::size_t lanes, unsigned long long ns, int per_block,
         int pushers = 1) {
  PoolOptions o;
  o.backend = Backend::device;
  o.program = device_program<Types, 32>();
  o.blocks_per_sm = bps;
  o.ring_depth = depth;
  o.scheduler_lanes = lanes;
  P pool(o);
  const std::size_t n = pool.num_blocks() * static_cast<std::size_t>(per_block);
  std::vector<P::Record> recs(n, P::Record::make<Timed>({ns, 0, 0, -1, 0}));
  for (int rep = 0; rep < 2; ++rep) {
    const std::uint64_t polls0 = pool.stats().host_polls;
    std::vector<Timed::Payload> done;
    // Touched before the timing, so that the popping thread does not fault its pages in (32 MB
    // at 1000 tasks per block). That was not what made the host's wall run past the GPU's span
    // (lab/results/h100/busy_pushers-ba3854b.txt).
    done.resize(n);
    done.clear();
    const double t0 = now();
    // Each pushing thread pushes its own contiguous share, in batches of 4096 (as the bench).
    std::vector<std::thread> pushing;
    for (int k = 0; k < pushers; ++k) {
      pushing.emplace_back([&, k] {
        const std::size_t lo = n * k / pushers, hi = n * (k + 1) / pushers;
        for (std::size_t i = lo; i < hi; i += 4096) {
          pool.push_batch(
              std::span<const P::Record>(recs.data() + i, std::min<std::size_t>(4096, hi - i)));
        }
      });
    }
    std::vector<P::Record> got(4096);
    std::uint64_t pop_calls = 0;
    double pop_s = 0;  // the popping thread's time inside pop_batch
    while (done.size() < n) {
      const double a = now();
      const std::size_t k = pool.pop_batch(got);
      pop_s += now() - a;
      ++pop_calls;
      for (std::size_t j = 0; j < k; ++j) done.push_back(got[j].as<Timed>());
    }
    for (auto& t : pushing) t.join();
    const double wall = now() - t0;
    std::map<int, std::vector<std::pair<unsigned long long, unsigned long long>>> by_block;
    double body = 0;
    for (const auto& d : done) {
      by_block[d.block].push_back({d.t0, d.t1});
      body += static_cast<double>(d.t1 - d.t0) * 1e-9;
    }
    std::vector<double> gaps;
    // Where the blocks' time goes, by the GPU clock: from the first body's start anywhere to
    // each block's first start (ramp), between bodies (gaps), and from each block's last end
    // to the last end anywhere (tail).
    unsigned long long first = ~0ull, last = 0;
    for (auto& [b, v] : by_block) {
      std::sort(v.begin(), v.end());
      first = std::min(first, v.front().first);
      last = std::max(last, v.back().second);
    }
    double ramp = 0, tail = 0, gap_sum = 0;
    for (auto& [b, v] : by_block) {
      ramp += static_cast<double>(v.front().first - first) * 1e-9;
      tail += static_cast<double>(last - v.back().second) * 1e-9;
      for (std::size_t i = 1; i < v.size(); ++i) {
        gaps.push_back(static_cast<double>(v[i].first - v[i - 1].second) * 1e-3);
        gap_sum += gaps.back() * 1e-6;
      }
    }
    const double span = static_cast<double>(last - first) * 1e-9;
    const double block_time = static_cast<double>(pool.num_blocks()) * span;
    std::sort(gaps.begin(), gaps.end());
    auto q = [&](double f) {
      return gaps.empty() ? 0.0 : gaps[static_cast<std::size_t>(f * (gaps.size() - 1))];
    };
    std::printf(
        "bps %d depth %zu lanes %zu pushers %d task %llu us rep %d: busy %.3f (wall %.2f ms, "
        "%zu blocks); gap us p10 %.2f p50 %.2f p90 %.2f p99 %.2f; host reads/task %.2f; of GPU "
        "span %.2f ms: body %.3f gaps %.3f ramp %.3f tail %.3f; popper (waits included): %.1f "
        "records a pop_batch, %.2f us in each, %.1f ns a record\n",
        bps, pool.ring_depth(), pool.num_lanes(), pushers, ns / 1000, rep,
        body / (static_cast<double>(pool.num_blocks()) * wall), wall * 1e3, by_block.size(), q(0.1),
        q(0.5), q(0.9), q(0.99), static_cast<double>(pool.stats().host_polls - polls0) / n,
        span * 1e3, body / block_time, gap_sum / block_time, ramp / block_time, tail / block_time,
        static_cast<double>(n) / static_cast<double>(pop_calls),
        pop_s / static_cast<double>(pop_calls) * 1e6, pop_s / static_cast<double>(n) * 1e9);
#if defined(WEFT_PROBE_RING_LEVELS)
    std::printf("  tasks left in the ring at a collection (share, so far):");
    std::uint64_t all = 0;
    for (auto& c : weft::gpu::detail::g_probe_ring_levels) all += c.load();
    for (std::size_t k = 0; k <= pool.ring_depth() && k < 33; ++k) {
      std::printf(" %zu:%.3f", k,
                  static_cast<double>(weft::gpu::detail::g_probe_ring_levels[k].load()) /
                      static_cast<double>(all == 0 ? 1 : all));
    }
    std::printf("\n  ... and before it:");
    for (std::size_t k = 0; k <= pool.ring_depth() && k < 33; ++k) {
      std::printf(" %zu:%.3f", k,
                  static_cast<double>(weft::gpu::detail::g_probe_ring_before[k].load()) /
                      static_cast<double>(all == 0 ? 1 : all));
    }
    std::printf("\n");
#endif
  }
}

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  if (argc > 1 && std::string(argv[1]) == "--default") {
    // The default pool's blocks (occupancy) with 10 us tasks, as `busy_fraction_10us` in
    // `weft bench gpu-pool`, with the default lanes and more (build with -DWEFT_POOL_PROFILE
    // for each lane's cycles per task and blocks visited per round); 100 tasks per block as
    // the bench, and 1000 (ten times as long a run: how much of the loss is the run's ramp
    // and tail).
    for (int per_block : {100, 1000}) {
      for (std::size_t lanes : {0, 12}) run(0, 8, lanes, 10'000, per_block);
    }
    return 0;
  }
  if (argc > 1 && std::string(argv[1]) == "--pushers") {
    // Whether one pushing thread is what keeps the default pool's blocks waiting with 10 us
    // tasks: the default pool fed by 1, 2 and 4 threads, 100 and 1000 tasks per block.
    for (int round = 0; round < 2; ++round) {
      for (int per_block : {100, 1000}) {
        for (int pushers : {1, 2, 4}) run(0, 8, 0, 10'000, per_block, pushers);
      }
    }
    return 0;
  }
  if (argc > 1 && std::string(argv[1]) == "--short") {  // the 10 us cases only
    for (std::size_t depth : {8, 32}) run(1, depth, 0, 10'000, 1000);
    run(2, 8, 0, 10'000, 500);
    return 0;
  }
  for (std::size_t depth : {1, 4, 8, 16, 32}) run(1, depth, 0, 10'000, 1000);
  for (std::size_t depth : {4, 16}) run(1, depth, 0, 1'000, 4000);
  for (std::size_t depth : {4, 16}) run(1, depth, 0, 100'000, 100);
  for (std::size_t depth : {8, 16}) run(2, depth, 0, 10'000, 500);
  run(0, 16, 0, 10'000, 100);
  return 0;
}
