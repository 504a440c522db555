// The Parker: a binary token with a bounded sleep. These tests pin the three promises the
// executor builds on: a token set before park() is taken at once; unpark() wakes a sleeper
// (never lost: a lost wake-up would show as a timeout); a sleep without a token ends by its limit.
#include "weft/cpu/detail/parker.hpp"

#include "test_util.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>

namespace weft::cpu::detail {
namespace {

using namespace std::chrono_literals;

using test::stress_scale;

// Takes a token left by an earlier test's late (stale-index) unpark, which parkers tolerate.
Parker& drained_own_parker() {
  Parker& p = parker_at(this_thread_parker_index());
  while (p.park(std::chrono::nanoseconds(0))) {
  }
  return p;
}

TEST(Parker, ATokenSetBeforeParkIsTakenAtOnce) {
  Parker& p = drained_own_parker();
  p.unpark();
  p.unpark();  // binary: a second unpark adds nothing
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(p.park(10s));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
  EXPECT_FALSE(p.park(1ms)) << "the token is binary: two unparks give one park";
}

TEST(Parker, ASleepWithoutATokenEndsByItsLimit) {
  Parker& p = drained_own_parker();
  const std::uint64_t before = Parker::timeouts();
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(p.park(20ms));
  const auto slept = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(slept, 20ms);
  EXPECT_LT(slept, 5s);
  EXPECT_GE(Parker::timeouts(), before + 1);
}

TEST(Parker, UnparkWakesASleeperWithoutWaitingForTheLimit) {
  std::atomic<std::uint32_t> index{0};
  std::atomic<bool> took{false};
  std::thread sleeper([&] {
    const std::uint32_t me = this_thread_parker_index();
    index.store(me, std::memory_order_release);
    took.store(parker_at(me).park(60s), std::memory_order_release);
  });
  while (index.load(std::memory_order_acquire) == 0) std::this_thread::yield();
  std::this_thread::sleep_for(20ms);  // let it fall asleep
  const auto t0 = std::chrono::steady_clock::now();
  parker_at(index.load()).unpark();
  sleeper.join();
  EXPECT_TRUE(took.load());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
}

// Two threads hand a baton back and forth through flags and each other's Parker, parking with a
// long limit. A lost wake-up would stall a round until the limit and count as a timeout.
TEST(Parker, PingPongLosesNoWakeUp) {
  const int rounds = static_cast<int>(100'000 * stress_scale()) + 100;
  std::atomic<std::uint32_t> parker_of[2] = {0, 0};
  std::atomic<int> baton{0};     // round number; even: thread 0 moves, odd: thread 1
  std::atomic<int> timeouts{0};  // parks of the two players that ended by their limit
  auto player = [&](int me) {
    const std::uint32_t mine = this_thread_parker_index();
    parker_of[me].store(mine, std::memory_order_release);
    while (parker_of[1 - me].load(std::memory_order_acquire) == 0) std::this_thread::yield();
    Parker& self = parker_at(mine);
    Parker& other = parker_at(parker_of[1 - me].load(std::memory_order_acquire));
    for (;;) {
      int b = baton.load(std::memory_order_acquire);
      while (b < 2 * rounds && (b & 1) != me) {
        if (!self.park(30s)) timeouts.fetch_add(1, std::memory_order_relaxed);
        b = baton.load(std::memory_order_acquire);
      }
      if (b >= 2 * rounds) break;
      baton.store(b + 1, std::memory_order_release);
      other.unpark();
    }
    other.unpark();
  };
  std::thread a(player, 0), b(player, 1);
  a.join();
  b.join();
  EXPECT_EQ(baton.load(), 2 * rounds);
  EXPECT_EQ(timeouts.load(), 0) << "a sleeper waited out its limit: lost wake";
}

}  // namespace
}  // namespace weft::cpu::detail
