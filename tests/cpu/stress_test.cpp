// Randomised stress: millions of nested tasks from several external threads, each counted.
// WEFT_STRESS_SCALE (default 1) shrinks the loops, e.g. under ThreadSanitizer.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "test_util.hpp"
#include "weft/cpu/task_group.hpp"

namespace weft::cpu {
namespace {

using test::stress_scale;

// Spawns a random tree below `budget`; every node marks its own slot.
void random_tree(TaskGroup& g, std::vector<std::atomic<std::uint8_t>>& marks,
                 std::atomic<std::int64_t>& next_id, std::int64_t limit, test::SplitMix rng,
                 int depth) {
  const std::int64_t id = next_id.fetch_add(1, std::memory_order_relaxed);
  if (id >= limit) return;
  marks[static_cast<std::size_t>(id)].fetch_add(1, std::memory_order_relaxed);
  const int children = depth > 40 ? 0 : static_cast<int>(rng.below(4));
  if (children == 0) return;
  const bool own_group = rng.below(2) == 0;
  if (own_group) {
    TaskGroup inner(g.state_for_algorithms().executor());
    for (int c = 0; c < children; ++c) {
      inner.spawn([&, seed = rng.next()] {
        random_tree(inner, marks, next_id, limit, test::SplitMix(seed), depth + 1);
      });
    }
    inner.wait();
  } else {
    for (int c = 0; c < children; ++c) {
      g.spawn([&g, &marks, &next_id, limit, seed = rng.next(), depth] {
        random_tree(g, marks, next_id, limit, test::SplitMix(seed), depth + 1);
      });
    }
  }
}

class StressPolicies : public ::testing::TestWithParam<SpawnPolicy> {};

TEST_P(StressPolicies, EveryNestedTaskFromManyThreadsRunsExactlyOnce) {
  const auto total = static_cast<std::int64_t>(2'000'000 * stress_scale()) + 1000;
  constexpr int kSubmitters = 4;
  Executor ex(ExecutorOptions{
      .workers = 2, .spawn_policy = GetParam(), .private_bound = 3, .public_bound = 9});
  std::vector<std::atomic<std::uint8_t>> marks(static_cast<std::size_t>(total));
  std::atomic<std::int64_t> next_id{0};
  std::vector<std::thread> submitters;
  for (int s = 0; s < kSubmitters; ++s) {
    submitters.emplace_back([&, s] {
      test::SplitMix rng(1000 + s);
      while (next_id.load(std::memory_order_relaxed) < total) {
        TaskGroup g(ex);
        for (int k = 0; k < 8; ++k) {
          g.spawn([&g, &marks, &next_id, total, seed = rng.next()] {
            random_tree(g, marks, next_id, total, test::SplitMix(seed), 0);
          });
        }
        g.wait();
      }
    });
  }
  for (auto& t : submitters) t.join();
  for (std::int64_t i = 0; i < total; ++i) {
    ASSERT_EQ(marks[static_cast<std::size_t>(i)].load(), 1) << "task id " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Cpu, StressPolicies,
                         ::testing::Values(SpawnPolicy::bounded_queue, SpawnPolicy::help_first));

TEST(Stress, ShutdownWhileExternalThreadsSubmit) {
  const int rounds = static_cast<int>(200 * stress_scale()) + 5;
  for (int round = 0; round < rounds; ++round) {
    std::atomic<long> accepted{0}, completed{0}, rejected{0}, cancelled{0};
    {
      Executor ex(ExecutorOptions{.workers = 2});
      std::vector<std::thread> submitters;
      for (int s = 0; s < 3; ++s) {
        submitters.emplace_back([&] {
          std::vector<Future<int>> futures;
          for (int i = 0; i < 200; ++i) {
            try {
              futures.push_back(ex.submit([&] {
                completed.fetch_add(1);
                return 1;
              }));
              accepted.fetch_add(1);
            } catch (const ShutDown&) {
              rejected.fetch_add(1);
            }
          }
          for (auto& f : futures) {
            try {
              (void)f.get();
            } catch (const ShutDown&) {
              cancelled.fetch_add(1);
            }
          }
        });
      }
      ex.shutdown(round % 2 == 0 ? ShutdownMode::drain : ShutdownMode::cancel_pending);
      for (auto& t : submitters) t.join();
    }
    // Every submission was accepted or rejected; every accepted task completed or was
    // cancelled, exactly once.
    ASSERT_EQ(accepted.load() + rejected.load(), 600);
    ASSERT_EQ(completed.load() + cancelled.load(), accepted.load());
  }
}

// Two threads outside the pool hand out pairs of tasks through the global queue with short
// random pauses, so that the workers keep passing between spinning and sleep; every 16 pairs
// both rest, their tasks done, long enough for every worker to fall asleep, so the next pair
// must wake one. Every task runs exactly once, and sleepers are woken for the work instead of
// finding it when their sleep times out. A few such finds are allowed (a woken worker that the
// OS leaves unscheduled for a sleep's limit lets another time out and find its task), far
// fewer than the one per rest that a lost wake-up makes.
TEST(Stress, PairsFromOutsideReachIdleWorkersByWakeUps) {
  constexpr int kPairsBetweenRests = 16;
  const int pairs = static_cast<int>(4000 * stress_scale()) + 100;
  Executor ex(ExecutorOptions{.workers = 3, .spin_before_sleep = std::chrono::microseconds(20)});
  std::vector<std::atomic<std::uint8_t>> marks(static_cast<std::size_t>(4 * pairs));
  std::atomic<int> ran[2] = {0, 0};
  std::barrier rest(2);
  {
    TaskGroup g(ex);
    std::vector<std::thread> feeders;
    for (int f = 0; f < 2; ++f) {
      feeders.emplace_back([&, f] {
        test::SplitMix rng(static_cast<std::uint64_t>(f) + 11);
        for (int p = 0; p < pairs; ++p) {
          for (int k = 0; k < 2; ++k) {
            const auto id = static_cast<std::size_t>((f * pairs + p) * 2 + k);
            g.spawn([&marks, &ran, id, f] {
              marks[id].fetch_add(1, std::memory_order_relaxed);
              ran[f].fetch_add(1, std::memory_order_relaxed);
            });
          }
          if (p % kPairsBetweenRests == kPairsBetweenRests - 1) {
            // Both feeders rest at once, their tasks done: the workers fall asleep with nothing
            // queued, and only a wake-up brings them the next pair in time.
            while (ran[f].load(std::memory_order_relaxed) < 2 * (p + 1)) {
              std::this_thread::sleep_for(std::chrono::microseconds(10));
            }
            rest.arrive_and_wait();
            std::this_thread::sleep_for(std::chrono::microseconds(500));
          } else {
            std::this_thread::sleep_for(std::chrono::microseconds(rng.below(10)));
          }
        }
      });
    }
    for (auto& t : feeders) t.join();
    g.wait();
  }
  for (std::size_t id = 0; id < marks.size(); ++id) ASSERT_EQ(marks[id].load(), 1) << id;
  const ExecutorStats stats = ex.stats();
  const auto rests = static_cast<std::uint64_t>(pairs / kPairsBetweenRests);
  EXPECT_GE(stats.sleeps, rests)
      << "the workers did not sleep at the rests: the test did not test the wake-ups";
  EXPECT_LE(stats.found_without_wakeup, std::max<std::uint64_t>(3, rests / 8))
      << "of " << stats.sleeps << " sleeps";
}

// A task's exception is read by the thread that calls get() while the worker that threw may still
// be unwinding: the exception object must be handed over, not shared with a worker that is
// still inside its catch block (ThreadSanitizer sees the hand-over; it cannot see libstdc++'s
// reference count, which is not instrumented). The spin on ready() makes the reader as fast as
// it can be, to catch the worker between publishing and leaving its handler.
TEST(Stress, ExceptionsCrossThreadsAndAreFreedOnce) {
  const int rounds = static_cast<int>(4000 * stress_scale()) + 50;
  Executor ex(ExecutorOptions{.workers = 2});
  std::vector<std::thread> readers;
  std::atomic<int> caught{0};
  for (int r = 0; r < 2; ++r) {
    readers.emplace_back([&, r] {
      for (int i = 0; i < rounds; ++i) {
        auto f = ex.submit([i, r]() -> int {
          std::string what = "task ";  // appended, not concatenated: GCC 12 warns (-Wrestrict)
          what += std::to_string(r);   // on `"a" + std::to_string(..)` chains
          what += '/';
          what += std::to_string(i);
          what.append(64, 'x');
          throw std::runtime_error(what);
        });
        while (!f.ready()) {
        }
        try {
          (void)f.get();
        } catch (const std::runtime_error& e) {
          std::string prefix = "task ";
          prefix += std::to_string(r);
          prefix += '/';
          if (std::string(e.what()).rfind(prefix, 0) == 0) {
            caught.fetch_add(1, std::memory_order_relaxed);
          }
        }
      }
    });
  }
  for (auto& t : readers) t.join();
  EXPECT_EQ(caught.load(), 2 * rounds);
}

}  // namespace
}  // namespace weft::cpu
