// weft/cpu/detail/futex.hpp - bounded sleeping on a 32-bit atomic word.
//
// std::atomic::wait cannot time out, and a wake-up lost inside it (we saw one with libstdc++
// under GCC 13, see docs/cpu.md) would hang the waiter for good. Every sleep in the CPU executor
// goes through here instead and lasts at most a given time; callers re-check their condition
// in a loop, so a lost wake-up costs a late wake, not a hang. Linux: the futex system call;
// elsewhere: std::atomic::wait (no bound).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace weft::cpu::detail {

/// The longest one bounded sleep lasts before its caller re-checks. A wake-up ends a sleep at
/// once, so this only bounds how late a lost wake-up is noticed: safe on any machine.
inline constexpr std::chrono::milliseconds kParkLimit{50};

/// Sleeps while `word` holds `expected`, at most `limit`. May return early (spuriously): the
/// caller re-checks. A wake between the caller's last check and the sleep is not lost: the
/// kernel compares the word and queues the sleeper under one lock. Returns true when the sleep
/// ended by its limit (the caller may count it: with partners that keep it waiting less than the
/// limit, a timeout is a lost wake-up).
bool futex_wait_for(std::atomic<std::uint32_t>& word, std::uint32_t expected,
                    std::chrono::nanoseconds limit) noexcept;
/// Wakes one / every thread sleeping on `word`.
void futex_wake_one(std::atomic<std::uint32_t>& word) noexcept;
void futex_wake_all(std::atomic<std::uint32_t>& word) noexcept;

}  // namespace weft::cpu::detail
