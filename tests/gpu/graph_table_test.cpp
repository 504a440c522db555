// The host backend's graph table (src/gpu/graph_table.hpp): the protocol of
// spec/device_graph.pml with std::atomic. The stress test leaves the ordering of the tasks'
// own data (plain reads and writes) to the table alone, so ThreadSanitizer reports any
// release/acquire pair the protocol is missing.
#include "gpu/graph_table.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "gpu/graph_layout.hpp"
#include "weft/error.hpp"

namespace weft::gpu::detail {
namespace {

using Edges = std::vector<GraphEdge>;

// Runs every ready task on this thread: a task listed in `fails` ends failed.
std::vector<HostGraphTable::Completion> run_alone(HostGraphTable& table, const GraphLayout& g,
                                                  const std::vector<std::uint32_t>& fails = {}) {
  table.load(std::make_shared<const GraphLayout>(g));
  for (const std::uint32_t r : g.roots) table.enqueue(r);
  while (auto t = table.take()) {
    TaskStatus status = TaskStatus::cancelled;
    if (table.runnable(*t)) {
      status = TaskStatus::ok;
      for (const std::uint32_t f : fails) status = f == *t ? TaskStatus::device_failed : status;
    }
    table.finish(*t, status);
  }
  std::vector<HostGraphTable::Completion> done;
  while (auto c = table.collect()) done.push_back(*c);
  return done;
}

TaskStatus status_of(const std::vector<HostGraphTable::Completion>& done, std::uint32_t t) {
  for (const auto& c : done) {
    if (c.task == t) return c.status;
  }
  ADD_FAILURE() << "task " << t << " never completed";
  return TaskStatus::ok;
}

const Edges kDiamond{{0, 1}, {0, 2}, {1, 3}, {2, 3}};

TEST(HostGraphTable, ADiamondRunsEachTaskOnceAfterItsInputs) {
  HostGraphTable table(8);
  const auto done = run_alone(table, lay_out_graph(4, kDiamond, 8));
  ASSERT_EQ(done.size(), 4u);
  EXPECT_EQ(done.front().task, 0u);  // the root
  EXPECT_EQ(done.back().task, 3u);   // the join
  for (const auto& c : done) EXPECT_EQ(c.status, TaskStatus::ok);
}

TEST(HostGraphTable, AFailedInputCancelsItsSuccessorsAndTheirsUnrun) {
  HostGraphTable table(8);
  // 0 -> {1, 2} -> 3 -> 4: task 1 fails, so 3 is cancelled, and 4 behind it too; 2 runs.
  Edges edges = kDiamond;
  edges.push_back({3, 4});
  const auto done = run_alone(table, lay_out_graph(5, edges, 8), {1});
  ASSERT_EQ(done.size(), 5u);
  EXPECT_EQ(status_of(done, 0), TaskStatus::ok);
  EXPECT_EQ(status_of(done, 1), TaskStatus::device_failed);
  EXPECT_EQ(status_of(done, 2), TaskStatus::ok);
  EXPECT_EQ(status_of(done, 3), TaskStatus::cancelled);
  EXPECT_EQ(status_of(done, 4), TaskStatus::cancelled);
}

// Every task of the graph once, each ended ok.
void expect_all_ok(const std::vector<HostGraphTable::Completion>& done, std::size_t n) {
  std::vector<int> seen(n, 0);
  for (const auto& c : done) {
    ASSERT_LT(c.task, n);
    ++seen[c.task];
    EXPECT_EQ(c.status, TaskStatus::ok) << c.task;
  }
  EXPECT_EQ(seen, std::vector<int>(n, 1));
}

TEST(HostGraphTable, TheTableIsReusedGraphAfterGraph) {
  HostGraphTable table(5);  // 8 cells: graphs of 4 and 5 tasks wrap the queue and the ring
  for (int round = 0; round < 10; ++round) {
    SCOPED_TRACE(round);
    expect_all_ok(run_alone(table, lay_out_graph(4, kDiamond, 5)), 4);
    expect_all_ok(run_alone(table, lay_out_graph(5, Edges{}, 5)), 5);
  }
}

TEST(HostGraphTable, ATableOfOneTaskRunsGraphAfterGraph) {
  HostGraphTable table(1);
  for (int round = 0; round < 5; ++round)
    expect_all_ok(run_alone(table, lay_out_graph(1, {}, 1)), 1);
}

TEST(HostGraphTable, MisuseIsRefused) {
  EXPECT_THROW(HostGraphTable(0), InvalidArgument);
  HostGraphTable table(2);
  EXPECT_THROW(table.load(std::make_shared<const GraphLayout>(lay_out_graph(3, Edges{}, 3))),
               std::logic_error);
}

TEST(HostGraphTable, NothingIsCollectedBeforeItIsFinished) {
  HostGraphTable table(4);
  table.load(std::make_shared<const GraphLayout>(lay_out_graph(2, Edges{{0, 1}}, 4)));
  table.enqueue(0);
  EXPECT_FALSE(table.collect().has_value());
  const auto t = table.take();
  ASSERT_TRUE(t.has_value());
  EXPECT_FALSE(table.take().has_value());  // 1 waits for 0
  table.finish(*t, TaskStatus::ok);
  EXPECT_EQ(table.collect()->task, 0u);
  EXPECT_EQ(table.take(), std::optional<std::uint32_t>(1));
}

// Random acyclic graphs (edges from lower to higher index) run by four threads standing in for
// blocks, the test's thread collecting as a lane does; a run fails now and then.
TEST(HostGraphTable, StressRandomGraphsOnFourBlocksRunAndDeliverEveryTaskOnce) {
  constexpr std::size_t kCapacity = 64;
  constexpr int kRounds = 300;
  HostGraphTable table(kCapacity);
  // The tasks' own data: plain memory, ordered only by the table.
  std::vector<int> outcome(kCapacity);  // 0 unset, 1 ok, 2 failed, 3 cancelled
  std::vector<std::vector<std::uint32_t>> inputs_of(kCapacity);
  std::vector<int> fails(kCapacity);
  std::vector<std::atomic<int>> taken(kCapacity);
  std::atomic<bool> stop{false};
  std::atomic<int> wrong{0};
  auto block = [&] {
    while (!stop.load(std::memory_order_acquire)) {
      const auto t = table.take();
      if (!t) {
        std::this_thread::yield();
        continue;
      }
      if (taken[*t].fetch_add(1) != 0) wrong.fetch_add(1);  // taken twice in one graph
      bool inputs_ok = true;
      for (const std::uint32_t p : inputs_of[*t]) {
        if (outcome[p] == 0) wrong.fetch_add(1);  // an input not final
        inputs_ok = inputs_ok && outcome[p] == 1;
      }
      if (table.runnable(*t) != inputs_ok) wrong.fetch_add(1);
      const TaskStatus status = !inputs_ok       ? TaskStatus::cancelled
                                : fails[*t] != 0 ? TaskStatus::device_failed
                                                 : TaskStatus::ok;
      outcome[*t] = status == TaskStatus::ok ? 1 : status == TaskStatus::cancelled ? 3 : 2;
      table.finish(*t, status);
    }
  };
  std::vector<std::thread> blocks;
  for (int b = 0; b < 4; ++b) blocks.emplace_back(block);
  // The blocks are stopped and joined however the test leaves (an ASSERT returns early).
  struct Joiner {
    std::atomic<bool>& stop;
    std::vector<std::thread>& threads;
    ~Joiner() {
      stop.store(true, std::memory_order_release);
      for (auto& t : threads) {
        if (t.joinable()) t.join();
      }
    }
  } joiner{stop, blocks};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  std::mt19937 rng(2026);
  for (int round = 0; round < kRounds; ++round) {
    const std::size_t n = 1 + rng() % kCapacity;
    Edges edges;
    for (std::uint32_t to = 1; to < n; ++to) {
      for (int k = static_cast<int>(rng() % 4); k > 0; --k) {
        edges.push_back({static_cast<std::uint32_t>(rng() % to), to});
      }
    }
    // Half the rounds with urgent tasks: both ready queues, each reused graph after graph.
    std::vector<int> priorities;
    if (round % 2 == 1) {
      for (std::size_t t = 0; t < n; ++t) priorities.push_back(rng() % 3 == 0 ? 1 : 0);
    }
    const GraphLayout g = lay_out_graph(n, edges, kCapacity, priorities);
    for (std::size_t t = 0; t < n; ++t) {  // every completion of the last round was collected
      outcome[t] = 0;
      taken[t].store(0);
      inputs_of[t].clear();
      fails[t] = rng() % 16 == 0 ? 1 : 0;
    }
    for (const GraphEdge& e : edges) inputs_of[e.to].push_back(e.from);
    table.load(std::make_shared<const GraphLayout>(g));
    for (const std::uint32_t r : g.roots) table.enqueue(r);
    std::vector<int> seen(n, 0);
    for (std::size_t got = 0; got < n;) {
      const auto c = table.collect();
      if (!c) {
        ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "a task was lost, round " << round;
        std::this_thread::yield();
        continue;
      }
      ASSERT_LT(c->task, n);
      ++seen[c->task];
      const int expected = c->status == TaskStatus::ok          ? 1
                           : c->status == TaskStatus::cancelled ? 3
                                                                : 2;
      EXPECT_EQ(outcome[c->task], expected) << "round " << round << " task " << c->task;
      ++got;
    }
    for (std::size_t t = 0; t < n; ++t) ASSERT_EQ(seen[t], 1) << "round " << round << " task " << t;
  }
  stop.store(true, std::memory_order_release);
  for (auto& b : blocks) b.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_FALSE(table.collect().has_value());  // no completion beyond each task's one
  EXPECT_FALSE(table.take().has_value());
}

}  // namespace
}  // namespace weft::gpu::detail
