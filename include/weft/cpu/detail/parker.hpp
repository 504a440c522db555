// weft/cpu/detail/parker.hpp - one sleep/wake token per thread.
//
// A Parker is a binary token (like Rust's Thread::park/unpark): unpark() sets it, park() takes it
// or sleeps until it is set. Every thread that ever blocks in weft gets a Parker with a small
// index; the index, not a pointer, is what a group or future stores, so that a finisher can wake a
// waiter without touching the (possibly already destroyed) object the waiter waited on. Parkers
// live for the whole process, so a stale index only causes a spurious wake-up, which every wait
// loop tolerates by re-checking its condition.
//
// Sleeping is bounded (kParkLimit, detail/futex.hpp): every caller re-checks what it waits for
// after park() returns, so a wake-up lost anywhere below us costs at most that long instead of
// a hang. The wake path is one exchange and, only when the owner sleeps, one futex wake, as
// with std::atomic::notify_one.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "weft/cpu/detail/futex.hpp"

namespace weft::cpu::detail {

class alignas(64) Parker {
 public:
  /// Takes the token if it is set, else sleeps until it is set or `limit` has passed. Returns
  /// whether the token was taken (false: timed out; the caller re-checks its condition).
  /// Owner thread only.
  bool park(std::chrono::nanoseconds limit = kParkLimit) noexcept;
  /// Sets the token and wakes the owner if it sleeps. Any thread.
  void unpark() noexcept;

  /// Times park() returned by its limit instead of a token, over all Parkers (diagnostic).
  static std::uint64_t timeouts() noexcept;

 private:
  static constexpr std::uint32_t kEmpty = 0;
  static constexpr std::uint32_t kNotified = 1;
  static constexpr std::uint32_t kParked = 2;  // the owner sleeps (or is about to)
  std::atomic<std::uint32_t> state_{kEmpty};
};

/// Index (>= 1) of the calling thread's Parker; assigned on first use, recycled at thread exit.
std::uint32_t this_thread_parker_index();
/// The Parker with the given index (>= 1). Any thread.
Parker& parker_at(std::uint32_t index) noexcept;

}  // namespace weft::cpu::detail
