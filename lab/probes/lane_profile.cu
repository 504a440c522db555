// Where a scheduler lane's time goes: 10^6 empty tasks pushed in batches of 4096 by one thread
// and popped in batches by another (as `weft bench gpu-pool` does), for several lanes, blocks
// per SM and ring depths; each
// lane prints TSC cycles per task by phase at shutdown (WEFT_POOL_PROFILE), this program the
// time the pusher and the popper spent inside the pool's calls. Without WEFT_POOL_PROFILE it
// prints the times only (for A/Bs free of the profile's own cost). With --threads it runs 4
// and 8 lanes with one or two pushers and one or two poppers instead: whether the pool or one
// pushing or popping thread bounds the batched figure; with --scratch, 4, 6 and 8 lanes with
// the pusher's copy also timed apart (below); --scratch-read likewise, with that copy's vector
// read by another thread in between; --lanes N... the default pool with those lane counts only;
// --single N... the bench's single-task shape instead (4 threads pushing one task per call, 4
// popping one per call: `empty_task_ns_single`) at those lane counts, with the time per call
// on each side and the pool's counters: why more lanes make single pushes slower.
// (WEFT_PROBE_MAILBOX=0 turns the mailbox off for --single.)
// Build and run on the GPU machine from the repository root:
//   cd lab/probes && nvcc -O2 -std=c++20 -DWEFT_POOL_PROFILE \
//     -gencode=arch=compute_90,code=sm_90 -I../../include lane_profile.cu \
//     ../../src/gpu/host_blocks.cpp \
//     ../../src/gpu/device_blocks.cu -o lane_profile && ./lane_profile
// (add -DWEFT_POOL_PROFILE_COARSE for the phases alone, without the timers inside them)
#include <cuda_runtime.h>
#include <sys/resource.h>
#include <x86intrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "empty_pool.cuh"
#include "probe_entry.hpp"

// Minor page faults of the whole process so far (every thread's: pusher, popper, lanes).
long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}
// ...and of the calling thread only.
long thread_minor_faults() {
  rusage u{};
  getrusage(RUSAGE_THREAD, &u);
  return u.ru_minflt;
}

// --scratch: before each push_batch the pusher also copies the batch into a vector of its own,
// never shared (40-byte entries built as PoolCore::Entry::of builds them), timed apart: the
// same copy as push_batch's, in the same thread while the pool runs, minus the hand-over of
// the vectors between threads. Equal to the time in push_batch: the pool's surroundings (its
// other threads, the machine) set the pusher's cost; much less: the hand-over does.
// --scratch-read: as --scratch, and a reader thread reads each of those vectors whole before
// the pusher writes into it again (as lanes read a chunk before the pusher gets it back): if
// the own copy then costs what push_batch does, writing into lines another core has just read
// is what makes push_batch's copy dear.
bool g_scratch = false;
bool g_scratch_read = false;

