// Whether the batched figure (10^6 empty tasks pushed in batches of 4096 by one thread, popped
// in batches by another, as `weft bench gpu-pool` does) is bound by the pusher's memory
// traffic. The hypothesis: the pusher runs ahead of the lanes, so the input queue grows to
// hundreds of thousands of entries, every chunk it writes is fresh (cold) memory, and each task
// costs it a cold read of the caller's record (48 B) plus a write-allocate of a 40-byte entry:
// ~130 B of DRAM traffic from one thread, ~13-16 ns at a single core's 8-10 GB/s. Four modes,
// alternated, each on a fresh pool of the default shape:
//   free      as the bench: records from one 48 MB vector, the pusher never waits;
//   throttle  the same records, but before each batch the pusher waits (yielding) until at most
//             W tasks are pushed and not yet popped, so emptied chunks come back while warm;
//   hot       records from one 4096-record buffer (its seq rewritten per batch), no waiting;
//   hot+thr   both.
// Prints ns per task (wall, pusher start to last pop) and the pusher's time inside push_batch.
// Build and run on the GPU machine from the repository root:
//   cd lab/probes && nvcc -O2 -std=c++20 -gencode=arch=compute_90,code=sm_90 \
//     -I../../include throttle_probe.cu ../../src/gpu/host_blocks.cpp \
//     ../../src/gpu/device_blocks.cu -o throttle_probe && ./throttle_probe [rounds] [W]
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "empty_pool.cuh"

namespace {

struct Mode {
  const char* name;
  bool hot;
  bool throttle;
};

struct Result {
  double ns_per_task, push_ns_per_task;
  bool ok;
};

Result run(const Mode& m, std::uint64_t n, std::uint64_t window) {
  PoolOptions o;
  o.backend = Backend::device;
  o.program = device_program<Types, 16>();
  P pool(o);
  constexpr std::uint64_t kBatch = 4096;
  std::vector<P::Record> records(m.hot ? kBatch : n);
  for (std::uint64_t i = 0; i < records.size(); ++i) records[i] = P::Record::make<Empty>({i});
  // Warm-up: a tenth of the run, through the same pool.
  {
    std::vector<P::Record> w(kBatch);
    for (std::uint64_t i = 0; i < n / 10; i += kBatch) {
      pool.push_batch(std::span<const P::Record>(records.data(), kBatch), 0);
      std::uint64_t got = 0;
      while (got < kBatch) got += pool.pop_batch(w, 0);
    }
  }
  std::atomic<std::uint64_t> popped{0};  // popper -> pusher: relaxed is enough, a pacing hint
  double push_s = 0;
  std::vector<std::uint8_t> seen(n, 0);
  bool ok = true;
  const double t0 = now();
  std::thread pusher([&] {
    for (std::uint64_t i = 0; i < n; i += kBatch) {
      const std::size_t len = static_cast<std::size_t>(std::min(kBatch, n - i));
      if (m.throttle) {
        while (i - popped.load(std::memory_order_relaxed) > window) std::this_thread::yield();
      }
      const P::Record* src = records.data() + i;
      if (m.hot) {
        for (std::size_t j = 0; j < len; ++j) records[j] = P::Record::make<Empty>({i + j});
        src = records.data();
      }
      const double a = now();
      pool.push_batch(std::span<const P::Record>(src, len), 0);
      push_s += now() - a;
    }
  });
  std::vector<P::Record> got(kBatch);
  for (std::uint64_t done = 0; done < n;) {
    const std::size_t k = pool.pop_batch(got, 0);
    for (std::size_t j = 0; j < k; ++j) {
      const std::uint64_t s = got[j].as<Empty>().seq;
      if (s >= n || seen[s]++ != 0) ok = false;
    }
    done += k;
    popped.store(done, std::memory_order_relaxed);
  }
  const double t = now() - t0;
  pusher.join();
  return {t / static_cast<double>(n) * 1e9, push_s / static_cast<double>(n) * 1e9, ok};
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 5;
  const std::uint64_t window = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 65536;
  constexpr std::uint64_t n = 1'000'000;
  const Mode modes[] = {{"free", false, false},
                        {"throttle", false, true},
                        {"hot", true, false},
                        {"hot+thr", true, true}};
  std::printf("throttle_probe: %llu tasks, batches of 4096, window %llu tasks, %d rounds\n",
              static_cast<unsigned long long>(n), static_cast<unsigned long long>(window), rounds);
  std::vector<std::vector<double>> wall(4), push(4);
  for (int r = 0; r < rounds; ++r) {
    for (int k = 0; k < 4; ++k) {
      const Result res = run(modes[k], n, window);
      wall[k].push_back(res.ns_per_task);
      push[k].push_back(res.push_ns_per_task);
      std::printf("round %d %-9s %6.2f ns/task, push_batch %6.2f ns/task%s\n", r, modes[k].name,
                  res.ns_per_task, res.push_ns_per_task, res.ok ? "" : "  LOST OR DUPLICATED");
      std::fflush(stdout);
    }
  }
  std::printf("medians:\n");
  for (int k = 0; k < 4; ++k) {
    std::sort(wall[k].begin(), wall[k].end());
    std::sort(push[k].begin(), push[k].end());
    std::printf("  %-9s %6.2f ns/task, push_batch %6.2f ns/task\n", modes[k].name,
                wall[k][wall[k].size() / 2], push[k][push[k].size() / 2]);
  }
  return 0;
}
