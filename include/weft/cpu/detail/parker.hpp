// weft/cpu/detail/parker.hpp - one sleep/wake token per thread.
//
// A Parker is a binary token (like Rust's Thread::park/unpark): unpark() sets it, park() takes it
// or sleeps until it is set. Every thread that ever blocks in weft gets a Parker with a small
// index; the index, not a pointer, is what a group or future stores, so that a finisher can wake a
// waiter without touching the (possibly already destroyed) object the waiter waited on. Parkers
// live for the whole process, so a stale index only causes a spurious wake-up, which every wait
// loop tolerates by re-checking its condition.
#pragma once

#include <atomic>
#include <cstdint>

namespace weft::cpu::detail {

class alignas(64) Parker {
 public:
  /// Takes the token, sleeping until one is available. Owner thread only.
  void park() noexcept {
    // acquire pairs with the release in unpark(): what the unparker wrote before waking us is
    // visible when we return.
    while (token_.exchange(0, std::memory_order_acquire) == 0) {
      token_.wait(0, std::memory_order_acquire);
    }
  }
  /// Sets the token and wakes the owner if it sleeps. Any thread.
  void unpark() noexcept {
    // release pairs with the acquire exchange in park().
    token_.store(1, std::memory_order_release);
    token_.notify_one();
  }

 private:
  std::atomic<std::uint32_t> token_{0};
};

/// Index (>= 1) of the calling thread's Parker; assigned on first use, recycled at thread exit.
std::uint32_t this_thread_parker_index();
/// The Parker with the given index (>= 1). Any thread.
Parker& parker_at(std::uint32_t index) noexcept;

}  // namespace weft::cpu::detail
