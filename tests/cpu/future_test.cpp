#include "weft/cpu/future.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "weft/cpu/executor.hpp"
#include "weft/cpu/task_group.hpp"

namespace weft::cpu {
namespace {

TEST(Future, CarriesValuesOfAnyMovableType) {
  Executor ex(ExecutorOptions{.workers = 2});
  auto s = ex.submit([] { return std::string(1000, 'x'); });
  auto p = ex.submit([] { return std::make_unique<int>(5); });
  auto v = ex.submit([] {});
  EXPECT_EQ(s.get().size(), 1000u);
  EXPECT_EQ(*p.get(), 5);
  v.get();
  EXPECT_FALSE(v.valid());
}

TEST(Future, RethrowsTheTaskException) {
  Executor ex(ExecutorOptions{.workers = 2});
  auto f = ex.submit([]() -> int { throw std::invalid_argument("bad input 42"); });
  try {
    (void)f.get();
    FAIL() << "get() should rethrow";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "bad input 42");
  }
}

TEST(Future, GetTwiceIsAnInvalidState) {
  Executor ex(ExecutorOptions{.workers = 1});
  auto f = ex.submit([] { return 1; });
  EXPECT_EQ(f.get(), 1);
  EXPECT_THROW((void)f.get(), InvalidState);
  Future<int> empty;
  EXPECT_THROW(empty.wait(), InvalidState);
}

TEST(Future, AWorkerWaitingOnAFutureRunsOtherTasks) {
  // One worker: the outer task waits on an inner future that only this same worker can run.
  Executor ex(ExecutorOptions{.workers = 1});
  auto outer = ex.submit([&] {
    auto inner = ex.submit([] { return 21; });
    return inner.get() * 2;
  });
  EXPECT_EQ(outer.get(), 42);
}

TEST(Future, ReadyBecomesTrue) {
  Executor ex(ExecutorOptions{.workers = 1});
  auto f = ex.submit([] { return 3; });
  f.wait();
  EXPECT_TRUE(f.ready());
  EXPECT_EQ(f.get(), 3);
}

}  // namespace
}  // namespace weft::cpu
