// Where the push->pop latency of one task on an idle pool goes: host steady-clock stamps (push,
// lane stored READY, lane saw FINISHED, lane delivered, pop returned) and GPU-clock stamps in
// the block that ran it (saw READY, payload read, task run, results copied, FINISHED stored;
// outputs in lab/results/h100/ before fence_probe name the copy step "fence": the
// kernel then published behind a system-scope fence), built
// with -DWEFT_POOL_TRACE. The two clocks are not compared; intervals are, per side, and
// "link" = (READY stored -> FINISHED seen) - (block's own time) is the two PCIe trips plus the
// block's poll wait. p50, p90 and p99 over 2000 tasks, 200 us apart, and each phase's mean
// over the slowest 1% of tasks (where a tail comes from).
// The link is then split without comparing the clocks: (block saw READY, GPU clock) - (READY
// stored, host clock) is one trip plus the block's poll wait plus the clocks' offset, and the
// offset is the same for neighbouring tasks; so each task's value minus the least of its 50
// neighbours' on either side ("excess") is how late the block saw READY against the fastest
// nearby trip. Likewise (lane saw FINISHED) - (FINISHED stored) for the way back: how late the
// lane saw it. A tail in the first is the GPU's polling; in the second, the host's lanes. The
// process's threads' involuntary context switches during the tasks (/proc) and the VM's steal
// time say whether the OS or the hypervisor took cores away meanwhile.
// Build and run on the GPU machine from the repository root:
//   cd lab/probes && nvcc -O2 -std=c++20 -DWEFT_POOL_TRACE -gencode=arch=compute_90,code=sm_90
//   \
//     -I../../include latency_trace.cu ../../src/gpu/device_blocks.cu ../../src/gpu/host_blocks.cpp
//     \ -o latency_trace && ./latency_trace
#include <cuda_runtime.h>
#include <dirent.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "empty_pool.cuh"

constexpr int kTasks = 2000;

// Per thread of this process (lanes, the caller, CUDA's), its context switches so far:
// voluntary (it slept) and involuntary (the OS took its core). From /proc.
std::map<int, std::pair<long, long>> context_switches() {
  std::map<int, std::pair<long, long>> out;
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return out;
  while (const dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream status(std::string("/proc/self/task/") + e->d_name + "/status");
    std::string key;
    long value = 0;
    std::pair<long, long> c{0, 0};
    while (status >> key) {
      if (key == "voluntary_ctxt_switches:" && status >> value) c.first = value;
      if (key == "nonvoluntary_ctxt_switches:" && status >> value) c.second = value;
    }
    out[std::atoi(e->d_name)] = c;
  }
  closedir(dir);
  return out;
}
// Time stolen from this VM's CPUs by the hypervisor, summed over CPUs, in USER_HZ ticks.
long long steal_ticks() {
  std::ifstream stat("/proc/stat");
  std::string cpu;
  long long f[8] = {};
  stat >> cpu;
  for (long long& x : f) stat >> x;
  return f[7];
}

