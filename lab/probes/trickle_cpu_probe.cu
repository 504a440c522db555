// How many cores a pool keeps busy while one thread pushes a task every 200 us (the warm
// latency run of `weft bench gpu-pool`). Measured by what it leaves to others, not by CPU-time
// accounting (a VM may not charge a vCPU's PAUSE loops to the thread): 16 threads spin on
// arithmetic for 0.5 s with the pool asleep, then again while the trickle runs; the work they
// got done in the second run over the first, times 16, is the cores the pool left them. One
// task at a time goes straight into a standby slot (a direct load); `./trickle_cpu_probe 2`
// pushes two at a time instead, which go through the input queue. Each trickle starts right
// after a burst of 100000 tasks has woken every lane (as the bench's latency run follows its
// other runs).
// Build and run on the GPU machine from the repository root:
//   cd lab/probes && nvcc -O2 -std=c++20 -gencode=arch=compute_90,code=sm_90 \
//     -I../../include trickle_cpu_probe.cu ../../src/gpu/host_blocks.cpp \
//     ../../src/gpu/device_blocks.cu -o trickle_cpu_probe && ./trickle_cpu_probe
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "empty_pool.cuh"

// Iterations of a dependent arithmetic chain done by `threads` threads in `seconds`.
double victims(int threads, double seconds) {
  std::atomic<bool> stop{false};
  std::vector<double> done(static_cast<std::size_t>(threads), 0);
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      std::uint64_t x = 88172645463325252ull + static_cast<std::uint64_t>(t), n = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        for (int i = 0; i < 4096; ++i) {
          x ^= x << 13;
          x ^= x >> 7;
          x ^= x << 17;
        }
        ++n;
      }
      asm volatile("" : : "r"(x));  // the arithmetic is not optimised away
      done[static_cast<std::size_t>(t)] = static_cast<double>(n);
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& th : ts) th.join();
  double sum = 0;
  for (const double d : done) sum += d;
  return sum;
}

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const std::size_t batch = argc > 1 ? std::stoul(argv[1]) : 1;
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  PoolOptions o;
  o.backend = Backend::device;
  o.program = device_program<Types, 16>();
  P pool(o);
  for (int rep = 0; rep < 3; ++rep) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // every lane asleep
    const double alone = victims(cores, 0.5);
    const PoolStats s0 = pool.stats();
    {  // a burst: every lane busy
      std::vector<P::Record> burst(100'000, P::Record::make<Empty>({0}));
      pool.push_batch(burst, 0);
      std::vector<P::Record> got(4096);
      for (std::size_t n = 0; n < burst.size();) n += pool.pop_batch(got, 0);
    }
    std::atomic<bool> stop{false};
    std::uint64_t tasks = 0;
    std::thread trickle([&] {
      while (!stop.load(std::memory_order_relaxed)) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        std::vector<P::Record> records(batch, P::Record::make<Empty>({tasks}));
        pool.push_batch(records, 0);
        for (std::size_t k = 0; k < batch; ++k) (void)pool.pop(0);
        tasks += batch;
      }
    });
    const double with = victims(cores, 0.5);
    stop = true;
    trickle.join();
    const PoolStats s1 = pool.stats();
    std::printf(
        "%zu lanes, rep %d: %d spinning threads got %.2f of %d cores' work with %zu task(s) "
        "every 200 us (the pool took ~%.2f cores); %llu tasks, lane sleeps %llu\n",
        pool.num_lanes(), rep, cores, with / alone * cores, cores, batch,
        cores * (1 - with / alone), static_cast<unsigned long long>(tasks),
        static_cast<unsigned long long>(s1.scheduler_sleeps - s0.scheduler_sleeps));
  }
  return 0;
}
