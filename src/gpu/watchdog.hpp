// The watchdog: gives up on a task that has been in a slot (or the mailbox) longer than the
// pool's task_deadline. A task it gives up on is delivered as TaskStatus::timed_out at once,
// and its slot becomes LOST: kept out of use until the block finishes the task after all, when
// the late result is dropped and the slot is reclaimed. So every task is delivered exactly
// once, and no slot is reused while a block may still write it.
//
//   in flight --(deadline passed: delivered timed_out)--> LOST --(block finished)--> reclaimed
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace weft::gpu::detail {

class Watchdog {
 public:
  using Clock = std::chrono::steady_clock;

  explicit Watchdog(std::chrono::nanoseconds deadline) noexcept : deadline_(deadline) {}

  /// Whether the pool has a deadline at all.
  [[nodiscard]] bool on() const noexcept { return deadline_.count() > 0; }
  /// Whether a task loaded at `loaded` has passed the deadline at `now`.
  [[nodiscard]] bool passed(Clock::time_point loaded, Clock::time_point now) const noexcept {
    return on() && now - loaded > deadline_;
  }
  /// A task was delivered as timed_out; its slot is lost until the block finishes it.
  void gave_up() noexcept {
    // relaxed: statistics.
    timed_out_.fetch_add(1, std::memory_order_relaxed);
    lost_.fetch_add(1, std::memory_order_relaxed);
  }
  /// A lost slot's task finished after all: its result is dropped and the slot reclaimed.
  void reclaimed() noexcept { lost_.fetch_sub(1, std::memory_order_relaxed); }

  [[nodiscard]] std::uint64_t timed_out() const noexcept {
    return timed_out_.load(std::memory_order_relaxed);  // relaxed: a statistic
  }
  [[nodiscard]] std::uint64_t slots_lost() const noexcept {
    return lost_.load(std::memory_order_relaxed);  // relaxed: a statistic
  }

 private:
  std::chrono::nanoseconds deadline_;
  std::atomic<std::uint64_t> timed_out_{0};
  std::atomic<std::uint64_t> lost_{0};
};

}  // namespace weft::gpu::detail
