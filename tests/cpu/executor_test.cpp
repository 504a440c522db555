#include "weft/cpu/executor.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <functional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "weft/cpu/task_group.hpp"
#include "weft/cpu/topology.hpp"

#include <sched.h>

namespace weft::cpu {
namespace {

// One worker per hardware thread of the caller's affinity mask (all of them when unrestricted).
TEST(Executor, DefaultsToTheAllowedHardwareThreads) {
  Executor ex;
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  EXPECT_EQ(ex.num_workers(), static_cast<std::size_t>(CPU_COUNT(&set)));
}

TEST(Executor, RejectsBadOptions) {
  ExecutorOptions o;
  o.private_bound = 0;
  EXPECT_THROW(Executor{o}, InvalidArgument);
  o = {};
  o.public_bound = 5000;  // bound above the deque's capacity
  EXPECT_THROW(Executor{o}, InvalidArgument);
  o = {};
  o.deque_capacity = 1;
  EXPECT_THROW(Executor{o}, InvalidArgument);
  o = {};
  o.workers = 100000;
  EXPECT_THROW(Executor{o}, InvalidArgument);
  o = {};
  o.spin_before_sleep = std::chrono::microseconds(-1);
  EXPECT_THROW(Executor{o}, InvalidArgument);
}

TEST(Executor, SubmitRunsOnAWorkerAndReturnsTheValue) {
  Executor ex(ExecutorOptions{.workers = 2});
  auto f = ex.submit([&] { return ex.this_worker_index(); });
  const int idx = f.get();
  EXPECT_GE(idx, 0);
  EXPECT_LT(idx, 2);
  EXPECT_EQ(ex.this_worker_index(), -1);
}

TEST(Executor, SubmitRejectsNullCallables) {
  Executor ex(ExecutorOptions{.workers = 1});
  std::function<void()> empty;
  EXPECT_THROW(ex.submit(empty), InvalidArgument);
  void (*null_fn)() = nullptr;
  EXPECT_THROW(ex.submit(null_fn), InvalidArgument);
}

TEST(Executor, SubmitAfterShutdownThrows) {
  Executor ex(ExecutorOptions{.workers = 2});
  ex.shutdown();
  EXPECT_TRUE(ex.is_shutting_down());
  EXPECT_THROW(ex.submit([] {}), ShutDown);
  ex.shutdown();  // idempotent
}

TEST(Executor, DrainShutdownRunsEverythingSubmitted) {
  std::atomic<int> ran{0};
  {
    Executor ex(ExecutorOptions{.workers = 2});
    for (int i = 0; i < 10000; ++i) {
      ex.submit([&] { ran.fetch_add(1, std::memory_order_relaxed); });
    }
  }  // destructor drains
  EXPECT_EQ(ran.load(), 10000);
}

TEST(Executor, DrainIncludesTasksSpawnedDuringShutdown) {
  std::atomic<int> ran{0};
  Executor ex(ExecutorOptions{.workers = 2});
  ex.submit([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    TaskGroup g(ex);
    for (int i = 0; i < 100; ++i) g.spawn([&] { ran.fetch_add(1); });
    g.wait();
    ex.submit([&] { ran.fetch_add(1000); });  // a worker may still submit while draining
  });
  ex.shutdown(ShutdownMode::drain);
  EXPECT_EQ(ran.load(), 1100);
}

TEST(Executor, CancelPendingShutdownFailsFuturesExactlyOnce) {
  Executor ex(ExecutorOptions{.workers = 1});
  std::atomic<bool> release{false};
  std::atomic<bool> started{false};
  auto blocker = ex.submit([&] {
    started.store(true);
    while (!release.load()) std::this_thread::yield();
    return 1;
  });
  while (!started.load()) std::this_thread::yield();
  std::vector<Future<int>> pending;
  for (int i = 0; i < 100; ++i) pending.push_back(ex.submit([] { return 2; }));
  std::thread stopper([&] { ex.shutdown(ShutdownMode::cancel_pending); });
  while (!ex.is_shutting_down()) std::this_thread::yield();
  release.store(true);
  stopper.join();
  EXPECT_EQ(blocker.get(), 1);  // it was running: it finishes
  int cancelled = 0;
  for (auto& f : pending) {
    try {
      (void)f.get();
    } catch (const ShutDown&) {
      ++cancelled;
    }
  }
  EXPECT_EQ(cancelled, 100);
}

TEST(Executor, ShutdownFromOwnWorkerIsRejected) {
  Executor ex(ExecutorOptions{.workers = 2});
  auto f = ex.submit([&] {
    try {
      ex.shutdown();
    } catch (const InvalidState&) {
      return true;
    }
    return false;
  });
  EXPECT_TRUE(f.get());
}

TEST(Executor, IdleWorkersSleepAndWakeForNewWork) {
  Executor ex(ExecutorOptions{.workers = 2, .spin_before_sleep = std::chrono::microseconds(10)});
  // Both workers go to sleep with nothing to do: soon, but on a loaded machine a worker may
  // not be scheduled for a while, so wait for it (bounded) rather than a fixed time.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (ex.stats().sleeps < 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_GE(ex.stats().sleeps, 2u);
  for (int round = 0; round < 50; ++round) {
    auto f = ex.submit([] { return 7; });
    EXPECT_EQ(f.get(), 7);  // a sleeping worker was woken (or this would hang)
  }
}

// spin_before_sleep is time, not a count of rounds: idle workers keep looking for that long
// (no sleep, so the next task pays no wake-up), then sleep.
TEST(Executor, IdleWorkersSpinForSpinBeforeSleepThenSleep) {
  Executor ex(ExecutorOptions{.workers = 2, .spin_before_sleep = std::chrono::seconds(1)});
  // Taken before the task ends (the workers' second of spinning starts after it), so that a
  // late wake-up of this thread cannot shorten the time measured below.
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(ex.submit([] { return 3; }).get(), 3);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(ex.stats().sleeps, 0u) << "asleep long before its second of spinning ended";
  while (ex.stats().sleeps < 2 &&
         std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_GE(ex.stats().sleeps, 2u) << "both workers sleep once the second has passed";
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(900));
  EXPECT_EQ(ex.submit([] { return 4; }).get(), 4);  // and wake for new work
}

TEST(Executor, StealingSpreadsWorkOverWorkers) {
  Executor ex(ExecutorOptions{.workers = 2});
  std::mutex m;
  std::set<int> seen;
  TaskGroup outer(ex);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  auto both_seen = [&] {
    std::lock_guard<std::mutex> lock(m);
    return seen.size() == 2;
  };
  auto root = ex.submit([&] {
    TaskGroup g(ex);
    for (int i = 0; i < 64; ++i) {
      g.spawn([&] {
        {
          std::lock_guard<std::mutex> lock(m);
          seen.insert(ex.this_worker_index());
        }
        // Each task holds its worker until the other worker has run one too, which it can only
        // get by stealing (bounded, so that an executor that never steals fails, not hangs).
        while (!both_seen() && std::chrono::steady_clock::now() < deadline) {
          std::this_thread::sleep_for(std::chrono::microseconds(100));
        }
      });
    }
    g.wait();
  });
  root.get();
  EXPECT_EQ(seen.size(), 2u);
  EXPECT_GT(ex.stats().steals, 0u);
}

}  // namespace
}  // namespace weft::cpu

