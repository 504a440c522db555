// weft/gpu/detail/adaptive_mutex.hpp - a mutex that spins briefly before it parks. The pool's
// queue shards are held for ~100 ns at a time; with std::mutex alone a contended lock parks
// the waiter in the kernel at once and the holder's unlock then pays a futex wake-up, a few
// microseconds on a virtual machine: four consumers popping single tasks from sharded output
// queues ran either at ~70 ns per task or, once they had started to park, at 170-350 ns
// (bench/results/h100/probes/gpu-pool-895496b.json, empty_task_ns_single samples). Spinning first
// keeps the common short wait in user space; a long one still sleeps (an oversubscribed
// machine, a descheduled holder). glibc's PTHREAD_MUTEX_ADAPTIVE_NP does the same but is not
// portable.
#pragma once

#include <mutex>
#if defined(WEFT_POOL_PROFILE)
#include <atomic>
#include <cstdint>
#endif

#include "weft/cpu/detail/cpu_relax.hpp"

namespace weft::gpu::detail {

class AdaptiveMutex {
 public:
  void lock() {
    for (int i = 0; i < kSpins; ++i) {
      if (m_.try_lock()) return;
      weft::cpu::detail::cpu_relax();
    }
#if defined(WEFT_POOL_PROFILE)
    // scripts/probes/lane_profile.cu: how often a thread of the pool had to park.
    g_parks.fetch_add(1, std::memory_order_relaxed);  // relaxed: a statistic
#endif
    m_.lock();
  }
#if defined(WEFT_POOL_PROFILE)
  static inline std::atomic<std::uint64_t> g_parks{0};
#endif
  bool try_lock() { return m_.try_lock(); }
  void unlock() { m_.unlock(); }

 private:
  // ~1-2 us of pauses on current x86 servers (scripts/probes/clock_probe.cpp): some ten
  // critical sections of the queues.
  static constexpr int kSpins = 64;
  std::mutex m_;
};

}  // namespace weft::gpu::detail
