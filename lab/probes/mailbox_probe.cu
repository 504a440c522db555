// The lone-task mailbox against the ring slots, on one machine instance, one binary: the
// default pool with PoolOptions::mailbox on and off, alternated round by round. Per round and
// pool: push->pop latency of one task after 200 us of quiet (2000 tasks, as the bench's
// latency_p50_us / latency_p99_us) and after 20 ms (100 tasks, latency_cold), the single-task
// throughput of 4 pushing + 4 popping threads (the bench's empty_task_ns_single, 200 000
// tasks), the batched figure (empty_task_ns_batched), the idle pool's reads of host memory per
// second, and the VM's steal ticks during the warm latency run (/proc/stat: the hypervisor taking
// the cores, which sets the tail). Build and run on the GPU machine from the repository root:
//   cd lab/probes && nvcc -O2 -std=c++20 -gencode=arch=compute_90,code=sm_90 \
//     -I../../include mailbox_probe.cu ../../src/gpu/device_blocks.cu \
//     ../../src/gpu/host_blocks.cpp -o mailbox_probe && ./mailbox_probe [rounds]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <span>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "empty_pool.cuh"

namespace {

// Steal ticks of all CPUs so far (the 8th number of /proc/stat's "cpu" line).
unsigned long long steal_ticks() {
  std::ifstream f("/proc/stat");
  std::string line;
  std::getline(f, line);
  std::istringstream in(line);
  std::string cpu;
  unsigned long long v[8] = {};
  in >> cpu;
  for (auto& x : v) in >> x;
  return v[7];
}

struct Latency {
  double p50, p99;
  bool ok;
};
Latency latency(P& pool, int n, std::chrono::microseconds gap) {
  std::vector<double> lat;
  bool ok = true;
  for (int i = 0; i < n; ++i) {
    std::this_thread::sleep_for(gap);
    const double t0 = now();
    pool.push<Empty>({static_cast<std::uint64_t>(i)}, 0);
    const auto r = pool.pop(0);
    lat.push_back((now() - t0) * 1e6);
    ok = ok && r.ok() && r.as<Empty>().seq == static_cast<std::uint64_t>(i);
  }
  std::sort(lat.begin(), lat.end());
  return {lat[lat.size() / 2], lat[lat.size() * 99 / 100], ok};
}

// ns per task, 4 threads pushing one task per call and 4 popping one per call.
double single(P& pool, std::uint64_t n, bool& ok) {
  constexpr int kThreads = 4;
  const std::uint64_t per = n / kThreads;
  std::vector<std::vector<std::uint64_t>> seqs(kThreads);
  const double t0 = now();
  std::vector<std::thread> threads;
  for (int k = 0; k < kThreads; ++k) {
    threads.emplace_back([&, k] {
      for (std::uint64_t i = 0; i < per; ++i) pool.push<Empty>({k * per + i}, 0);
    });
    threads.emplace_back([&, k] {
      for (std::uint64_t i = 0; i < per; ++i) seqs[k].push_back(pool.pop(0).as<Empty>().seq);
    });
  }
  for (auto& t : threads) t.join();
  const double t = now() - t0;
  std::vector<std::uint64_t> all;
  for (auto& s : seqs) all.insert(all.end(), s.begin(), s.end());
  std::sort(all.begin(), all.end());
  for (std::uint64_t i = 0; i < all.size(); ++i) ok = ok && all[i] == i;
  return t / static_cast<double>(per * kThreads) * 1e9;
}

// ns per task, pushed in batches of 4096 by one thread and popped in batches by another
// (the bench's empty_task_ns_batched, 10^6 tasks).
double batched(P& pool, std::uint64_t n, bool& ok) {
  std::vector<P::Record> recs(n);
  for (std::uint64_t i = 0; i < n; ++i) recs[i] = P::Record::make<Empty>({i});
  std::vector<std::uint64_t> seqs;
  seqs.reserve(n);
  const double t0 = now();
  std::thread pusher([&] {
    for (std::uint64_t i = 0; i < n; i += 4096) {
      pool.push_batch(
          std::span<const P::Record>(recs.data() + i, std::min<std::uint64_t>(4096, n - i)));
    }
  });
  std::vector<P::Record> got(4096);
  while (seqs.size() < n) {
    const std::size_t k = pool.pop_batch(got);
    for (std::size_t j = 0; j < k; ++j) seqs.push_back(got[j].as<Empty>().seq);
  }
  pusher.join();
  const double t = now() - t0;
  std::sort(seqs.begin(), seqs.end());
  for (std::uint64_t i = 0; i < n; ++i) ok = ok && seqs[i] == i;
  return t / static_cast<double>(n) * 1e9;
}

void run(bool mailbox, int round) {
  PoolOptions o;
  o.backend = Backend::device;
  o.program = device_program<Types, 16>();
  o.mailbox = mailbox;
  P pool(o);
  (void)latency(pool, 100, std::chrono::microseconds(200));  // warm-up
  const unsigned long long s0 = steal_ticks();
  const Latency warm = latency(pool, 2000, std::chrono::microseconds(200));
  const unsigned long long stolen = steal_ticks() - s0;
  const Latency cold = latency(pool, 100, std::chrono::milliseconds(20));
  bool ok = warm.ok && cold.ok;
  const double ns = single(pool, 200'000, ok);
  std::vector<double> b;
  for (int k = 0; k < 5; ++k) b.push_back(batched(pool, 1'000'000, ok));
  std::sort(b.begin(), b.end());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const std::uint64_t r0 = pool.stats().host_polls;
  const double t0 = now();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const double reads = static_cast<double>(pool.stats().host_polls - r0) / (now() - t0);
  const PoolStats st = pool.stats();
  std::printf(
      "round %d mailbox %-3s: latency p50 %6.2f p99 %7.2f us (steal %llu ticks) | cold p50 %7.2f "
      "p99 %8.2f us | single %6.1f ns/task | batched %5.1f ns/task (median of 5) | idle reads "
      "%.2e/s | mailbox tasks %llu, taken by "
      "a consumer %llu, direct loads %llu | %zu blocks%s\n",
      round, mailbox ? "on" : "off", warm.p50, warm.p99, stolen, cold.p50, cold.p99, ns, b[2],
      reads, static_cast<unsigned long long>(st.mailbox_tasks),
      static_cast<unsigned long long>(st.mailbox_taken),
      static_cast<unsigned long long>(st.direct_loads), pool.num_blocks(), ok ? "" : " UNVERIFIED");
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 3;
  for (int round = 0; round < rounds; ++round) {
    run(false, round);
    run(true, round);
  }
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