void trace(const char* name, PoolOptions o) {
  o.backend = Backend::device;
  o.program = device_program<Types, 16>();
  P pool(o);
  cudaStream_t stream;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  constexpr int kPhases = 14;
  const char* names[kPhases] = {"push() call",
                                "push returned->lane took",
                                "took->READY stored",
                                "READY->FINISHED seen (host)",
                                "seen->delivered",
                                "delivered->popped",
                                "total",
                                "gpu: payload read",
                                "gpu: hand-offs + task",
                                "gpu: results + hand-off",
                                "gpu: FINISHED store",
                                "link (2 trips + poll wait)",
                                "excess: READY -> block saw",
                                "excess: FINISHED -> lane saw"};
  std::vector<std::vector<double>> v(kPhases);
  std::vector<std::vector<double>> rows;  // per task, every phase: where the tail's time goes
  // Per task, GPU clock minus host clock across each trip (ns, the clocks' offset included).
  std::vector<long long> there(kTasks), back(kTasks);
  const auto switches_before = context_switches();
  const long long steal_before = steal_ticks();
  for (int i = 0; i < kTasks; ++i) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    const long long t0 = detail::trace_now();
    pool.push<Empty>({static_cast<std::uint64_t>(i)});
    const long long t1 = detail::trace_now();
    (void)pool.pop();
    const long long t3 = detail::trace_now();
    unsigned long long g[5] = {};
    cudaMemcpyFromSymbolAsync(g, detail::g_weft_trace, sizeof g, 0, cudaMemcpyDeviceToHost, stream);
    cudaStreamSynchronize(stream);
    const long long k = detail::g_trace_taken.load(), l = detail::g_trace_loaded.load(),
                    s = detail::g_trace_seen.load(), d = detail::g_trace_delivered.load();
    const double gpu = static_cast<double>(g[4] - g[0]);
    const double in[kPhases] = {static_cast<double>(t1 - t0),
                                static_cast<double>(k - t1),
                                static_cast<double>(l - k),
                                static_cast<double>(s - l),
                                static_cast<double>(d - s),
                                static_cast<double>(t3 - d),
                                static_cast<double>(t3 - t0),
                                static_cast<double>(g[1] - g[0]),
                                static_cast<double>(g[2] - g[1]),
                                static_cast<double>(g[3] - g[2]),
                                static_cast<double>(g[4] - g[3]),
                                static_cast<double>(s - l) - gpu,
                                0,
                                0};
    there[i] = static_cast<long long>(g[0]) - l;
    back[i] = s - static_cast<long long>(g[4]);
    rows.emplace_back(in, in + kPhases);
  }
  const auto switches_after = context_switches();
  const long long steal = steal_ticks() - steal_before;
  long involuntary = 0, voluntary = 0, most = 0;
  int threads_preempted = 0;
  for (const auto& [tid, c] : switches_after) {
    const auto was = switches_before.find(tid);
    if (was == switches_before.end()) continue;
    const long inv = c.second - was->second.second;
    voluntary += c.first - was->second.first;
    involuntary += inv;
    most = std::max(most, inv);
    threads_preempted += inv > 0 ? 1 : 0;
  }
  // Each trip's excess over the fastest of its neighbours (the clocks' offset cancels).
  constexpr int kWindow = 50;
  for (int i = 0; i < kTasks; ++i) {
    const int lo = std::max(0, i - kWindow), hi = std::min(kTasks - 1, i + kWindow);
    const long long fastest_there = *std::min_element(there.begin() + lo, there.begin() + hi + 1);
    const long long fastest_back = *std::min_element(back.begin() + lo, back.begin() + hi + 1);
    rows[i][12] = static_cast<double>(there[i] - fastest_there);
    rows[i][13] = static_cast<double>(back[i] - fastest_back);
  }
  for (const auto& row : rows) {
    for (int k = 0; k < kPhases; ++k) v[k].push_back(row[k] * 1e-3);
  }
  // The slowest 1% of tasks by total, and each phase's mean over them.
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a[6] > b[6]; });
  const std::size_t worst = std::max<std::size_t>(1, rows.size() / 100);
  std::printf("%s (%zu lanes, %zu blocks, %d tasks): us p50 / p90 / p99 / mean of slowest 1%%\n",
              name, pool.num_lanes(), pool.num_blocks(), kTasks);
  for (int k = 0; k < kPhases; ++k) {
    std::sort(v[k].begin(), v[k].end());
    double tail = 0;
    for (std::size_t r = 0; r < worst; ++r) tail += rows[r][k] * 1e-3;
    std::printf("  %-30s %7.2f %7.2f %7.2f %7.2f\n", names[k], v[k][v[k].size() / 2],
                v[k][v[k].size() * 9 / 10], v[k][v[k].size() * 99 / 100],
                tail / static_cast<double>(worst));
  }
  std::printf(
      "  during the tasks: %ld involuntary context switches over %d of the process's threads "
      "(at most %ld in one), %ld voluntary; %lld ticks of steal time over all CPUs\n",
      involuntary, threads_preempted, most, voluntary, steal);
  cudaStreamDestroy(stream);
}

int main() {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  trace("default", PoolOptions{});
  PoolOptions one;
  one.scheduler_lanes = 1;
  trace("1 lane", one);
  return 0;
}
