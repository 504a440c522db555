#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <thread>

#include "weft/cpu/task_group.hpp"

namespace weft::cpu {
namespace {

// fib in continuation-passing style: no thread ever blocks in a wait.
void fib_cps(int n, long* out, Continuation::Ref parent) {
  if (n < 2) {
    *out = n;
    return;
  }
  auto* parts = new long[2]{0, 0};
  auto join = Continuation::create_child(parent, [parts, out] {
    *out = parts[0] + parts[1];
    delete[] parts;
  });
  const Continuation::Ref me = join.ref();
  join.spawn([n, parts, me] { fib_cps(n - 1, &parts[0], me); });
  join.spawn([n, parts, me] { fib_cps(n - 2, &parts[1], me); });
  join.release();
}

TEST(Continuation, RunsOnceAfterAllChildren) {
  Executor ex(ExecutorOptions{.workers = 2});
  std::atomic<int> children{0};
  std::atomic<int> seen_by_continuation{-1};
  std::atomic<int> continuation_runs{0};
  std::atomic<bool> done{false};
  auto join = Continuation::create(ex, [&] {
    seen_by_continuation = children.load();
    continuation_runs.fetch_add(1);
    done.store(true);
  });
  for (int i = 0; i < 500; ++i) join.spawn([&] { children.fetch_add(1); });
  join.release();
  while (!done.load()) std::this_thread::yield();
  EXPECT_EQ(seen_by_continuation.load(), 500);
  EXPECT_EQ(continuation_runs.load(), 1);
}

TEST(Continuation, RunsEvenWithoutChildren) {
  Executor ex(ExecutorOptions{.workers = 1});
  auto f = ex.submit([] {});
  std::atomic<bool> ran{false};
  {
    auto join = Continuation::create(ex, [&] { ran = true; });
  }  // released by the destructor
  ex.shutdown();
  EXPECT_TRUE(ran.load());
}

TEST(Continuation, ReceivesTheFirstChildException) {
  Executor ex(ExecutorOptions{.workers = 2});
  std::atomic<bool> done{false};
  std::string message;
  auto join = Continuation::create(ex, [&](std::exception_ptr e) {
    try {
      if (e) std::rethrow_exception(e);
    } catch (const std::exception& x) {
      message = x.what();
    }
    done.store(true);
  });
  join.spawn([] { throw std::runtime_error("child failed"); });
  join.release();
  while (!done.load()) std::this_thread::yield();
  EXPECT_EQ(message, "child failed");
}

TEST(Continuation, ReleaseTwiceIsAnInvalidState) {
  Executor ex(ExecutorOptions{.workers = 1});
  auto join = Continuation::create(ex, [] {});
  join.release();
  EXPECT_THROW(join.release(), InvalidState);
  EXPECT_THROW(join.spawn([] {}), InvalidState);
}

TEST(Continuation, NonBlockingFibMatchesSequential) {
  Executor ex(ExecutorOptions{.workers = 2});
  long result = -1;
  std::atomic<bool> root_done{false};
  long seen_at_root = -2;
  auto root = Continuation::create(ex, [&] {
    seen_at_root = result;  // every nested continuation has run before the root's
    root_done.store(true);
  });
  const Continuation::Ref r = root.ref();
  root.spawn([&result, r] { fib_cps(20, &result, r); });
  root.release();
  while (!root_done.load()) std::this_thread::yield();
  EXPECT_EQ(seen_at_root, 6765);
}

}  // namespace
}  // namespace weft::cpu
