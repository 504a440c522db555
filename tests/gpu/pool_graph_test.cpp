// Task graphs on the pool (Pool::push_graph) on the host backend: the blocks resolve the
// dependencies themselves through the graph table; every task is delivered exactly once to
// its output queue, only after its inputs ended ok, and cancelled unrun when one did not.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "../cpu/test_util.hpp"
#include "gpu/graph_table.hpp"
#include "weft/gpu/detail/pool_core.hpp"
#include "weft/gpu/pool.hpp"

namespace weft::gpu {
namespace {

using weft::test::stress_scale;

// Stamps its end: `order` is the value of a shared clock when the task ran, and `sum` adds
// the stamps its body read from its inputs' slots in `stamps` (a plain array: its inputs'
// writes must be visible to it through the graph table's ordering, which ThreadSanitizer
// checks).
struct Step {
  static constexpr std::uint32_t kId = 1;
  struct Payload {
    std::atomic<std::uint64_t>* clock;
    std::uint64_t* stamps;     // stamps[task]: written by the task, read by its successors
    const std::uint32_t* ins;  // its inputs' indices
    std::uint32_t task;
    std::uint32_t ins_count;
    std::uint64_t order;
    std::uint64_t inputs_seen;  // how many inputs had stamped before this task ran
  };
  static void run(Payload& p, const BlockContext&) {
    std::uint64_t seen = 0;
    for (std::uint32_t i = 0; i < p.ins_count; ++i) seen += p.stamps[p.ins[i]] != 0;
    p.inputs_seen = seen;
    // relaxed: a counter that only orders the stamps; the visibility checked is the stamps'.
    p.order = p.clock->fetch_add(1, std::memory_order_relaxed) + 1;
    p.stamps[p.task] = p.order;
  }
};
// Fails (throws: the host backend reports it as device_failed).
struct Fail {
  static constexpr std::uint32_t kId = 2;
  struct Payload {
    std::uint64_t unused;
  };
  static void run(Payload&, const BlockContext&) { throw std::runtime_error("task failed"); }
};
// Holds its block until released; says when it started.
std::atomic<bool> g_gate_open{true};
std::atomic<bool> g_gate_started{false};
void wait_for_the_gate() {
  while (!g_gate_started.load()) std::this_thread::yield();
}
struct Gate {
  static constexpr std::uint32_t kId = 3;
  struct Payload {
    std::uint64_t unused;
  };
  static void run(Payload&, const BlockContext&) {
    g_gate_started = true;
    while (!g_gate_open.load()) std::this_thread::yield();
  }
};

// Sleeps, then takes the next value of a shared clock as its stamp.
struct Nap {
  static constexpr std::uint32_t kId = 4;
  struct Payload {
    std::atomic<std::uint64_t>* clock;
    std::uint64_t* stamp;
    std::uint32_t sleep_us;
    const std::atomic<bool>* hold = nullptr;  // if set, first waits (up to 10 s) until it is
  };
  static void run(Payload& p, const BlockContext&) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (p.hold != nullptr && !p.hold->load() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
    std::this_thread::sleep_for(std::chrono::microseconds(p.sleep_us));
    *p.stamp = p.clock->fetch_add(1, std::memory_order_relaxed) + 1;  // relaxed: a counter
  }
};

// Waits (up to 2 s) until `expected` tasks of its kind have started, then says which block ran
// it: tasks that all run at once are on as many blocks.
std::atomic<int> g_met{0};
struct Meet {
  static constexpr std::uint32_t kId = 5;
  struct Payload {
    int expected;
    int block;
  };
  static void run(Payload& p, const BlockContext& b) {
    g_met.fetch_add(1);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (g_met.load() < p.expected && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
    p.block = b.block();
  }
};

using Types = TaskTypes<Step, Fail, Gate, Nap, Meet>;
using GraphPool = Pool<Types, 64>;
using Record = GraphPool::Record;

// A graph of Step tasks over its own clock and stamps, with each task's inputs listed.
struct StepGraph {
  std::size_t tasks;
  std::vector<Edge> edges;
  std::atomic<std::uint64_t> clock{0};
  std::vector<std::uint64_t> stamps;
  std::vector<std::vector<std::uint32_t>> ins;
  std::vector<Record> records;