namespace weft::cpu {
namespace {

// The affinity mask of the worker that runs the task: how many CPUs, and the first one.
std::pair<int, int> worker_affinity(Executor& ex) {
  return ex
      .submit([] {
        cpu_set_t set;
        CPU_ZERO(&set);
        sched_getaffinity(0, sizeof set, &set);
        int first = -1;
        for (int c = 0; c < CPU_SETSIZE && first < 0; ++c) {
          if (CPU_ISSET(c, &set)) first = c;
        }
        return std::pair<int, int>{CPU_COUNT(&set), first};
      })
      .get();
}

// The last-level cache as hwloc sums it, against what Linux says of cpu0's own caches in sysfs
// (read here independently): the deepest data or unified level, at least one such cache's
// size and at most one per hardware thread.
TEST(Topology, LastLevelCacheMatchesSysfs) {
  const CpuTopology topo = describe_cpu_topology();
  if (!topo.from_hwloc) GTEST_SKIP() << "weft was built without hwloc";
  int deepest = 0;
  std::size_t size = 0;
  for (int index = 0; index < 16; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index);
    std::ifstream level_in(dir + "/level"), type_in(dir + "/type"), size_in(dir + "/size");
    int level = 0;
    std::string type, text;
    if (!(level_in >> level) || !(type_in >> type) || !(size_in >> text)) continue;
    if (type == "Instruction" || level < deepest) continue;
    std::size_t bytes = std::stoull(text);
    if (text.back() == 'K') bytes <<= 10;
    if (text.back() == 'M') bytes <<= 20;
    deepest = level;
    size = bytes;
  }
  if (size == 0) GTEST_SKIP() << "sysfs shows no caches for cpu0 (a VM that hides them)";
  EXPECT_GE(topo.last_level_cache_bytes, size);
  EXPECT_LE(topo.last_level_cache_bytes, size * std::max<std::size_t>(topo.processing_units, 1));
  EXPECT_EQ(topo.last_level_cache_bytes % size, 0u) << "caches of one level differ in size?";
}

TEST(Executor, PinnedWorkersRunOnOneProcessingUnitEach) {
  const CpuTopology topo = describe_cpu_topology();
  if (!topo.from_hwloc) GTEST_SKIP() << "weft was built without hwloc: pinning is unavailable";
  Executor ex(ExecutorOptions{.workers = 2, .pinning = Pinning::always});
  ASSERT_EQ(ex.pinned_units().size(), 2u);
  for (int round = 0; round < 20; ++round) EXPECT_EQ(worker_affinity(ex).first, 1);
}

// automatic: one worker per allowed unit gets them bound, each to its own unit; fewer or more
// workers, or a second such executor while the first lives, stay unbound.
TEST(Executor, AutomaticPinningOnlyWithOneWorkerPerAllowedUnit) {
  const std::vector<std::size_t> units = allowed_processing_units();
  if (units.empty()) GTEST_SKIP() << "no hwloc, or the affinity mask is unreadable";
  {
    Executor ex(ExecutorOptions{.workers = units.size()});
    EXPECT_EQ(ex.pinned_units(), units);
    {
      Executor second(ExecutorOptions{.workers = units.size()});
      EXPECT_TRUE(second.pinned_units().empty()) << "two executors bound to the same units";
      Executor forced(ExecutorOptions{.workers = 1, .pinning = Pinning::always});
      EXPECT_EQ(forced.pinned_units().size(), 1u);  // always: the user's choice
    }
    for (int round = 0; round < 10; ++round) EXPECT_EQ(worker_affinity(ex).first, 1);
  }
  Executor more(ExecutorOptions{.workers = units.size() + 1});
  EXPECT_TRUE(more.pinned_units().empty());
  more.shutdown();
  Executor again(ExecutorOptions{.workers = units.size()});  // the first one's claim was freed
  EXPECT_EQ(again.pinned_units().size(), units.size());
  Executor none(ExecutorOptions{.workers = units.size(), .pinning = Pinning::none});
  EXPECT_TRUE(none.pinned_units().empty());
  EXPECT_EQ(worker_affinity(none).first, static_cast<int>(units.size()));  // the whole mask
}

// The units come from the constructing thread's affinity mask (taskset, an MPI launcher's
// binding), and so does the default worker count: an executor made on a thread restricted to
// one CPU has one worker, bound there.
TEST(Executor, AutomaticPinningFollowsTheCallersAffinityMask) {
  const std::vector<std::size_t> units = allowed_processing_units();
  if (units.size() < 2) GTEST_SKIP() << "needs hwloc and two allowed processing units";
  cpu_set_t all;
  CPU_ZERO(&all);
  ASSERT_EQ(sched_getaffinity(0, sizeof all, &all), 0);
  int last = -1;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &all)) last = c;
  }
  std::pair<int, int> seen{0, -1};
  std::size_t bound = 0, allowed = 0, workers = 0, allowed_threads = 0;
  std::thread([&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(last, &one);
    ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
    allowed = allowed_processing_units().size();
    allowed_threads = allowed_hardware_threads();
    Executor ex;  // default worker count
    workers = ex.num_workers();
    bound = ex.pinned_units().size();
    seen = worker_affinity(ex);
  }).join();
  EXPECT_EQ(allowed, 1u);
  EXPECT_EQ(allowed_threads, 1u);
  EXPECT_EQ(workers, 1u);
  EXPECT_EQ(bound, 1u);
  EXPECT_EQ(seen, (std::pair<int, int>{1, last}));
}

}  // namespace
}  // namespace weft::cpu

namespace weft::cpu {
namespace {

TEST(Executor, RunExecutesOnAWorkerAndReturnsItsResult) {
  Executor ex(ExecutorOptions{.workers = 2});
  EXPECT_EQ(ex.run([&] { return ex.this_worker_index() >= 0 ? 5 : -1; }), 5);
  EXPECT_THROW(ex.run([]() -> int { throw std::logic_error("x"); }), std::logic_error);
  // Nested: on a worker it is a plain call (no deadlock with one worker).
  Executor one(ExecutorOptions{.workers = 1});
  EXPECT_EQ(one.run([&] { return one.run([] { return 3; }); }), 3);
}

}  // namespace
}  // namespace weft::cpu
