#include "weft/cpu/detail/split_deque.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace weft::cpu::detail {
namespace {

Task* fake(std::uintptr_t i) { return reinterpret_cast<Task*>(i * 64); }
std::uintptr_t id(Task* t) { return reinterpret_cast<std::uintptr_t>(t) / 64; }

TEST(SplitDeque, OwnerPopsNewestFirst) {
  SplitDeque dq(16);
  for (std::uintptr_t i = 1; i <= 5; ++i) ASSERT_TRUE(dq.push(fake(i)));
  for (std::uintptr_t i = 5; i >= 1; --i) EXPECT_EQ(id(dq.pop()), i);
  EXPECT_EQ(dq.pop(), nullptr);
}

TEST(SplitDeque, ThievesCannotSeePrivateTasks) {
  SplitDeque dq(16);
  ASSERT_TRUE(dq.push(fake(1)));
  ASSERT_TRUE(dq.push(fake(2)));
  EXPECT_EQ(dq.steal(), nullptr);
  EXPECT_TRUE(dq.publish_requested());
  dq.publish(0);
  EXPECT_FALSE(dq.publish_requested());
  EXPECT_EQ(id(dq.steal()), 1u);  // oldest first
  EXPECT_EQ(id(dq.steal()), 2u);
  EXPECT_EQ(dq.steal(), nullptr);
  EXPECT_EQ(dq.pop(), nullptr);
}

TEST(SplitDeque, PublishKeepsTheNewestPrivate) {
  SplitDeque dq(16);
  for (std::uintptr_t i = 1; i <= 6; ++i) ASSERT_TRUE(dq.push(fake(i)));
  dq.publish(2);  // 1..4 public, 5..6 private
  EXPECT_EQ(dq.private_size(), 2);
  EXPECT_EQ(id(dq.steal()), 1u);
  EXPECT_EQ(id(dq.pop()), 6u);
  EXPECT_EQ(id(dq.pop()), 5u);
  // Private empty: the owner reclaims half of the public part (2, 3, 4) and pops the newest.
  EXPECT_EQ(id(dq.pop()), 4u);
  EXPECT_EQ(id(dq.steal()), 2u);
  EXPECT_EQ(id(dq.pop()), 3u);
  EXPECT_EQ(dq.pop(), nullptr);
  EXPECT_EQ(dq.steal(), nullptr);
}

TEST(SplitDeque, RefusesPushWhenFull) {
  SplitDeque dq(4);
  for (std::uintptr_t i = 1; i <= 4; ++i) ASSERT_TRUE(dq.push(fake(i)));
  EXPECT_FALSE(dq.push(fake(5)));
  dq.publish(0);
  EXPECT_EQ(id(dq.steal()), 1u);
  EXPECT_TRUE(dq.push(fake(5)));  // the stolen slot is reusable
}

TEST(SplitDeque, HoldsFewerThanTracksSteals) {
  SplitDeque dq(64);
  for (std::uintptr_t i = 1; i <= 10; ++i) ASSERT_TRUE(dq.push(fake(i)));
  EXPECT_FALSE(dq.holds_fewer_than(10));
  dq.publish(0);
  ASSERT_NE(dq.steal(), nullptr);
  // The owner re-reads top at most every few calls once at the bound: within 8 it sees it.
  bool seen = false;
  for (int i = 0; i < 8 && !seen; ++i) seen = dq.holds_fewer_than(10);
  EXPECT_TRUE(seen);
}

// Thieves empty the deque; the owner's pop finds it empty. Its size estimate must then be exact:
// a stale one counted the stolen tasks as still there, so the next spawns ran at once (the
// bound looked reached) for up to 8 calls while the thieves had nothing to steal.
TEST(SplitDeque, EmptyPopResetsTheSizeEstimate) {
  SplitDeque dq(64);
  for (std::uintptr_t i = 1; i <= 10; ++i) ASSERT_TRUE(dq.push(fake(i)));
  EXPECT_FALSE(dq.holds_fewer_than(10));  // caches top
  dq.publish(0);
  for (int i = 0; i < 10; ++i) ASSERT_NE(dq.steal(), nullptr);
  EXPECT_EQ(dq.pop(), nullptr);
  for (std::uintptr_t i = 11; i <= 20; ++i) ASSERT_TRUE(dq.push(fake(i)));
  EXPECT_TRUE(dq.holds_fewer_than(11));  // 10 tasks now, and the first call must know it
}

// Owner pushes, publishes and pops while thieves steal: every task is taken exactly once.
TEST(SplitDeque, StressEveryTaskTakenExactlyOnce) {
  constexpr std::uintptr_t kTasks = 200000;
  constexpr int kThieves = 3;
  SplitDeque dq(256);
  std::vector<std::atomic<int>> taken(kTasks + 1);
  std::atomic<bool> done{false};
  std::vector<std::thread> thieves;
  for (int k = 0; k < kThieves; ++k) {
    thieves.emplace_back([&] {
      while (!done.load(std::memory_order_acquire)) {
        if (Task* t = dq.steal()) taken[id(t)].fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  std::uint64_t rng = 12345;
  std::uintptr_t next = 1;
  while (next <= kTasks) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    const int action = static_cast<int>((rng >> 33) % 8);
    if (action < 5) {
      if (dq.push(fake(next))) ++next;
    } else if (action == 5) {
      dq.publish(static_cast<std::int64_t>((rng >> 40) % 4));
    } else if (Task* t = dq.pop()) {
      taken[id(t)].fetch_add(1, std::memory_order_relaxed);
    }
  }
  dq.publish(0);
  while (Task* t = dq.pop()) taken[id(t)].fetch_add(1, std::memory_order_relaxed);
  done.store(true, std::memory_order_release);
  for (auto& th : thieves) th.join();
  for (std::uintptr_t i = 1; i <= kTasks; ++i) {
    ASSERT_EQ(taken[i].load(), 1) << "task " << i;
  }
}

}  // namespace
}  // namespace weft::cpu::detail