  StepGraph(std::size_t n, std::vector<Edge> e, std::uint64_t tag_base = 0)
      : tasks(n), edges(std::move(e)), stamps(n, 0), ins(n) {
    for (const Edge& edge : edges) ins[edge.to].push_back(edge.from);
    for (std::uint32_t t = 0; t < n; ++t) {
      records.push_back(Record::make<Step>({&clock, stamps.data(), ins[t].data(), t,
                                            static_cast<std::uint32_t>(ins[t].size()), 0, 0},
                                           tag_base + t));
    }
  }
  // Checks a delivered record of this graph: ran once, after each of its inputs.
  void check(const Record& r, std::uint64_t tag_base = 0) const {
    ASSERT_EQ(r.status, TaskStatus::ok) << to_string(r.status);
    const auto p = r.as<Step>();
    const std::uint32_t t = static_cast<std::uint32_t>(r.tag - tag_base);
    EXPECT_EQ(p.task, t);
    EXPECT_EQ(p.inputs_seen, ins[t].size()) << "task " << t << " ran before an input";
    for (const std::uint32_t i : ins[t]) {
      EXPECT_LT(stamps[i], p.order) << "task " << t << " ran before its input " << i;
    }
  }
};

// Takes `n` records from queue `out`; a task that never comes fails the test (after a minute)
// instead of hanging it.
template <class AnyPool>
std::vector<Record> pop_n(AnyPool& pool, std::size_t n, std::size_t out = 0) {
  std::vector<Record> got;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  Record r;
  while (got.size() < n) {
    if (pool.try_pop(r, out)) {
      got.push_back(r);
    } else if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "only " << got.size() << " of " << n << " tasks came back";
      break;
    } else {
      std::this_thread::yield();
    }
  }
  return got;
}

// A random acyclic graph of 1..max_tasks Step tasks, tagged from tag_base.
std::unique_ptr<StepGraph> random_graph(std::mt19937& rng, std::uint32_t max_tasks,
                                        std::uint64_t tag_base) {
  const std::uint32_t n = 1 + rng() % max_tasks;
  std::vector<Edge> edges;
  for (std::uint32_t to = 1; to < n; ++to) {
    for (int e = 0; e < 3; ++e) {
      if (rng() % 2 == 0) edges.push_back({static_cast<std::uint32_t>(rng() % to), to});
    }
  }
  return std::make_unique<StepGraph>(n, edges, tag_base);
}

std::string refusal(GraphPool& pool, std::span<const Record> tasks, std::span<const Edge> edges,
                    std::size_t out = 0) {
  try {
    pool.push_graph(tasks, edges, out);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "accepted";
}

TEST(PoolGraph, ADiamondDeliversEveryTaskOnceAfterItsInputs) {
  GraphPool pool(PoolOptions{.host_blocks = 4});
  StepGraph g(4, {{0, 1}, {0, 2}, {1, 3}, {2, 3}});
  pool.push_graph(g.records, g.edges);
  const auto got = pop_n(pool, 4);
  std::set<std::uint64_t> tags;
  for (const Record& r : got) {
    g.check(r);
    tags.insert(r.tag);
  }
  EXPECT_EQ(tags, (std::set<std::uint64_t>{0, 1, 2, 3}));
  EXPECT_EQ(pool.unfinished(0), 0u);
  EXPECT_EQ(pool.stats().pushed, 4u);
}

TEST(PoolGraph, AChainRunsInOrderOnManyBlocks) {
  GraphPool pool(PoolOptions{.host_blocks = 8});
  std::vector<Edge> edges;
  for (std::uint32_t t = 0; t + 1 < 64; ++t) edges.push_back({t, t + 1});
  StepGraph g(64, edges);
  pool.push_graph(g.records, g.edges);
  for (const Record& r : pop_n(pool, 64)) g.check(r);
  for (std::uint32_t t = 0; t < 64; ++t) EXPECT_EQ(g.stamps[t], t + 1);
}

// A block takes every ready urgent task (priority above 0) before the others: one block, a
// root and eight successors made ready at once, two of them urgent.
TEST(PoolGraph, UrgentTasksRunBeforeTheOthersMadeReadyWithThem) {
  GraphPool pool(PoolOptions{.host_blocks = 1});
  std::vector<Edge> edges;
  for (std::uint32_t t = 1; t <= 8; ++t) edges.push_back({0, t});
  StepGraph g(9, edges);
  const std::vector<int> priorities{0, 0, 0, 0, 0, 0, 1, 0, 5};
  pool.push_graph(g.records, g.edges, 0, priorities);
  for (const Record& r : pop_n(pool, 9)) g.check(r);
  for (std::uint32_t t = 1; t <= 5; ++t) {
    EXPECT_LT(g.stamps[6], g.stamps[t]) << "urgent task 6 ran after task " << t;
    EXPECT_LT(g.stamps[8], g.stamps[t]) << "urgent task 8 ran after task " << t;
  }
  EXPECT_LT(g.stamps[6], g.stamps[8]) << "FIFO within the urgent level";
  EXPECT_LT(g.stamps[8], g.stamps[7]);
}

// A block runs one ready graph task at a time and looks at its ring in between, so a pushed
// task waits for at most the graph task in hand, not for the whole graph: one block, a root
// that holds it while a task is pushed, then 64 successors of 2 ms each, ready at once.
TEST(PoolGraph, APushedTaskWaitsForAtMostTheGraphTaskInHand) {
  // Sets `loaded` at the first round that writes a task into a slot once armed: the pushed
  // task, which the lane loads once the root's slot is collected. The graph tasks hold until
  // then, so that a lane the machine did not schedule for a few milliseconds cannot let
  // several of them run before the push reached the block.
  struct FirstLoad final : SchedulerObserver {
    std::atomic<bool> armed{false}, loaded{false};
    void on_round(const LaneRound& r) noexcept override {
      if (armed.load() && r.loaded > 0) loaded = true;
    }
  };
  FirstLoad first_load;
  GraphPool pool(PoolOptions{.host_blocks = 1, .observer = &first_load});
  std::atomic<std::uint64_t> clock{0};
  std::vector<std::uint64_t> stamps(66, 0);  // [65]: the pushed task's
  std::vector<Record> tasks{Record::make<Gate>({}, 0)};
  std::vector<Edge> edges;
  for (std::uint32_t t = 1; t <= 64; ++t) {
    tasks.push_back(Record::make<Nap>({&clock, &stamps[t], 2000, &first_load.loaded}, t));
    edges.push_back({0, t});
  }
  g_gate_open = false;
  g_gate_started = false;
  pool.push_graph(tasks, edges);
  wait_for_the_gate();
  first_load.armed = true;
  pool.push<Nap>({&clock, &stamps[65], 0}, 0, 65);
  g_gate_open = true;
  ASSERT_EQ(pop_n(pool, 66).size(), 66u);
  EXPECT_TRUE(first_load.loaded.load()) << "the lane never loaded the pushed task";
  EXPECT_LE(stamps[65], 3u) << "the pushed task ran after " << stamps[65] - 1
                            << " graph tasks, not after the one in hand";
  for (std::uint32_t t = 1; t <= 64; ++t) EXPECT_NE(stamps[t], 0u) << "task " << t;
}

TEST(PoolGraph, PrioritiesNotOnePerTaskAreRefused) {
  GraphPool pool(PoolOptions{.host_blocks = 1});
  StepGraph g(2, {{0, 1}});
  const std::vector<int> one{1};
  EXPECT_THROW(pool.push_graph(g.records, g.edges, 0, one), InvalidArgument);
  EXPECT_EQ(pool.unfinished(0), 0u);
}

TEST(PoolGraph, TasksWithoutEdgesAllRunAndGoToTheirQueue) {
  GraphPool pool(PoolOptions{.host_blocks = 3, .output_queues = 2});
  StepGraph g(50, {});
  pool.push_graph(g.records, g.edges, /*out=*/1);
  EXPECT_EQ(pool.unfinished(1), 50u);
  for (const Record& r : pop_n(pool, 50, 1)) g.check(r);
  EXPECT_EQ(pool.unfinished(0), 0u);
  Record none;
  EXPECT_FALSE(pool.try_pop(none, 0));
}

// A graph with more roots than the first lane's blocks (units) reach: the roots do not wait
// for that lane's rings (one slot a block here, two blocks), they start on the blocks of both
// lanes at once; and the pool's fan-out task behind this is never delivered nor counted.
TEST(PoolGraph, AWideGraphsRootsStartOnTheBlocksOfEveryLane) {
  GraphPool pool(PoolOptions{.host_blocks = 4, .scheduler_lanes = 2});
  for (int round = 0; round < 5; ++round) {
    g_met = 0;
    std::vector<Record> roots(4, Record::make<Meet>({4, -1}));
    pool.push_graph(roots, std::vector<Edge>{});
    EXPECT_EQ(pool.unfinished(0), 4u);
    std::set<int> blocks;
    for (const Record& r : pop_n(pool, 4)) {
      ASSERT_EQ(r.status, TaskStatus::ok) << to_string(r.status);
      blocks.insert(r.as<Meet>().block);
    }
    EXPECT_EQ(blocks.size(), 4u) << "round " << round << ": the roots did not run at once";
    EXPECT_EQ(pool.unfinished(0), 0u);
    Record none;
    EXPECT_FALSE(pool.try_pop(none, 0)) << "the fan-out task came out";
  }
  const PoolStats st = pool.stats();
  EXPECT_EQ(st.completed, 20u);
  EXPECT_EQ(st.failed, 0u);
}

// A shape prepared with a fan-out task runs on a pool without room for it, as a graph without
// one; a pool of one lane gives no graph one (that lane has every block).
TEST(PoolGraph, AShapeWithAFanOutTaskRunsWithoutItWhereThereIsNoRoom) {
  GraphPool roomy(PoolOptions{.host_blocks = 4, .scheduler_lanes = 2, .graph_capacity = 16});
  GraphPool tight(PoolOptions{.host_blocks = 4, .scheduler_lanes = 2, .graph_capacity = 8});
  StepGraph g(8, {});
  const GraphShape shape = roomy.prepare_graph(8, g.edges);  // 8 roots, 2 units: a fan-out
  for (GraphPool* pool : {&roomy, &tight, &roomy}) {
    pool->push_graph(shape, g.records);
    for (const Record& r : pop_n(*pool, 8)) g.check(r);
    EXPECT_EQ(pool->unfinished(0), 0u);
    std::fill(g.stamps.begin(), g.stamps.end(), 0);
  }
  GraphPool one_lane(PoolOptions{.host_blocks = 2, .graph_capacity = 16});
  one_lane.push_graph(g.records, g.edges);
  for (const Record& r : pop_n(one_lane, 8)) g.check(r);
}

// The fan-out task's type id is the pool's: a graph task may not have it.
TEST(PoolGraph, AGraphTaskWithThePoolsOwnTypeIdIsRefused) {
  GraphPool pool(PoolOptions{.host_blocks = 2});
  StepGraph g(3, {{0, 1}});
  g.records[2].type = kGraphFanOutTypeId;
  EXPECT_EQ(refusal(pool, g.records, g.edges),
            "weft::gpu::Pool::push_graph: task 2 has the type id the pool keeps for itself "
            "(kGraphFanOutTypeId, 0xFFFFFFFF)");
}

TEST(PoolGraph, AFailedTaskCancelsItsSuccessorsUnrunAndLeavesOthersAlone) {
  GraphPool pool(PoolOptions{.host_blocks = 4});
  // 0 -> 1 (fails) -> 2 -> 3, and 0 -> 4 -> 3: 2 and 3 are cancelled; 0 and 4 run.
  StepGraph g(5, {{0, 1}, {1, 2}, {2, 3}, {0, 4}, {4, 3}});
  g.records[1] = Record::make<Fail>({0}, 1);
  pool.push_graph(g.records, g.edges);
  std::map<std::uint64_t, TaskStatus> status;
  for (const Record& r : pop_n(pool, 5)) status[r.tag] = r.status;
  EXPECT_EQ(status[0], TaskStatus::ok);
  EXPECT_EQ(status[1], TaskStatus::device_failed);
  EXPECT_EQ(status[2], TaskStatus::cancelled);
  EXPECT_EQ(status[3], TaskStatus::cancelled);
  EXPECT_EQ(status[4], TaskStatus::ok);
  EXPECT_EQ(g.stamps[2], 0u) << "a cancelled task ran";
  EXPECT_EQ(g.stamps[3], 0u) << "a cancelled task ran";
  EXPECT_EQ(pool.stats().failed, 3u);
}

TEST(PoolGraph, AnUnknownTypeFailsItsTaskAndCancelsItsSuccessor) {
  GraphPool pool(PoolOptions{.host_blocks = 2});
  StepGraph g(2, {{0, 1}});
  g.records[0].type = 99;
  pool.push_graph(g.records, g.edges);
  std::map<std::uint64_t, TaskStatus> status;
  for (const Record& r : pop_n(pool, 2)) status[r.tag] = r.status;
  EXPECT_EQ(status[0], TaskStatus::unknown_type);
  EXPECT_EQ(status[1], TaskStatus::cancelled);
}

TEST(PoolGraph, BadGraphsAreRefusedBeforeAnythingRuns) {
  GraphPool pool(PoolOptions{.host_blocks = 2, .graph_capacity = 8});
  StepGraph g(9, {});
  const std::span<const Record> three(g.records.data(), 3);
  EXPECT_EQ(refusal(pool, three, std::vector<Edge>{{0, 1}, {1, 3}}),
            "weft::gpu::Pool::push_graph: edge 1 (1 -> 3) names a task past the last (3 tasks)");
  EXPECT_EQ(refusal(pool, three, std::vector<Edge>{{0, 1}, {1, 2}, {2, 1}}).find("cycle") !=
                std::string::npos,
            true);
  EXPECT_EQ(refusal(pool, g.records, {}),
            "weft::gpu::Pool::push_graph: 9 tasks, more than the graph table holds "
            "(PoolOptions::graph_capacity 8)");
  EXPECT_EQ(refusal(pool, three, {}, 5),
            "weft::gpu::Pool::push_graph: output queue 5 does not exist (the pool has 1)");
  Record big = g.records[0];
  big.payload_size = 65;
  EXPECT_EQ(refusal(pool, std::span<const Record>(&big, 1), {}),
            "weft::gpu::Pool::push_graph: payload_size 65 exceeds the capacity 64");
  EXPECT_EQ(pool.unfinished(0), 0u);
  EXPECT_EQ(pool.stats().pushed, 0u);
  EXPECT_EQ(g.clock.load(), 0u) << "a task of a refused graph ran";
  // An empty graph is accepted and delivers nothing.
  EXPECT_EQ(refusal(pool, {}, {}), "accepted");
  EXPECT_EQ(pool.unfinished(0), 0u);
}

// A shape prepared once runs again and again, with new records each time: every run's tasks
// are delivered once each, after their inputs, from its own records.
TEST(PoolGraph, APreparedShapeRunsAgainWithNewRecordsEachTime) {
  GraphPool pool(PoolOptions{.host_blocks = 4, .graph_capacity = 16});
  const std::vector<Edge> edges{{0, 1}, {1, 2}, {0, 3}, {3, 15}, {2, 15}, {4, 5}, {5, 15}};
  const GraphShape shape = pool.prepare_graph(16, edges);
  EXPECT_EQ(shape.tasks(), 16u);
  EXPECT_EQ(shape.edges(), edges.size());
  std::vector<std::unique_ptr<StepGraph>> runs;
  for (int k = 0; k < 10; ++k) {
    runs.push_back(std::make_unique<StepGraph>(16, edges, 100 * k));
    pool.push_graph(shape, runs.back()->records);
  }
  std::set<std::uint64_t> tags;
  for (const Record& r : pop_n(pool, 10 * 16)) {
    EXPECT_TRUE(tags.insert(r.tag).second) << "tag " << r.tag << " twice";
    runs[r.tag / 100]->check(r, 100 * (r.tag / 100));
  }
  for (const auto& g : runs) EXPECT_EQ(g->clock.load(), 16u) << "a run did not run each task once";
}

std::string shape_refusal(GraphPool& pool, const GraphShape& shape, std::span<const Record> tasks) {
  try {
    pool.push_graph(shape, tasks);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "accepted";
}

TEST(PoolGraph, AShapeIsRefusedWithRecordsNotOnePerTaskOrByAPoolTooSmall) {
  GraphPool big(PoolOptions{.host_blocks = 1, .graph_capacity = 16});
  GraphPool small(PoolOptions{.host_blocks = 1, .graph_capacity = 8});
  GraphPool none(PoolOptions{.host_blocks = 1, .graph_capacity = 0});
  StepGraph g(9, {{0, 8}, {1, 8}});
  const GraphShape shape = big.prepare_graph(9, g.edges);
  EXPECT_EQ(shape_refusal(big, shape, std::span<const Record>(g.records).first(8)),
            "weft::gpu::Pool::push_graph: 8 records for a graph shape of 9 tasks (give one per "
            "task, in the shape's order)");
  EXPECT_EQ(shape_refusal(small, shape, g.records),
            "weft::gpu::Pool::push_graph: a graph shape of 9 tasks, more than the graph table "
            "holds (PoolOptions::graph_capacity 8)");
  EXPECT_EQ(shape_refusal(none, shape, g.records),
            "weft::gpu::Pool::push_graph: this pool runs no task graphs "
            "(PoolOptions::graph_capacity is 0)");
  EXPECT_EQ(shape_refusal(big, GraphShape{}, std::span<const Record>(g.records).first(1)),
            "weft::gpu::Pool::push_graph: 1 records for a graph shape of 0 tasks (give one per "
            "task, in the shape's order)");
  // What prepare_graph refuses, it names.
  EXPECT_THROW(
      {
        try {
          (void)big.prepare_graph(3, std::vector<Edge>{{0, 1}, {1, 2}, {2, 0}});
        } catch (const InvalidArgument& e) {
          EXPECT_EQ(std::string(e.what()).find("weft::gpu::Pool::prepare_graph: the edges make a "
                                               "cycle"),
                    0u)
              << e.what();
          throw;
        }
      },
      InvalidArgument);
  EXPECT_THROW((void)big.prepare_graph(3, {}, std::vector<int>{1}), InvalidArgument);
  EXPECT_THROW((void)none.prepare_graph(1, {}), InvalidArgument);
  for (GraphPool* pool : {&big, &small, &none}) {
    EXPECT_EQ(pool->unfinished(0), 0u);
    EXPECT_EQ(pool->stats().pushed, 0u);
  }
  EXPECT_EQ(g.clock.load(), 0u) << "a task of a refused graph ran";
  // The empty shape with no records is accepted and delivers nothing.
  EXPECT_EQ(shape_refusal(big, GraphShape{}, {}), "accepted");
  EXPECT_EQ(big.unfinished(0), 0u);
}

TEST(PoolGraph, APoolThatRunsNoGraphsOrHasAWatchdogSaysSo) {
  StepGraph g(1, {});
  GraphPool none(PoolOptions{.host_blocks = 1, .graph_capacity = 0});
  EXPECT_EQ(refusal(none, g.records, {}),
            "weft::gpu::Pool::push_graph: this pool runs no task graphs "
            "(PoolOptions::graph_capacity is 0)");
  GraphPool watched(
      PoolOptions{.host_blocks = 1, .task_deadline = std::chrono::microseconds(100000)});
  EXPECT_NE(refusal(watched, g.records, {}).find("watchdog"), std::string::npos);
  EXPECT_EQ(watched.graph_capacity(), 0u);  // as a pool that runs no graphs
  try {
    (void)watched.prepare_graph(1, {});
    ADD_FAILURE() << "a watchdog pool prepared a graph";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("prepare_graph: the watchdog"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(GraphPool(PoolOptions{.graph_capacity = (1u << 24) + 1}), InvalidArgument);
}

TEST(PoolGraph, AfterNoMoreTasksAGraphIsRefusedWithShutDown) {
  GraphPool pool(PoolOptions{.host_blocks = 1});
  StepGraph g(2, {{0, 1}});
  pool.no_more_tasks();
  EXPECT_THROW(pool.push_graph(g.records, g.edges), ShutDown);
  EXPECT_EQ(pool.unfinished(0), 0u);
}

TEST(PoolGraph, GraphsPushedBackToBackAllRunAndSynchronizeWaitsForThem) {
  GraphPool pool(PoolOptions{.host_blocks = 4, .graph_capacity = 16});
  std::vector<std::unique_ptr<StepGraph>> graphs;
  for (int k = 0; k < 20; ++k) {
    graphs.push_back(std::make_unique<StepGraph>(
        16, std::vector<Edge>{{0, 1}, {1, 2}, {0, 3}, {3, 15}, {2, 15}}, 100 * k));
    pool.push_graph(graphs.back()->records, graphs.back()->edges);
  }
  pool.synchronize();
  EXPECT_EQ(pool.unfinished(0), 20u * 16u);
  for (const Record& r : pop_n(pool, 20 * 16)) graphs[r.tag / 100]->check(r, 100 * (r.tag / 100));
}

TEST(PoolGraph, GraphTasksAndPushedTasksShareThePool) {
  GraphPool pool(PoolOptions{.host_blocks = 3, .output_queues = 2});
  StepGraph g(30, {{0, 29}, {1, 29}, {2, 29}});
  std::atomic<std::uint64_t> clock{0};
  std::vector<std::uint64_t> stamps(200, 0);
  pool.push_graph(g.records, g.edges, 1);
  for (std::uint32_t t = 0; t < 200; ++t) {
    pool.push<Step>({&clock, stamps.data(), nullptr, t, 0, 0, 0}, 0, t);
  }
  for (const Record& r : pop_n(pool, 30, 1)) g.check(r);
  for (const Record& r : pop_n(pool, 200, 0)) EXPECT_EQ(r.status, TaskStatus::ok);
}

TEST(PoolGraph, PauseWaitsForAGraphAndAGraphPushedWhilePausedRunsAfterResume) {
  GraphPool pool(PoolOptions{.host_blocks = 2});
  StepGraph first(8, {{0, 1}, {1, 2}, {2, 7}});
  pool.push_graph(first.records, first.edges);
  pool.pause();
  EXPECT_EQ(pool.unfinished(0), 8u);
  EXPECT_EQ(first.clock.load(), 8u) << "pause returned before the graph ran";
  StepGraph second(4, {{0, 3}}, 1000);
  pool.push_graph(second.records, second.edges);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(second.clock.load(), 0u) << "a graph ran on a paused pool";
  pool.resume();
  for (const Record& r : pop_n(pool, 12)) {
    if (r.tag >= 1000) {
      second.check(r, 1000);
    } else {
      first.check(r);
    }
  }
}

TEST(PoolGraph, AfterNoMoreTasksEveryQueuedGraphRunsAndPopsEndWithShutDown) {
  for (int round = 0; round < 20; ++round) {
    std::vector<std::unique_ptr<StepGraph>> graphs;
    std::map<std::uint64_t, int> seen;
    {
      GraphPool pool(PoolOptions{.host_blocks = 2, .graph_capacity = 32});
      g_gate_open = false;  // the first graph's root holds a block, and the graph with it
      std::vector<Record> gated(1, Record::make<Gate>({0}, 999999));
      pool.push_graph(gated, {});
      for (int k = 0; k < 5; ++k) {
        std::vector<Edge> edges;
        for (std::uint32_t t = 1; t < 32; ++t) edges.push_back({(t - 1) / 2, t});  // a tree
        graphs.push_back(std::make_unique<StepGraph>(32, edges, 100 * k));
        pool.push_graph(graphs.back()->records, graphs.back()->edges);
      }
      std::thread release([] {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        g_gate_open = true;
      });
      pool.no_more_tasks();
      for (const Record& r : pop_n(pool, 1 + 5 * 32)) ++seen[r.tag];
      EXPECT_THROW(pool.pop(), ShutDown);
      release.join();
    }
    EXPECT_EQ(seen.size(), 1u + 5u * 32u);
    for (const auto& [tag, n] : seen) EXPECT_EQ(n, 1) << "tag " << tag;
  }
}

// The scheduler core alone, so that the test can shut it down and then take what it delivered.
using GraphCore = detail::PoolCore<64>;
// A core of host blocks with a graph table; `table`, when given, receives the table (which the
// core's blocks own).
std::unique_ptr<GraphCore> graph_core(std::size_t blocks, std::size_t graph_capacity,
                                      const detail::HostGraphTable** table = nullptr) {
  constexpr auto dispatch = [](std::uint32_t type, void* payload, std::uint32_t size,
                               const BlockContext& block) {
    return Types::dispatch(type, payload, size, block);
  };
  auto runtime = detail::make_host_blocks(blocks, 1, 64, 0, +dispatch, false, 1, graph_capacity);
  if (table != nullptr)
    *table = dynamic_cast<const detail::HostGraphTable*>(runtime->graph_table());
  return std::make_unique<GraphCore>(std::move(runtime), 1, QueueOrder::fifo,
                                     detail::SchedulerConfig{});
}

// Shuts the core down while a Gate task (pushed with the gate closed) holds a block: the gate
// opens while the shutdown waits for it, once the shutdown has reached the first lane and it
// has cancelled the table (or after 10 s, when the tasks behind the gate then run and the
// test fails on their status). Returns what the core delivered, tag -> status, checking that
// each tag came once.
std::map<std::uint64_t, TaskStatus> shut_down_at_the_gate(GraphCore& core,
                                                          const detail::HostGraphTable& table) {
  wait_for_the_gate();
  std::thread release([&table] {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!table.cancelled() && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    g_gate_open = true;
  });
  core.shutdown();
  release.join();
  // Shutdown returns once every task was delivered.
  std::map<std::uint64_t, TaskStatus> status;
  for (Record r; core.try_pop(r, 0);) {
    EXPECT_TRUE(status.emplace(r.tag, r.status).second) << "tag " << r.tag << " twice";
  }
  EXPECT_THROW(core.pop(0), ShutDown);
  return status;
}

void close_the_gate() {
  g_gate_open = false;
  g_gate_started = false;
}

TEST(PoolGraph, ShutdownCancelsTheGraphsNotYetRunAndDeliversEachTaskOnce) {
  close_the_gate();
  const detail::HostGraphTable* table = nullptr;
  auto core = graph_core(1, 8, &table);
  ASSERT_NE(table, nullptr);
  std::vector<Record> gated(1, Record::make<Gate>({0}, 999999));
  core->push_graph(gated, {}, 0);
  std::vector<std::unique_ptr<StepGraph>> graphs;
  for (int k = 0; k < 3; ++k) {
    graphs.push_back(std::make_unique<StepGraph>(8, std::vector<Edge>{{0, 1}}, 100 * k));
    core->push_graph(graphs.back()->records, graphs.back()->edges, 0);
  }
  std::map<std::uint64_t, TaskStatus> status = shut_down_at_the_gate(*core, *table);
  ASSERT_EQ(status.size(), 1u + 3u * 8u);
  EXPECT_EQ(status[999999], TaskStatus::ok);  // in the table: it ran to its end
  for (const auto& [tag, s] : status) {
    if (tag != 999999) {
      EXPECT_EQ(s, TaskStatus::cancelled) << "tag " << tag;
    }
  }
  for (const auto& g : graphs) EXPECT_EQ(g->clock.load(), 0u);
}

TEST(PoolGraph, ShutdownDrainsTheGraphInTheTableUnrun) {
  // A gate, then a chain behind it in one graph: the chain is cancelled, unrun, at shutdown.
  close_the_gate();
  const detail::HostGraphTable* table = nullptr;
  auto core = graph_core(2, 16, &table);
  ASSERT_NE(table, nullptr);
  StepGraph g(9, {{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 5}, {5, 6}, {6, 7}, {7, 8}});
  g.records[0] = Record::make<Gate>({0}, 0);
  core->push_graph(g.records, g.edges, 0);
  std::map<std::uint64_t, TaskStatus> status = shut_down_at_the_gate(*core, *table);
  ASSERT_EQ(status.size(), 9u);
  EXPECT_EQ(status[0], TaskStatus::ok);
  for (std::uint64_t t = 1; t < 9; ++t) EXPECT_EQ(status[t], TaskStatus::cancelled) << t;
  EXPECT_EQ(g.clock.load(), 0u);
}

// Random acyclic graphs from three pushing threads, each with its own output queue, on a pool
// of four blocks: every task delivered once, each after its inputs (ThreadSanitizer checks the
// stamps' visibility through the table), a failing task's successors cancelled unrun.
TEST(PoolGraph, StressRandomGraphsFromSeveralThreads) {
  const int graphs_per_thread = 100 * stress_scale();
  GraphPool pool(PoolOptions{.host_blocks = 4, .output_queues = 3, .graph_capacity = 64});
  auto pusher = [&](int thread) {
    std::mt19937 rng(1234 + thread);
    for (int k = 0; k < graphs_per_thread; ++k) {
      const auto graph = random_graph(rng, 64, 1000 * k);
      StepGraph& g = *graph;
      const std::uint32_t n = static_cast<std::uint32_t>(g.tasks);
      // One failing task (told apart by its type: its tag is not its index).
      if (n > 4) g.records[rng() % n] = Record::make<Fail>({0}, 1000 * k);
      pool.push_graph(g.records, g.edges, thread);
      std::map<std::uint32_t, TaskStatus> status;
      std::vector<Record> got = pop_n(pool, n, thread);
      std::uint32_t failed = n;
      for (std::uint32_t t = 0; t < n; ++t) {
        if (g.records[t].type == Fail::kId) failed = t;
      }
      for (const Record& r : got) {
        if (r.type == Fail::kId) {
          EXPECT_EQ(r.status, TaskStatus::device_failed);
          continue;
        }
        const std::uint32_t t = static_cast<std::uint32_t>(r.tag - 1000 * k);
        EXPECT_TRUE(status.emplace(t, r.status).second) << "task " << t << " delivered twice";
        if (r.status == TaskStatus::ok) {
          g.check(r, 1000 * k);
        } else {
          EXPECT_EQ(r.status, TaskStatus::cancelled);
          EXPECT_EQ(g.stamps[t], 0u) << "cancelled task " << t << " ran";
        }
      }
      EXPECT_EQ(status.size() + (failed < n ? 1 : 0), n);
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) threads.emplace_back(pusher, t);
  for (auto& t : threads) t.join();
  EXPECT_EQ(pool.stats().pushed, pool.stats().completed);
}

// A few shapes shared by several threads, each pushing them in a random order with records of
// its own: the table is loaded with one shape after another and the same shape again, and every
// run's tasks still come back once, after their inputs.
TEST(PoolGraph, StressShapesSharedByThreadsPushedInTurn) {
  const int runs_per_thread = 60 * stress_scale();
  GraphPool pool(PoolOptions{.host_blocks = 4, .output_queues = 3, .graph_capacity = 48});
  std::mt19937 rng(77);
  std::vector<std::vector<Edge>> edges;
  std::vector<GraphShape> shapes;
  for (int s = 0; s < 4; ++s) {
    const auto g = random_graph(rng, 48, 0);
    edges.push_back(g->edges);
    shapes.push_back(pool.prepare_graph(g->tasks, g->edges));
  }
  auto pusher = [&](int thread) {
    std::mt19937 pick(500 + thread);
    for (int k = 0; k < runs_per_thread; ++k) {
      const std::size_t s = pick() % shapes.size();
      StepGraph g(shapes[s].tasks(), edges[s], 1000 * k);
      pool.push_graph(shapes[s], g.records, thread);
      std::set<std::uint64_t> tags;
      for (const Record& r : pop_n(pool, g.tasks, thread)) {
        EXPECT_TRUE(tags.insert(r.tag).second) << "tag " << r.tag << " twice";
        g.check(r, 1000 * k);
      }
      EXPECT_EQ(g.clock.load(), g.tasks);
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) threads.emplace_back(pusher, t);
  for (auto& t : threads) t.join();
  EXPECT_EQ(pool.stats().pushed, pool.stats().completed);
}

// Graphs pushed from one thread at random moments while another pauses and resumes the pool
// over and over: a graph loaded just before a pause keeps the first lane (and its blocks) up
// until it is through, so that no graph is half run while the pool is paused; none is loaded
// while a pause is requested; and every task comes back once, after its inputs. Run on pools
// with two lanes, with the mailbox, and by priority.
void pause_stress(const PoolOptions& options) {
  GraphPool pool(options);
  const int graphs = std::max(10, static_cast<int>(150 * stress_scale()));
  std::vector<std::unique_ptr<StepGraph>> all;
  std::size_t total = 0;
  std::mt19937 rng(99);
  for (int k = 0; k < graphs; ++k) {
    all.push_back(random_graph(rng, 12, 100 * k));
    total += all.back()->tasks;
  }
  std::atomic<bool> done{false};
  std::thread pauser([&] {
    while (!done.load()) {
      pool.pause();
      for (const auto& g : all) {
        const std::uint64_t ran = g->clock.load();
        EXPECT_TRUE(ran == 0 || ran == g->tasks) << "a graph is half run on a paused pool";
      }
      std::this_thread::sleep_for(std::chrono::microseconds(20));
      pool.resume();
      std::this_thread::yield();
    }
  });
  std::thread pusher([&] {
    std::mt19937 delay(7);
    for (const auto& g : all) {
      pool.push_graph(g->records, g->edges);
      std::this_thread::sleep_for(std::chrono::microseconds(delay() % 100));
    }
  });
  const std::vector<Record> got = pop_n(pool, total);
  pusher.join();
  done = true;
  pauser.join();
  std::set<std::uint64_t> tags;
  for (const Record& r : got) {
    EXPECT_TRUE(tags.insert(r.tag).second) << "tag " << r.tag << " twice";
    all[r.tag / 100]->check(r, 100 * (r.tag / 100));
  }
  EXPECT_EQ(tags.size(), total);
}

TEST(PoolGraph, PausesAndResumesBetweenGraphsWithTwoLanes) {
  pause_stress(PoolOptions{.host_blocks = 4, .scheduler_lanes = 2});
}

TEST(PoolGraph, PausesAndResumesBetweenGraphsWithTheMailbox) {
  pause_stress(PoolOptions{.host_blocks = 3, .mailbox = true});
}

TEST(PoolGraph, PausesAndResumesBetweenGraphsInAPriorityPool) {
  pause_stress(PoolOptions{.host_blocks = 3, .input_order = QueueOrder::priority});
}

TEST(PoolGraph, ACallbackMayPushAGraph) {
  GraphPool pool(PoolOptions{.host_blocks = 2});
  StepGraph g(6, {{0, 5}, {1, 5}, {2, 5}});
  std::promise<void> pushed;
  std::atomic<std::uint64_t> clock{0};
  std::vector<std::uint64_t> stamps(1, 0);
  pool.push_then(Record::make<Step>({&clock, stamps.data(), nullptr, 0, 0, 0, 0}), [&](Record&) {
    pool.push_graph(g.records, g.edges);
    pushed.set_value();
  });
  pushed.get_future().wait();
  for (const Record& r : pop_n(pool, 6)) g.check(r);
}

}  // namespace
}  // namespace weft::gpu
