#include "weft/cpu/task_group.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

namespace weft::cpu {
namespace {

long fib(Executor& ex, int n) {
  if (n < 2) return n;
  long a = 0;
  TaskGroup g(ex);
  g.spawn([&] { a = fib(ex, n - 1); });
  const long b = fib(ex, n - 2);
  g.wait();
  return a + b;
}

long fib_seq(int n) { return n < 2 ? n : fib_seq(n - 1) + fib_seq(n - 2); }

class EveryPolicy : public ::testing::TestWithParam<SpawnPolicy> {};

TEST_P(EveryPolicy, NestedForkJoinComputesFib) {
  Executor ex(ExecutorOptions{.workers = 2, .spawn_policy = GetParam(), .depth_bound = 6});
  auto f = ex.submit([&] { return fib(ex, 22); });
  EXPECT_EQ(f.get(), fib_seq(22));
}

TEST_P(EveryPolicy, WaitFromOutsideThePool) {
  Executor ex(ExecutorOptions{.workers = 2, .spawn_policy = GetParam()});
  std::atomic<int> sum{0};
  TaskGroup g(ex);
  for (int i = 1; i <= 1000; ++i) g.spawn([&, i] { sum.fetch_add(i); });
  EXPECT_EQ(g.wait(), GroupStatus::complete);
  EXPECT_EQ(sum.load(), 500500);
}

INSTANTIATE_TEST_SUITE_P(Policies, EveryPolicy,
                         ::testing::Values(SpawnPolicy::bounded_queue, SpawnPolicy::bounded_depth,
                                           SpawnPolicy::help_first));

TEST(TaskGroup, BoundedQueueRunsChildrenInlineAboveTheBound) {
  Executor ex(ExecutorOptions{.workers = 1, .private_bound = 2, .public_bound = 2});
  auto f = ex.submit([&] {
    TaskGroup g(ex);
    std::vector<int> where(10, -2);
    for (int i = 0; i < 10; ++i) {
      // With one worker nobody steals: the first 4 are queued, the other 6 run at once.
      g.spawn([&, i] { where[i] = i; });
    }
    int ran_before_wait = 0;
    for (int v : where) ran_before_wait += (v >= 0);
    g.wait();
    return ran_before_wait;
  });
  EXPECT_EQ(f.get(), 6);
  EXPECT_EQ(ex.stats().tasks_inline, 6u);
}

TEST(TaskGroup, HelpFirstQueuesEveryChild) {
  Executor ex(ExecutorOptions{.workers = 1, .spawn_policy = SpawnPolicy::help_first});
  auto f = ex.submit([&] {
    TaskGroup g(ex);
    std::atomic<int> ran{0};
    for (int i = 0; i < 100; ++i) g.spawn([&] { ran.fetch_add(1); });
    const int before = ran.load();
    g.wait();
    return before * 1000 + ran.load();
  });
  EXPECT_EQ(f.get(), 100);  // none ran before the wait, all after
}

TEST(TaskGroup, ExceptionReachesTheWaiterAndCancelsTheRest) {
  Executor ex(ExecutorOptions{.workers = 2, .spawn_policy = SpawnPolicy::help_first});
  std::atomic<int> ran{0};
  TaskGroup g(ex);
  g.spawn([] { throw std::runtime_error("boom"); });
  // The failure cancels the group: wait for it (bounded) rather than a fixed time, which a
  // loaded machine may not give the worker.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!g.is_cancelled() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  for (int i = 0; i < 100; ++i) g.spawn([&] { ran.fetch_add(1); });
  try {
    g.wait();
    FAIL() << "wait() should rethrow";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "boom");
  }
  EXPECT_EQ(ran.load() + static_cast<int>(g.cancelled_tasks()), 100);
  EXPECT_GT(g.cancelled_tasks(), 0u);
  // The group is reusable after the wait.
  g.spawn([&] { ran.fetch_add(1000); });
  EXPECT_EQ(g.wait(), GroupStatus::complete);
}

TEST(TaskGroup, CancelSkipsTasksNotStarted) {
  Executor ex(ExecutorOptions{.workers = 1, .spawn_policy = SpawnPolicy::help_first});
  std::atomic<bool> release{false};
  std::atomic<int> ran{0};
  TaskGroup g(ex);
  g.spawn([&] {
    while (!release.load()) std::this_thread::yield();
    ran.fetch_add(1);
  });
  for (int i = 0; i < 50; ++i) g.spawn([&] { ran.fetch_add(1); });
  g.cancel();
  release.store(true);
  EXPECT_EQ(g.wait(), GroupStatus::cancelled);
  EXPECT_EQ(ran.load() + static_cast<int>(g.cancelled_tasks()), 51);
  EXPECT_GE(g.cancelled_tasks(), 50u - 1u);
}

TEST(TaskGroup, WaitFromInsideItselfThrows) {
  Executor ex(ExecutorOptions{.workers = 2, .spawn_policy = SpawnPolicy::help_first});
  TaskGroup g(ex);
  std::atomic<int> outcome{0};
  std::atomic<bool> release{false};
  g.spawn([&] {
    while (!release.load()) std::this_thread::yield();
  });
  g.spawn([&] {
    try {
      g.wait();
      outcome = 1;
    } catch (const InvalidState&) {
      outcome = 2;
    }
    release.store(true);
  });
  g.wait();
  EXPECT_EQ(outcome.load(), 2);
}

TEST(TaskGroup, WaitFromANestedGroupOnItsAncestorThrows) {
  Executor ex(ExecutorOptions{.workers = 2, .spawn_policy = SpawnPolicy::help_first});
  TaskGroup outer(ex);
  std::atomic<int> outcome{0};
  std::atomic<bool> release{false};
  outer.spawn([&] {
    while (!release.load()) std::this_thread::yield();
  });
  outer.spawn([&] {
    TaskGroup inner(ex);
    inner.spawn([&] {
      try {
        outer.wait();
        outcome = 1;
      } catch (const InvalidState&) {
        outcome = 2;
      }
      release.store(true);
    });
    inner.wait();
  });
  outer.wait();
  EXPECT_EQ(outcome.load(), 2);
}

TEST(TaskGroup, SpawnRejectsNullCallable) {
  Executor ex(ExecutorOptions{.workers = 1});
  TaskGroup g(ex);
  std::function<void()> empty;
  EXPECT_THROW(g.spawn(empty), InvalidArgument);
  EXPECT_EQ(g.wait(), GroupStatus::complete);
}

TEST(TaskGroup, DestructorWaitsForRunningTasks) {
  Executor ex(ExecutorOptions{.workers = 2});
  std::atomic<int> ran{0};
  {
    TaskGroup g(ex);
    for (int i = 0; i < 100; ++i) {
      g.spawn([&] {
        std::this_thread::sleep_for(std::chrono::microseconds(100));
        ran.fetch_add(1);
      });
    }
  }
  EXPECT_EQ(ran.load(), 100);
}

TEST(TaskGroup, LargeCallablesAreStoredOnTheHeap) {
  Executor ex(ExecutorOptions{.workers = 2, .spawn_policy = SpawnPolicy::help_first});
  std::array<long, 64> big{};
  for (int i = 0; i < 64; ++i) big[i] = i;
  std::atomic<long> sum{0};
  TaskGroup g(ex);
  for (int k = 0; k < 10; ++k) {
    g.spawn([big, &sum] {
      long s = 0;
      for (long v : big) s += v;
      sum.fetch_add(s);
    });
  }
  g.wait();
  EXPECT_EQ(sum.load(), 10 * (63 * 64 / 2));
}

}  // namespace
}  // namespace weft::cpu
