// Why a new pool's first batch of one task per SM sometimes runs on fewer SMs (the device test
// GpuPool.ABatchOfOneTaskPerSmRunsOnePerSm; docs/decisions/016-gpu-placement.md "Still open").
// Each trial makes a pool on GPU 0 (the test's options), waits as the mode says, pushes
// `rounds` batches of as many 200-us tasks as the GPU has SMs, one after the other, and counts
// the SMs each batch ran on:
//   fresh    push at once (some lane thread may not have started yet)
//   awake    push 300 us after the constructor returned (every lane started, still spinning)
//   asleep   push 20 ms after (every lane asleep: past the default 1 ms idle spin)
//   rounds   push at once, five batches (the device test)
// Prints, per mode, how many batches ran on every SM; for each that did not, each lane's first
// round that loaded a task (us after the push; "-": none before the batch ended), whether the
// lane slept before it, and the lane's longest round after the push that did not sleep, with
// its phases (collect/deliver/take/load/idle us; the idle phase of a quiet round includes the
// lane's health check).
//   one_per_sm_probe [trials]     (default 60)
#include <cuda_runtime.h>

#include <array>
#include <atomic>
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

std::uint64_t now_ns() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

// What each lane did after the last push (reset before each batch).
class LaneLog final : public weft::gpu::SchedulerObserver {
 public:
  static constexpr std::size_t kLanes = 64;
  void arm() {
    for (std::size_t l = 0; l < kLanes; ++l) {
      first_load_ns_[l].store(0, std::memory_order_relaxed);
      slept_[l].store(false, std::memory_order_relaxed);
      longest_ns_[l].store(0, std::memory_order_relaxed);
    }
    push_ns_.store(now_ns(), std::memory_order_release);
  }
  void on_lane_sleep(std::size_t lane) noexcept override {
    if (lane < kLanes) sleeping_[lane].store(true, std::memory_order_relaxed);
  }
  void on_round(const LaneRound& r) noexcept override {
    if (r.lane >= kLanes) return;
    const std::uint64_t push = push_ns_.load(std::memory_order_acquire);
    const bool slept = sleeping_[r.lane].exchange(false, std::memory_order_relaxed);
    if (push == 0) return;
    const std::uint64_t now = now_ns();
    std::uint64_t total = 0;
    for (const std::uint64_t p : r.phase_ns) total += p;
    if (now < push) return;  // a round of the batch before, racing arm()
    if (slept) slept_[r.lane].store(true, std::memory_order_relaxed);
    if (r.loaded > 0 && first_load_ns_[r.lane].load(std::memory_order_relaxed) == 0) {
      first_load_ns_[r.lane].store(now - push, std::memory_order_relaxed);
    }
    if (!slept && total > longest_ns_[r.lane].load(std::memory_order_relaxed)) {
      longest_ns_[r.lane].store(total, std::memory_order_relaxed);
      for (std::size_t p = 0; p < kPhases; ++p) {
        longest_phases_[r.lane][p].store(r.phase_ns[p], std::memory_order_relaxed);
      }
    }
  }
  std::string report(std::size_t lanes) const {
    std::string s;
    char buf[160];
    for (std::size_t l = 0; l < lanes; ++l) {
      const std::uint64_t first = first_load_ns_[l].load(std::memory_order_relaxed);
      std::snprintf(buf, sizeof buf, "    lane %zu: first load %s%s; longest round %.1f us (", l,
                    first == 0 ? "-" : std::to_string(first / 1000).c_str(),
                    slept_[l].load(std::memory_order_relaxed) ? " after a sleep" : "",
                    static_cast<double>(longest_ns_[l].load(std::memory_order_relaxed)) / 1e3);
      s += buf;
      for (std::size_t p = 0; p < kPhases; ++p) {
        std::snprintf(
            buf, sizeof buf, "%s%.1f", p == 0 ? "" : "/",
            static_cast<double>(longest_phases_[l][p].load(std::memory_order_relaxed)) / 1e3);
        s += buf;
      }
      s += ")\n";
    }
    return s;
  }

 private:
  std::atomic<std::uint64_t> push_ns_{0};
  std::array<std::atomic<std::uint64_t>, kLanes> first_load_ns_{};
  std::array<std::atomic<bool>, kLanes> slept_{};
  std::array<std::atomic<bool>, kLanes> sleeping_{};
  std::array<std::atomic<std::uint64_t>, kLanes> longest_ns_{};
  std::array<std::array<std::atomic<std::uint64_t>, kPhases>, kLanes> longest_phases_{};
};

using Types = weft::gpu::TaskTypes<OnWhichSm>;
using SmPool = weft::gpu::Pool<Types, 32>;

// Runs `rounds` batches on a new pool; returns how many ran on every SM and appends the
// others' reports to `report`.
int one_trial(int sms, std::chrono::microseconds wait, int rounds, std::string& report) {
  LaneLog log;
  weft::gpu::PoolOptions o;
  o.backend = weft::gpu::Backend::device;
  o.program = weft::gpu::device_program<Types, 32>();
  o.devices = {0};
  o.observer = &log;
  SmPool pool(o);
  if (wait.count() > 0) std::this_thread::sleep_for(wait);
  int whole = 0;
  for (int round = 0; round < rounds; ++round) {
    std::vector<SmPool::Record> batch(static_cast<std::size_t>(sms),
                                      SmPool::Record::make<OnWhichSm>({200'000, ~0u}));
    log.arm();
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
    if (on.size() == static_cast<std::size_t>(sms)) {
      ++whole;
      continue;
    }
    report += "  round " + std::to_string(round) + ": " + std::to_string(on.size()) + " SMs\n";
    report += log.report(std::min(LaneLog::kLanes, pool.num_lanes()));
  }
  return whole;
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
    int rounds;
  };
  for (const Mode& m : {Mode{"fresh", std::chrono::microseconds(0), 1},
                        Mode{"awake", std::chrono::microseconds(300), 1},
                        Mode{"asleep", std::chrono::microseconds(20'000), 1},
                        Mode{"rounds", std::chrono::microseconds(0), 5}}) {
    int whole = 0;
    std::string report;
    for (int t = 0; t < trials; ++t) whole += one_trial(sms, m.wait, m.rounds, report);
    std::printf("%-6s %d of %d batches on all %d SMs\n%s", m.name, whole, trials * m.rounds, sms,
                report.c_str());
  }
  return 0;
}
