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

#include "weft/cpu/detail/cpu_relax.hpp"

namespace weft::gpu::detail {

class AdaptiveMutex {
 public:
  void lock() {
    for (int i = 0; i < kSpins; ++i) {
      if (m_.try_lock()) return;
      weft::cpu::detail::cpu_relax();
    }
    m_.lock();
  }
  bool try_lock() { return m_.try_lock(); }
  void unlock() { m_.unlock(); }

 private:
  // ~1-2 us of pauses on current x86 servers (scripts/probes/clock_probe.cpp): some ten
  // critical sections of the queues.
  static constexpr int kSpins = 64;
  std::mutex m_;
};

}  // namespace weft::gpu::detail
