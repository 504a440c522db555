// The host half of device-side dependencies (src/gpu/graph_layout.hpp): what a graph's table
// holds, and every graph it refuses, with the reason.
#include "gpu/graph_layout.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "weft/error.hpp"

namespace weft::gpu::detail {
namespace {

using Edges = std::vector<GraphEdge>;

std::string refusal(std::size_t tasks, const Edges& edges, std::size_t capacity = 64) {
  try {
    (void)lay_out_graph(tasks, edges, capacity);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "accepted";
}

std::vector<std::uint32_t> successors_of(const GraphLayout& g, std::uint32_t t) {
  return {g.successors.begin() + g.successor_start[t],
          g.successors.begin() + g.successor_start[t + 1]};
}

TEST(GraphLayout, ADiamondCountsInputsListsSuccessorsAndFindsItsRoots) {
  // 0 -> {1, 2} -> 3, and 4 alone.
  const GraphLayout g = lay_out_graph(5, Edges{{0, 1}, {0, 2}, {1, 3}, {2, 3}}, 8);
  EXPECT_EQ(g.inputs, (std::vector<std::uint32_t>{0, 1, 1, 2, 0}));
  EXPECT_EQ(successors_of(g, 0), (std::vector<std::uint32_t>{1, 2}));
  EXPECT_EQ(successors_of(g, 1), (std::vector<std::uint32_t>{3}));
  EXPECT_EQ(successors_of(g, 2), (std::vector<std::uint32_t>{3}));
  EXPECT_TRUE(successors_of(g, 3).empty());
  EXPECT_TRUE(successors_of(g, 4).empty());
  EXPECT_EQ(g.roots, (std::vector<std::uint32_t>{0, 4}));
}

TEST(GraphLayout, SuccessorsKeepTheEdgesOrderWhateverOrderTheEdgesComeIn) {
  const GraphLayout g = lay_out_graph(4, Edges{{2, 3}, {0, 3}, {0, 1}, {2, 1}, {0, 2}}, 4);
  EXPECT_EQ(successors_of(g, 0), (std::vector<std::uint32_t>{3, 1, 2}));
  EXPECT_EQ(successors_of(g, 2), (std::vector<std::uint32_t>{3, 1}));
  EXPECT_EQ(g.roots, (std::vector<std::uint32_t>{0}));
}

TEST(GraphLayout, AnEdgeGivenTwiceIsWaitedForTwice) {
  const GraphLayout g = lay_out_graph(2, Edges{{0, 1}, {0, 1}}, 2);
  EXPECT_EQ(g.inputs[1], 2u);
  EXPECT_EQ(successors_of(g, 0), (std::vector<std::uint32_t>{1, 1}));
}

TEST(GraphLayout, AnEmptyGraphAndTasksWithoutEdgesAreFine) {
  const GraphLayout empty = lay_out_graph(0, Edges{}, 1);
  EXPECT_TRUE(empty.roots.empty());
  EXPECT_EQ(empty.successor_start, (std::vector<std::uint32_t>{0}));
  EXPECT_EQ(lay_out_graph(3, Edges{}, 3).roots, (std::vector<std::uint32_t>{0, 1, 2}));
}

// A graph with more roots than the rule allows gets one more task, the pool's own, as its one
// root: the roots wait for it (one input each), and its successors are the roots, in order.
TEST(GraphLayout, MoreRootsThanTheRuleAllowsGetAFanOutTaskAsTheirOneRoot) {
  // 0 -> 1; 2, 3 and 4 alone: roots 0, 2, 3, 4.
  const GraphLayout g = lay_out_graph(5, Edges{{0, 1}}, 8, {}, "push_graph", FanOutRule{3});
  ASSERT_EQ(g.fan_out, 5u);
  EXPECT_EQ(g.tasks(), 5u);
  EXPECT_EQ(g.inputs, (std::vector<std::uint32_t>{1, 1, 1, 1, 1, 0}));
  EXPECT_EQ(successors_of(g, 5), (std::vector<std::uint32_t>{0, 2, 3, 4}));
  EXPECT_EQ(successors_of(g, 0), (std::vector<std::uint32_t>{1}));
  EXPECT_EQ(g.roots, (std::vector<std::uint32_t>{5}));
  EXPECT_TRUE(g.urgent.empty());
  // With priorities the fan-out task is of the normal level; the roots keep theirs.
  const GraphLayout p =
      lay_out_graph(3, Edges{}, 8, std::vector<int>{0, 2, 0}, "push_graph", FanOutRule{2});
  ASSERT_EQ(p.fan_out, 3u);
  EXPECT_EQ(p.urgent, (std::vector<std::uint8_t>{0, 1, 0, 0}));
}

TEST(GraphLayout, WithoutItsFanOutTaskAGraphIsLaidOutAsIfItNeverHadOne) {
  const Edges edges{{0, 1}, {3, 1}};  // roots 0, 2, 3, 4
  const GraphLayout plain = lay_out_graph(5, edges, 8, std::vector<int>{1, 0, 0, 1, 0});
  const GraphLayout fanned =
      lay_out_graph(5, edges, 8, std::vector<int>{1, 0, 0, 1, 0}, "push_graph", FanOutRule{1});
  ASSERT_EQ(fanned.fan_out, 5u);
  const GraphLayout back = without_fan_out(fanned);
  EXPECT_EQ(back.fan_out, GraphLayout::kNoFanOut);
  EXPECT_EQ(back.inputs, plain.inputs);
  EXPECT_EQ(back.successor_start, plain.successor_start);
  EXPECT_EQ(back.successors, plain.successors);
  EXPECT_EQ(back.roots, plain.roots);
  EXPECT_EQ(back.urgent, plain.urgent);
  EXPECT_EQ(without_fan_out(plain).roots, plain.roots);  // a copy where there is none
}

TEST(GraphLayout, NoFanOutTaskWithinTheRuleOrWithoutRoomForIt) {
  const Edges one_edge{{0, 1}};  // roots 0, 2, 3, 4
  // Roots not above the rule's count.
  EXPECT_EQ(lay_out_graph(5, one_edge, 8, {}, "push_graph", FanOutRule{4}).fan_out,
            GraphLayout::kNoFanOut);
  // No room for one more task in the table.
  const GraphLayout full = lay_out_graph(5, one_edge, 5, {}, "push_graph", FanOutRule{1});
  EXPECT_EQ(full.fan_out, GraphLayout::kNoFanOut);
  EXPECT_EQ(full.tasks(), 5u);
  EXPECT_EQ(full.roots, (std::vector<std::uint32_t>{0, 2, 3, 4}));
  // No room for its edges: 1 + 4 edges against 4.
  EXPECT_EQ(lay_out_graph(5, one_edge, 8, {}, "push_graph", FanOutRule{1, 4}).fan_out,
            GraphLayout::kNoFanOut);
  EXPECT_EQ(lay_out_graph(5, one_edge, 8, {}, "push_graph", FanOutRule{1, 5}).fan_out, 5u);
  // By default, never.
  EXPECT_EQ(lay_out_graph(5, one_edge, 8).fan_out, GraphLayout::kNoFanOut);
}

TEST(GraphLayout, APriorityAboveZeroMakesATaskUrgent) {
  const GraphLayout g = lay_out_graph(4, Edges{{0, 1}, {0, 2}}, 4, std::vector<int>{0, -1, 2, 1});
  EXPECT_EQ(g.urgent, (std::vector<std::uint8_t>{0, 0, 1, 1}));
  EXPECT_FALSE(g.is_urgent(1));
  EXPECT_TRUE(g.is_urgent(2));
  const GraphLayout none = lay_out_graph(2, Edges{}, 4, std::vector<int>{0, -3});
  EXPECT_TRUE(none.urgent.empty()) << "no urgent task: no flags to copy";
  EXPECT_FALSE(none.is_urgent(0));
}

TEST(GraphLayout, PrioritiesNotOnePerTaskAreRefused) {
  try {
    (void)lay_out_graph(3, Edges{}, 4, std::vector<int>{1, 0});
    ADD_FAILURE() << "accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()),
              "weft::gpu::Pool::push_graph: 2 priorities for 3 tasks (give one per task, or "
              "none)");
  }
}

TEST(GraphLayout, MoreTasksThanTheTableHoldsAreRefused) {
  EXPECT_EQ(refusal(9, Edges{}, 8),
            "weft::gpu::Pool::push_graph: 9 tasks, more than the graph table holds "
            "(PoolOptions::graph_capacity 8)");
}

TEST(GraphLayout, AnEdgeToATaskPastTheLastIsRefusedByItsIndex) {
  EXPECT_EQ(refusal(3, Edges{{0, 1}, {1, 3}}),
            "weft::gpu::Pool::push_graph: edge 1 (1 -> 3) names a task past the last (3 tasks)");
  EXPECT_EQ(refusal(3, Edges{{7, 0}}),
            "weft::gpu::Pool::push_graph: edge 0 (7 -> 0) names a task past the last (3 tasks)");
}

TEST(GraphLayout, AnEdgeFromATaskToItselfIsACycle) {
  EXPECT_EQ(refusal(3, Edges{{0, 1}, {2, 2}}),
            "weft::gpu::Pool::push_graph: the edges make a cycle (task 2 is on one)");
}

TEST(GraphLayout, ACycleIsNamedByATaskOnItNotOneBehindIt) {
  // 0 -> 2 -> 3 -> 4 -> 2 (the cycle 2, 3, 4), and 4 -> 1: task 1 is never reached either,
  // and comes first in index order, but it is behind the cycle, not on it.
  const std::string why = refusal(5, Edges{{0, 2}, {2, 3}, {3, 4}, {4, 2}, {4, 1}});
  EXPECT_TRUE(why == "weft::gpu::Pool::push_graph: the edges make a cycle (task 2 is on one)" ||
              why == "weft::gpu::Pool::push_graph: the edges make a cycle (task 3 is on one)" ||
              why == "weft::gpu::Pool::push_graph: the edges make a cycle (task 4 is on one)")
      << why;
}

TEST(GraphLayout, AGraphWithEveryTaskOnACycleHasNoRootsAndIsRefused) {
  const std::string why = refusal(2, Edges{{0, 1}, {1, 0}});
  EXPECT_TRUE(why == "weft::gpu::Pool::push_graph: the edges make a cycle (task 0 is on one)" ||
              why == "weft::gpu::Pool::push_graph: the edges make a cycle (task 1 is on one)")
      << why;
}

}  // namespace
}  // namespace weft::gpu::detail
