#include "weft/cpu/team.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace weft::cpu {
namespace {

TEST(Team, PipelineVisitsBlocksInRankOrder) {
  Executor ex3(ExecutorOptions{.workers = 3});
  const std::size_t size = 3;
  constexpr int kBlocks = 200;
  // Each block must be touched by rank 0, then 1, then 2: the critical-region pipeline.
  std::vector<std::vector<int>> visits(kBlocks);
  run_team(ex3, size, [&](Team& t) {
    for (int b = 0; b < kBlocks; ++b) {
      t.wait_prev();
      visits[static_cast<std::size_t>(b)].push_back(static_cast<int>(t.rank()));
      t.signal_next();
    }
  });
  for (int b = 0; b < kBlocks; ++b) {
    ASSERT_EQ(visits[static_cast<std::size_t>(b)], (std::vector<int>{0, 1, 2})) << b;
  }
}

TEST(Team, AWorkerCallerIsRankZero) {
  Executor ex(ExecutorOptions{.workers = 2});
  auto f = ex.submit([&] {
    const int me = ex.this_worker_index();
    int rank0_worker = -1;
    run_team(ex, 2, [&](Team& t) {
      if (t.rank() == 0) rank0_worker = ex.this_worker_index();
    });
    return me == rank0_worker;
  });
  EXPECT_TRUE(f.get());
}

TEST(Team, IterationSignalsOrderAWavefront) {
  // v[k][i] = v[k][i-1] + v[k-1][i]: iteration i of sweep k needs i-1 of the same sweep.
  Executor ex(ExecutorOptions{.workers = 2});
  constexpr std::int64_t kN = 1000;
  constexpr int kSweeps = 20;
  std::vector<long> v(kN, 1), expected(kN, 1);
  for (int k = 0; k < kSweeps; ++k) {
    for (std::int64_t i = 1; i < kN; ++i) expected[i] += expected[i - 1];
  }
  // In place, as an LU wavefront updates its rows: tag 0 orders i-1 before i (read after write),
  // tag 1 holds i back until i+1 of the previous sweep has read v[i] (write after read).
  run_team(ex, 2, 0, kN, [&](Team& t) {
    for (int k = 0; k < kSweeps; ++k) {
      for (std::int64_t i = t.my_begin(); i < t.my_end(); ++i) {
        t.iter_wait(i - 1, 0);
        if (k > 0) t.iter_wait(i + 1, 1);
        if (i > 0) v[static_cast<std::size_t>(i)] += v[static_cast<std::size_t>(i - 1)];
        t.iter_post(i + 1, 0);
        t.iter_post(i - 1, 1);
      }
    }
  });
  EXPECT_EQ(v, expected);
}

TEST(Team, OwnerOfFollowsTheStaticPartition) {
  Executor ex(ExecutorOptions{.workers = 3});
  std::atomic<int> checked{0};
  run_team(ex, 3, 0, 10, [&](Team& t) {
    for (std::int64_t i = t.my_begin(); i < t.my_end(); ++i) {
      EXPECT_EQ(t.owner_of(i), t.rank());
    }
    t.barrier();
    checked.fetch_add(1);
  });
  EXPECT_EQ(checked.load(), 3);
}

// Phases separated by barriers, where now and then one participant arrives 2 ms late so the
// others fall asleep in the barrier, and a pipeline where the sender is late so the receiver
// sleeps. Every phase must see all writes of the one before; and a sleeper must be woken by
// the arrival, not by its 50 ms limit (a wake-up that never came): with 2 ms delays, more than
// a few timeouts mean lost wake-ups, not a slow machine.
TEST(Team, BarrierAndSignalsWakeSleepersOnTime) {
  Executor ex(ExecutorOptions{.workers = 3});
  constexpr int kPhases = 120;
  constexpr int kLateEvery = 6;  // 20 late phases
  std::vector<std::atomic<int>> done(3);
  const std::uint64_t timeouts_before = Team::sleep_timeouts();
  run_team(ex, 3, [&](Team& t) {
    const std::size_t me = t.rank();
    for (int phase = 1; phase <= kPhases; ++phase) {
      if (phase % kLateEvery == 0 && static_cast<std::size_t>(phase / kLateEvery) % 3 == me) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      done[me].store(phase, std::memory_order_relaxed);
      t.barrier();
      for (const auto& d : done) ASSERT_GE(d.load(std::memory_order_relaxed), phase);
      t.barrier();  // nobody starts the next phase's write before all have checked
    }
    for (int block = 0; block < 20; ++block) {
      t.wait_prev();
      if (me == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      t.signal_next();
    }
  });
  EXPECT_LT(Team::sleep_timeouts() - timeouts_before, 8u)
      << "sleepers waited out their limit: wake-ups were lost";
}

TEST(Team, RejectsSizesThatCannotRunAtOnce) {
  Executor ex(ExecutorOptions{.workers = 2});
  EXPECT_THROW(run_team(ex, 0, [](Team&) {}), InvalidArgument);
  EXPECT_THROW(run_team(ex, 3, [](Team&) {}), InvalidArgument);
  run_team(ex, 2, [&](Team& t) {
    EXPECT_THROW(t.signal_to(2), InvalidArgument);
    EXPECT_THROW(t.signal_to(0, kTeamTags), InvalidArgument);
  });
}

}  // namespace
}  // namespace weft::cpu
