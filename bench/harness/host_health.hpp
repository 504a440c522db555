// bench/harness/host_health.hpp - how fast this machine hands a cache line from one thread to
// another: the yardstick for telling a slow change from a slow machine instance. The device
// tool's GPU machines differ by up to 2x in every host-bound figure of the GPU pool between
// instances (lab/results/h100/README.md), and runs from different instances cannot be compared
// without knowing which kind each was; suites record this at their start and end.
// It is a hint, not a normaliser: on the H100 instances of 2026-11-23 it did not track the
// pool's figures (docs/benchmarks.md).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "weft/cpu/detail/cpu_relax.hpp"

namespace weft::bench {

/// One-way hand-off time between two threads through one atomic word, in nanoseconds: the
/// median over `batches` of (batch time / round trips / 2). A waiting side spins (yielding now
/// and then, so that a machine with one free core still finishes).
inline double host_handoff_ns(int round_trips = 20000, int batches = 5) {
  std::atomic<std::uint32_t> word{0};
  // The waiter of `value`: spins until the word holds it.
  auto await = [&word](std::uint32_t value) {
    for (std::uint32_t spins = 1;
         // acquire: pairs with the other side's release store of `value`.
         word.load(std::memory_order_acquire) != value; ++spins) {
      weft::cpu::detail::cpu_relax();
      if ((spins & 1023) == 0) std::this_thread::yield();
    }
  };
  const auto total = static_cast<std::uint32_t>(round_trips) * static_cast<std::uint32_t>(batches);
  // The echo side: answers every odd value v with v + 1.
  std::thread echo([&] {
    for (std::uint32_t v = 1; v < 2 * total; v += 2) {
      await(v);
      word.store(v + 1, std::memory_order_release);  // release: pairs with await's acquire
    }
  });
  std::vector<double> per_handoff;
  std::uint32_t v = 1;
  for (int b = 0; b < batches; ++b) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < round_trips; ++i, v += 2) {
      word.store(v, std::memory_order_release);  // release: pairs with await's acquire
      await(v + 1);
    }
    const std::chrono::duration<double, std::nano> t = std::chrono::steady_clock::now() - t0;
    per_handoff.push_back(t.count() / round_trips / 2);
  }
  echo.join();
  std::sort(per_handoff.begin(), per_handoff.end());
  return per_handoff[per_handoff.size() / 2];
}

}  // namespace weft::bench
