// weft/cpu/detail/worker.hpp - a worker thread's state and the calling thread's context.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <thread>

#include "weft/cpu/detail/split_deque.hpp"

namespace weft::cpu {
class Executor;
}

namespace weft::cpu::detail {

class GroupState;

/// A counter written by one thread and read by others (stats): plain load + store, no lock.
class OwnerCounter {
 public:
  void bump(std::uint64_t n = 1) noexcept {
    // relaxed: a statistic; only the owner writes it.
    v_.store(v_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  [[nodiscard]] std::uint64_t get() const noexcept { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> v_{0};
};

struct Worker {
  Worker(Executor& ex, std::size_t idx, std::size_t capacity)
      : executor(&ex), index(idx), deque(capacity), rng(0x9E3779B97F4A7C15ull * (idx + 1)) {}

  Executor* executor;
  std::size_t index;
  SplitDeque deque;
  std::uint64_t rng;         // xorshift state for victim selection; owner only
  std::uint32_t parker = 0;  // Parker index of the worker thread
  std::thread thread;
  // True while the worker's main loop finds no work (not while it helps inside a wait).
  // Written by the owner, read by workers deciding whether a drain is complete.
  alignas(64) std::atomic<bool> idle{false};

  // Statistics, written by the owner only.
  alignas(64) OwnerCounter tasks_run;
  OwnerCounter tasks_inline;
  OwnerCounter steals;
  OwnerCounter sleeps;
  OwnerCounter found_without_wakeup;

  std::uint64_t next_random() noexcept {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
  }
};

/// What the calling thread is doing for weft: which worker it is (null outside a pool), which
/// group its running task belongs to, and how deep that task was spawned.
struct ThreadContext {
  Worker* worker;
  GroupState* group;
  std::uint32_t depth;
};

inline thread_local ThreadContext tl_context{nullptr, nullptr, 0};

}  // namespace weft::cpu::detail
