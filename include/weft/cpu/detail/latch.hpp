// weft/cpu/detail/latch.hpp - a countdown that one thread can sleep on.
//
// One 64-bit word holds the count (low 40 bits) and the Parker index of a sleeping waiter (high
// 24 bits). Keeping both in one word means the arrival that brings the count to zero learns from
// its own fetch_sub whom to wake, and never touches the latch again: the waiter may destroy the
// latch the moment it sees zero (the latch of a stack TaskGroup does exactly that).
#pragma once

#include <atomic>
#include <cstdint>

#include "weft/cpu/detail/parker.hpp"

namespace weft::cpu::detail {

class Latch {
 public:
  static constexpr std::uint64_t kCountBits = 40;
  static constexpr std::uint64_t kCountMask = (std::uint64_t{1} << kCountBits) - 1;

  explicit Latch(std::uint64_t initial = 0) noexcept : word_(initial) {}

  /// Adds n to the count. Any thread; the caller must itself be counted or own the latch, so the
  /// count cannot be zero with a waiter gone.
  void add(std::uint64_t n = 1) noexcept {
    // relaxed: the increment is ordered before the matching arrive() by program order or by the
    // release/acquire that hands the new task to another thread.
    word_.fetch_add(n, std::memory_order_relaxed);
  }

  /// Counts one arrival; wakes the registered waiter if this was the last. Any thread.
  /// After this call the latch may already be destroyed: callers must not touch it again.
  void arrive() noexcept {
    // acq_rel: release publishes the arriving task's effects (results, a stored exception) to
    // the waiter's acquire in done()/wait; acquire chains earlier arrivals.
    const std::uint64_t old = word_.fetch_sub(1, std::memory_order_acq_rel);
    const auto waiter = static_cast<std::uint32_t>(old >> kCountBits);
    if ((old & kCountMask) == 1 && waiter != 0) parker_at(waiter).unpark();
  }

  /// True when the count is zero. acquire: pairs with the release of the last arrive().
  [[nodiscard]] bool done() const noexcept {
    return (word_.load(std::memory_order_acquire) & kCountMask) == 0;
  }

  [[nodiscard]] std::uint64_t count() const noexcept {
    return word_.load(std::memory_order_relaxed) & kCountMask;
  }

  /// Registers `parker` as the waiter to wake at zero. Returns false when the count is already
  /// zero (nothing to wait for). One waiter at a time: a second registration replaces the first.
  bool register_waiter(std::uint32_t parker) noexcept {
    std::uint64_t w = word_.load(std::memory_order_acquire);
    for (;;) {
      if ((w & kCountMask) == 0) return false;
      const std::uint64_t want = (w & kCountMask) | (std::uint64_t{parker} << kCountBits);
      // acq_rel: on failure we re-read a newer word (acquire, in case it is zero); on success
      // the final arrive() will read our index from its fetch_sub.
      if (word_.compare_exchange_weak(w, want, std::memory_order_acq_rel,
                                      std::memory_order_acquire)) {
        return true;
      }
    }
  }

  /// Clears the waiter index (after the waiter saw zero). Waiter only.
  void clear_waiter() noexcept {
    // relaxed: only the waiter field changes; the count is zero and nobody else arrives.
    word_.fetch_and(kCountMask, std::memory_order_relaxed);
  }

  /// Sleeps until the count is zero. For threads that cannot help (not a worker).
  void wait_parked() noexcept {
    if (done()) return;
    const std::uint32_t me = this_thread_parker_index();
    while (register_waiter(me)) {
      parker_at(me).park();
    }
    clear_waiter();
  }

 private:
  std::atomic<std::uint64_t> word_;
};

}  // namespace weft::cpu::detail
