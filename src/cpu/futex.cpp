// Bounded sleeping on a 32-bit word (see detail/futex.hpp).
#include "weft/cpu/detail/futex.hpp"

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <ctime>
#endif

namespace weft::cpu::detail {

#if defined(__linux__)
static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));

bool futex_wait_for(std::atomic<std::uint32_t>& word, std::uint32_t expected,
                    std::chrono::nanoseconds limit) noexcept {
  const auto ns = limit.count() > 0 ? limit.count() : 1;
  timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
  // A relative timeout: FUTEX_WAIT (unlike FUTEX_WAIT_BITSET) measures it on CLOCK_MONOTONIC.
  // Every outcome (woken, timed out, EAGAIN because the word changed, EINTR) is a return.
  return syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAIT_PRIVATE, expected,
                 &ts, nullptr, 0) == -1 &&
         errno == ETIMEDOUT;
}
void futex_wake_one(std::atomic<std::uint32_t>& word) noexcept {
  (void)syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAKE_PRIVATE, 1, nullptr,
                nullptr, 0);
}
void futex_wake_all(std::atomic<std::uint32_t>& word) noexcept {
  (void)syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAKE_PRIVATE, INT_MAX,
                nullptr, nullptr, 0);
}
#else
bool futex_wait_for(std::atomic<std::uint32_t>& word, std::uint32_t expected,
                    std::chrono::nanoseconds) noexcept {
  word.wait(expected, std::memory_order_acquire);
  return false;
}
void futex_wake_one(std::atomic<std::uint32_t>& word) noexcept { word.notify_one(); }
void futex_wake_all(std::atomic<std::uint32_t>& word) noexcept { word.notify_all(); }
#endif

}  // namespace weft::cpu::detail