// `pushers` threads push batches of 4096 (each its share of the records, round robin by
// batch) and `poppers` threads pop in batches, popper k from output queue k (each task goes to
// queue seq mod poppers): with more than one of either, the time per task shows whether one
// pusher or one popper bounded the pool's batched figure.
void run(std::size_t lanes, int bps, std::size_t depth, std::uint64_t n, int pushers = 1,
         int poppers = 1) {
  PoolOptions o;
  o.ring_depth = depth;
  o.backend = Backend::device;
  o.program = device_program<Types, 16>();
  o.scheduler_lanes = lanes;
  o.blocks_per_sm = bps;
  o.output_queues = static_cast<std::size_t>(poppers);
  P pool(o);
  constexpr std::uint64_t kBatch = 4096;
  // Batch b goes to queue b mod poppers, so each queue gets whole batches.
  std::vector<P::Record> records(n);
  for (std::uint64_t i = 0; i < n; ++i) records[i] = P::Record::make<Empty>({i});
  std::vector<std::uint64_t> per_queue(static_cast<std::size_t>(poppers), 0);
  for (std::uint64_t i = 0; i < n; i += kBatch) {
    per_queue[(i / kBatch) % static_cast<std::uint64_t>(poppers)] += std::min(kBatch, n - i);
  }
  for (int rep = 0; rep < 2; ++rep) {
    std::vector<double> push_s(static_cast<std::size_t>(pushers), 0.0),
        pop_s(static_cast<std::size_t>(poppers), 0.0);
    std::atomic<long> pusher_faults{0}, popper_faults{0};
    std::vector<double> scratch_s(static_cast<std::size_t>(pushers), 0.0);
    std::vector<std::uint64_t> sums(static_cast<std::size_t>(poppers), 0);
    const std::uint64_t polls0 = pool.stats().host_polls;
    const long faults0 = minor_faults();
#if defined(WEFT_POOL_PROFILE)
    const std::uint64_t copy0 = detail::g_push_copy_cycles.load(),
                        lock0 = detail::g_push_lock_cycles.load(),
                        total0 = detail::g_push_total_cycles.load();
#endif
    const double t0 = now();
    std::vector<std::thread> threads;
    for (int p = 0; p < pushers; ++p) {
      threads.emplace_back([&, p] {
        const long f0 = thread_minor_faults();
        std::vector<ProbeEntry> scratch[2];
        for (auto& v : scratch) v.reserve(kBatch);
        std::uint64_t batches = 0;  // this pusher's
        for (std::uint64_t b = static_cast<std::uint64_t>(p); b * kBatch < n;
             b += static_cast<std::uint64_t>(pushers)) {
          ++batches;
        }
        // written: scratch batches written (release, pairs with the reader's acquire);
        // read: batches the reader has read whole (release, pairs with the pusher's acquire).
        std::atomic<std::uint64_t> written{0}, read{0};
        std::thread reader;
        if (g_scratch_read) {
          reader = std::thread([&] {
            std::uint64_t sink = 0;
            for (std::uint64_t r = 0; r < batches; ++r) {
              while (written.load(std::memory_order_acquire) <= r) _mm_pause();
              for (const ProbeEntry& e : scratch[r % 2]) sink += e.tag;
              read.store(r + 1, std::memory_order_release);
            }
            asm volatile("" : : "r"(sink));
          });
        }
        std::uint64_t c = 0;  // scratch batches written so far
        for (std::uint64_t b = static_cast<std::uint64_t>(p); b * kBatch < n;
             b += static_cast<std::uint64_t>(pushers)) {
          const std::uint64_t i = b * kBatch;
          const std::size_t len = std::min(kBatch, n - i);
          if (g_scratch) {
            // Batch c uses the vector batch c - 2 used: the reader must be done with that one.
            while (g_scratch_read && c >= 2 && read.load(std::memory_order_acquire) < c - 1) {
              _mm_pause();
            }
            const double a = now();
            std::vector<ProbeEntry>& v = scratch[c % 2];
            v.clear();
            for (std::size_t k = 0; k < len; ++k) {
              v.push_back(entry_of(records[i + k]));
            }
            asm volatile("" : : "r"(v.data()) : "memory");  // the copy is not optimised away
            scratch_s[static_cast<std::size_t>(p)] += now() - a;
            written.store(++c, std::memory_order_release);
          }
          const double a = now();
          pool.push_batch(std::span<const P::Record>(records.data() + i, len),
                          b % static_cast<std::uint64_t>(poppers));
          push_s[static_cast<std::size_t>(p)] += now() - a;
        }
        if (reader.joinable()) reader.join();
        pusher_faults += thread_minor_faults() - f0;
      });
    }
    for (int q = 0; q < poppers; ++q) {
      threads.emplace_back([&, q] {
        const auto k = static_cast<std::size_t>(q);
        std::vector<P::Record> got(kBatch);
        const long f0 = thread_minor_faults();
        for (std::uint64_t done = 0; done < per_queue[k];) {
          const double a = now();
          const std::size_t m = pool.pop_batch(got, k);
          pop_s[k] += now() - a;
          for (std::size_t j = 0; j < m; ++j) sums[k] += got[j].as<Empty>().seq;
          done += m;
        }
        popper_faults += thread_minor_faults() - f0;
      });
    }
    for (auto& t : threads) t.join();
    const double t = now() - t0;
    std::uint64_t sum = 0;
    for (const std::uint64_t s : sums) sum += s;
    std::printf("lanes %zu bps %d depth %zu pushers %d poppers %d rep %d: %.1f ns/task; ",
                pool.num_lanes(), bps, depth, pushers, poppers, rep, t / n * 1e9);
    std::printf("in push_batch (ns/task of its own)");
    for (int p = 0; p < pushers; ++p) {
      std::printf(" %.1f", push_s[static_cast<std::size_t>(p)] / n * 1e9 * pushers);
    }
    if (g_scratch) {
      std::printf(", own copy");
      for (int p = 0; p < pushers; ++p) {
        std::printf(" %.1f", scratch_s[static_cast<std::size_t>(p)] / n * 1e9 * pushers);
      }
    }
    std::printf(", in pop_batch");
    for (int q = 0; q < poppers; ++q) {
      std::printf(" %.1f", pop_s[static_cast<std::size_t>(q)] / n * 1e9 * poppers);
    }
    std::printf(
        "; host reads/task %.2f; page faults/1000 tasks %.2f (pushers %.2f, poppers %.2f); ",
        static_cast<double>(pool.stats().host_polls - polls0) / n,
        static_cast<double>(minor_faults() - faults0) * 1000.0 / static_cast<double>(n),
        static_cast<double>(pusher_faults.load()) * 1000.0 / static_cast<double>(n),
        static_cast<double>(popper_faults.load()) * 1000.0 / static_cast<double>(n));
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

// `weft bench gpu-pool`'s empty_task_ns_single: 4 threads push one task per call, 4 pop one
// per call, n tasks in all; each rep prints ns per task, the mean time of one push() and one
// pop() call, and how many pushes went straight to a standby slot or to the mailbox and how
// often lanes slept.
void run_single(std::size_t lanes, std::uint64_t n) {
  PoolOptions o;
  o.backend = Backend::device;
  o.program = device_program<Types, 16>();
  o.scheduler_lanes = lanes;
  // WEFT_PROBE_MAILBOX=0: the same without the lone-task mailbox.
  if (const char* m = std::getenv("WEFT_PROBE_MAILBOX"); m != nullptr) o.mailbox = m[0] != '0';
  P pool(o);
  constexpr int kThreads = 4;
  const std::uint64_t per = n / kThreads;
  for (int rep = 0; rep < 3; ++rep) {
    const PoolStats s0 = pool.stats();
#if defined(WEFT_POOL_PROFILE)
    const std::uint64_t parks0 = detail::AdaptiveMutex::g_parks.load();
    using Out = detail::ShardedOutput<P::Record>;
    const std::uint64_t waits0 = Out::g_waits.load(), sleeps0 = Out::g_sleeps.load(),
                        notifies0 = Out::g_notifies.load();
#endif
    std::vector<double> push_s(kThreads, 0.0), pop_s(kThreads, 0.0);
    std::vector<std::uint64_t> sums(kThreads, 0);
    const double t0 = now();
    std::vector<std::thread> threads;
    for (int k = 0; k < kThreads; ++k) {
      threads.emplace_back([&, k] {
        const double a = now();
        for (std::uint64_t i = 0; i < per; ++i) pool.push<Empty>({k * per + i}, 0);
        push_s[static_cast<std::size_t>(k)] = now() - a;
      });
      threads.emplace_back([&, k] {
        const double a = now();
        for (std::uint64_t i = 0; i < per; ++i) {
          sums[static_cast<std::size_t>(k)] += pool.pop(0).as<Empty>().seq;
        }
        pop_s[static_cast<std::size_t>(k)] = now() - a;
      });
    }
    for (auto& th : threads) th.join();
    const double t = now() - t0;
    const PoolStats s1 = pool.stats();
    std::uint64_t sum = 0;
    for (const std::uint64_t v : sums) sum += v;
    const std::uint64_t total = per * kThreads;
    std::printf(
        "single lanes %zu rep %d: %.1f ns/task; a push() %.0f ns, a pop() %.0f ns (mean "
        "over each thread's run:",
        pool.num_lanes(), rep, t / static_cast<double>(total) * 1e9,
        *std::max_element(push_s.begin(), push_s.end()) / static_cast<double>(per) * 1e9,
        *std::max_element(pop_s.begin(), pop_s.end()) / static_cast<double>(per) * 1e9);
    for (int k = 0; k < kThreads; ++k) {
      std::printf(" push %.0f pop %.0f", push_s[static_cast<std::size_t>(k)] / per * 1e9,
                  pop_s[static_cast<std::size_t>(k)] / per * 1e9);
    }
    std::printf(")");
#if defined(WEFT_POOL_PROFILE)
    std::printf("; parks on a queue lock per 1000 tasks %.1f",
                static_cast<double>(detail::AdaptiveMutex::g_parks.load() - parks0) * 1000.0 /
                    static_cast<double>(total));
    std::printf(
        "; per 1000 tasks: consumer waits %.1f, sleeps %.1f, lanes' notifies %.1f",
        static_cast<double>(Out::g_waits.load() - waits0) * 1000.0 / static_cast<double>(total),
        static_cast<double>(Out::g_sleeps.load() - sleeps0) * 1000.0 / static_cast<double>(total),
        static_cast<double>(Out::g_notifies.load() - notifies0) * 1000.0 /
            static_cast<double>(total));
#endif
    std::printf(
        "; direct loads %.1f%%, mailbox %.2f%%, lane sleeps %llu, host reads/task %.2f; sum %s\n",
        100.0 * static_cast<double>(s1.direct_loads - s0.direct_loads) / static_cast<double>(total),
        100.0 * static_cast<double>(s1.mailbox_tasks - s0.mailbox_tasks) /
            static_cast<double>(total),
        static_cast<unsigned long long>(s1.scheduler_sleeps - s0.scheduler_sleeps),
        static_cast<double>(s1.host_polls - s0.host_polls) / static_cast<double>(total),
        sum == total * (total - 1) / 2 ? "ok" : "WRONG");
  }
  std::fflush(stdout);
}

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::setvbuf(stderr, nullptr, _IOLBF, 0);
  const std::uint64_t t0 = __rdtsc();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  std::printf("TSC %.3f GHz\n", (__rdtsc() - t0) / 0.2e9);
  if (argc > 1 &&
      (std::string(argv[1]) == "--scratch" || std::string(argv[1]) == "--scratch-read")) {
    g_scratch = true;
    g_scratch_read = std::string(argv[1]) == "--scratch-read";
    for (std::size_t lanes : {4, 6, 8}) run(lanes, 0, 8, 1'000'000);
    return 0;
  }
  if (argc > 1 && std::string(argv[1]) == "--threads") {
    // Which side bounds the batched figure: one pusher and one popper against two of either.
    for (std::size_t lanes : {4, 8}) {
      for (auto [pushers, poppers] : {std::pair{1, 1}, {2, 1}, {1, 2}, {2, 2}}) {
        run(lanes, 0, 8, 1'000'000, pushers, poppers);
      }
    }
    return 0;
  }
  if (argc > 2 && std::string(argv[1]) == "--single") {  // the single-task shape, these lanes
    for (int k = 2; k < argc; ++k) run_single(std::stoul(argv[k]), 200'000);
    return 0;
  }
  if (argc > 2 && std::string(argv[1]) == "--lanes") {  // these lane counts only, default pool
    for (int k = 2; k < argc; ++k) run(std::stoul(argv[k]), 0, 8, 1'000'000);
    return 0;
  }
  for (std::size_t lanes : {1, 2, 4, 6, 8})
    run(lanes, 0, 8, 1'000'000);  // the default pool's shape
  run(4, 2, 8, 1'000'000);
  return 0;
}
