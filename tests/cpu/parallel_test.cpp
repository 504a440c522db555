#include "weft/cpu/parallel.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <numeric>
#include <stdexcept>
#include <thread>
#include <vector>

namespace weft::cpu {
namespace {

class Schedules : public ::testing::TestWithParam<Schedule> {};

TEST_P(Schedules, ParallelForVisitsEveryIndexOnce) {
  Executor ex(ExecutorOptions{.workers = 2});
  for (std::int64_t n : {0, 1, 2, 3, 17, 10007}) {
    std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
    parallel_for(
        ex, 0, n, [&](std::int64_t i) { hits[static_cast<std::size_t>(i)]++; }, GetParam());
    for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<std::size_t>(i)].load(), 1);
  }
}

TEST_P(Schedules, ParallelReduceMatchesSequentialSum) {
  Executor ex(ExecutorOptions{.workers = 2});
  std::vector<long> v(100003);
  std::iota(v.begin(), v.end(), -500);
  const long expected = std::accumulate(v.begin(), v.end(), 0L);
  const long got = parallel_reduce(
      ex, 0, static_cast<std::int64_t>(v.size()), 0L,
      [&](std::int64_t b, std::int64_t e, long acc) {
        for (; b < e; ++b) acc += v[static_cast<std::size_t>(b)];
        return acc;
      },
      [](long a, long b) { return a + b; }, GetParam());
  EXPECT_EQ(got, expected);
}

INSTANTIATE_TEST_SUITE_P(Cpu, Schedules,
                         ::testing::Values(Schedule::static_partition(),
                                           Schedule::static_partition(7), Schedule::dynamic(1),
                                           Schedule::dynamic(1000)));

TEST(ParallelFor, StaticScheduleRunsExactlyTheStaticPartitionsRanges) {
  Executor ex(ExecutorOptions{.workers = 2});
  std::mutex m;
  std::vector<std::pair<std::int64_t, std::int64_t>> ranges;
  parallel_for_range(
      ex, 0, 10,
      [&](std::int64_t b, std::int64_t e) {
        std::lock_guard<std::mutex> lock(m);
        ranges.emplace_back(b, e);
      },
      Schedule::static_partition(4));
  std::sort(ranges.begin(), ranges.end());
  const std::vector<std::pair<std::int64_t, std::int64_t>> expected{
      {0, 3}, {3, 6}, {6, 8}, {8, 10}};
  EXPECT_EQ(ranges, expected);
}

TEST(ParallelFor, RunsInParallel) {
  Executor ex(ExecutorOptions{.workers = 2});
  std::atomic<int> inside{0};
  std::atomic<int> max_inside{0};
  parallel_for(ex, 0, 2, [&](std::int64_t) {
    const int now = inside.fetch_add(1) + 1;
    int prev = max_inside.load();
    while (now > prev && !max_inside.compare_exchange_weak(prev, now)) {
    }
    // Both parts must be in flight at once: wait (bounded, long enough for a loaded machine to
    // schedule the other worker) for the other one.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (inside.load() < 2 && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    inside.fetch_sub(1);
  });
  EXPECT_EQ(max_inside.load(), 2);
}

TEST(ParallelFor, RejectsGrainZero) {
  Executor ex(ExecutorOptions{.workers = 1});
  EXPECT_THROW(Schedule::dynamic(0), InvalidArgument);
  Schedule bad = Schedule::dynamic(1);
  bad.grain = 0;
  EXPECT_THROW(parallel_for(
                   ex, 0, 10, [](std::int64_t) {}, bad),
               InvalidArgument);
}

TEST(ParallelFor, PropagatesTheBodyException) {
  Executor ex(ExecutorOptions{.workers = 2});
  EXPECT_THROW(parallel_for(ex, 0, 1000,
                            [](std::int64_t i) {
                              if (i == 777) throw std::out_of_range("777");
                            }),
               std::out_of_range);
  EXPECT_THROW(parallel_for(
                   ex, 0, 1000,
                   [](std::int64_t i) {
                     if (i == 3) throw std::out_of_range("3");
                   },
                   Schedule::dynamic(10)),
               std::out_of_range);
}

TEST(ParallelFor, NestedInsideTasks) {
  Executor ex(ExecutorOptions{.workers = 2});
  std::atomic<long> sum{0};
  parallel_for(ex, 0, 8, [&](std::int64_t i) {
    parallel_for(ex, 0, 100, [&](std::int64_t j) { sum.fetch_add(i * 100 + j); });
  });
  EXPECT_EQ(sum.load(), 799 * 800 / 2);
}

TEST(DoubleBuffered, StagesAheadAndComputesInOrder) {
  Executor ex(ExecutorOptions{.workers = 2});
  constexpr int kBlocks = 50;
  std::vector<int> buffer[2] = {std::vector<int>(64), std::vector<int>(64)};
  std::vector<int> order;
  long total = 0;
  double_buffered(
      ex, kBlocks,
      [&](std::int64_t i, int slot) {
        for (int& x : buffer[slot]) x = static_cast<int>(i);
      },
      [&](std::int64_t i, int slot) {
        order.push_back(static_cast<int>(i));
        for (int x : buffer[slot]) {
          EXPECT_EQ(x, i);
          total += x;
        }
      });
  ASSERT_EQ(order.size(), static_cast<std::size_t>(kBlocks));
  for (int i = 0; i < kBlocks; ++i) EXPECT_EQ(order[static_cast<std::size_t>(i)], i);
  EXPECT_EQ(total, 64L * (kBlocks - 1) * kBlocks / 2);
  EXPECT_THROW(double_buffered(
                   ex, -1, [](std::int64_t, int) {}, [](std::int64_t, int) {}),
               InvalidArgument);
}

}  // namespace
}  // namespace weft::cpu
