// A mutex that spins briefly before it parks. The pool's queue shards are held for ~100 ns at
// a time; with std::mutex alone a contended lock parks the waiter in the kernel at once and the
// holder's unlock then pays a futex wake-up, a few microseconds on a virtual machine, which
// made single-task consumers several times slower once they had started to park
// (docs/decisions/002-gpu-input-queue.md). Spinning first keeps the common short wait in user
// space; a long one still sleeps (an oversubscribed machine, a descheduled holder). glibc's
// PTHREAD_MUTEX_ADAPTIVE_NP does the same but is not portable.
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
  // About ten of the queues' critical sections: long enough to ride out a holder that is
  // running, short enough (1-2 us of pauses on x86 servers) that a descheduled holder's
  // waiter soon parks instead of burning its core.
  static constexpr int kSpins = 64;
  std::mutex m_;
};

}  // namespace weft::gpu::detail
