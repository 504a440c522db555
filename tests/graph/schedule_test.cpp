// Two-device schedules: the simulator's model, and HEFT.
#include "weft/graph/mapping/schedule.hpp"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "random_problems.hpp"
#include "weft/error.hpp"
#include "weft/graph/mapping/policies.hpp"

using weft::InvalidArgument;
using weft::graph::Device;
using weft::graph::heft_schedule;
using weft::graph::MappingProblem;
using weft::graph::Schedule;
using weft::graph::simulate_schedule;

namespace {
constexpr double kInf = MappingProblem::kNoImplementation;
constexpr Device C = Device::cpu;
constexpr Device G = Device::gpu;

// Every rule of the model holds: inputs arrive before a node starts (after their transfer),
// a device runs one node at a time, times add up.
void expect_valid(const MappingProblem& p, const Schedule& s) {
  const std::size_t n = p.nodes.size();
  ASSERT_EQ(s.device.size(), n);
  double last = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double t = s.device[i] == C ? p.nodes[i].cpu : p.nodes[i].gpu;
    EXPECT_NEAR(s.finish[i] - s.start[i], t, 1e-9) << "node " << i;
    last = std::max(last, s.finish[i]);
  }
  EXPECT_DOUBLE_EQ(s.makespan, last);
  for (const auto& e : p.edges) {
    double transfer = 0;
    if (s.device[e.from] == C && s.device[e.to] == G) transfer = e.to_gpu;
    if (s.device[e.from] == G && s.device[e.to] == C) transfer = e.to_cpu;
    EXPECT_GE(s.start[e.to] + 1e-9, s.finish[e.from] + transfer)
        << "node " << e.to << " started before its input from " << e.from;
  }
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = i + 1; j < n; ++j) {
      if (s.device[i] != s.device[j]) continue;
      const bool apart = s.finish[i] <= s.start[j] + 1e-9 || s.finish[j] <= s.start[i] + 1e-9;
      EXPECT_TRUE(apart) << "nodes " << i << " and " << j << " overlap on one device";
    }
  }
}
}  // namespace

TEST(Schedule, IndependentNodesRunOnBothDevicesAtOnce) {
  // Two independent nodes of 10 on either device: the additive model says 20 whatever the
  // mapping; one on each device takes 10, which HEFT finds.
  MappingProblem p;
  p.nodes = {{10, 10}, {10, 10}};
  EXPECT_DOUBLE_EQ(simulate_schedule(p, {C, C}).makespan, 20.0);
  EXPECT_DOUBLE_EQ(simulate_schedule(p, {C, G}).makespan, 10.0);
  const Schedule h = heft_schedule(p);
  EXPECT_DOUBLE_EQ(h.makespan, 10.0);
  EXPECT_NE(h.device[0], h.device[1]);
  expect_valid(p, h);
}

TEST(Schedule, TransfersDelayConsumersAndFencesStayOnTheCpu) {
  // fence -> x -> fence, x 2 faster on the GPU, transfers of 3: the GPU would finish x at
  // 1 + 3 + 8 = 12 against 1 + 10 = 11 on the CPU: HEFT keeps it on the CPU.
  MappingProblem p;
  p.nodes = {{1, kInf}, {10, 8}, {1, kInf}};
  p.edges = {{0, 1, 3, 3}, {1, 2, 3, 3}};
  const Schedule h = heft_schedule(p);
  EXPECT_EQ(h.device, (std::vector<Device>{C, C, C}));
  EXPECT_DOUBLE_EQ(h.makespan, 12.0);
  const Schedule d = simulate_schedule(p, weft::graph::map_d_map(p));
  EXPECT_DOUBLE_EQ(d.makespan, 1 + 3 + 8 + 3 + 1);
  expect_valid(p, d);
}

TEST(Schedule, RandomDagsGiveValidSchedules) {
  std::mt19937_64 rng(99);
  int heft_at_least_as_good = 0;
  for (int round = 0; round < 100; ++round) {
    const std::size_t n = 1 + round % 15;
    const MappingProblem p =
        weft::graph::testing::random_dag(rng, n, {.fence_one_in = 6, .transfer_divisor = 3});
    const Schedule h = heft_schedule(p);
    expect_valid(p, h);
    for (std::size_t i = 0; i < n; ++i) {
      if (p.nodes[i].gpu == kInf) {
        EXPECT_EQ(h.device[i], C);
      }
    }
    const Schedule a = simulate_schedule(p, weft::graph::map_a_free(p));
    const Schedule d = simulate_schedule(p, weft::graph::map_d_map(p));
    expect_valid(p, a);
    expect_valid(p, d);
    if (h.makespan <= std::min(a.makespan, d.makespan) + 1e-9) ++heft_at_least_as_good;
  }
  EXPECT_GT(heft_at_least_as_good, 80) << "HEFT should rarely lose to A-Free and D-Map";
}

TEST(Schedule, BadInputIsRejected) {
  MappingProblem p;
  p.nodes = {{1, kInf}, {1, 1}};
  EXPECT_THROW(simulate_schedule(p, {G, C}), InvalidArgument);  // a fence on the GPU
  EXPECT_THROW(simulate_schedule(p, {C}), InvalidArgument);
  p.edges = {{0, 1, 1, 1}, {1, 0, 1, 1}};
  EXPECT_THROW(heft_schedule(p), InvalidArgument);  // a cycle
  p.edges = {{0, 5, 1, 1}};
  EXPECT_THROW(heft_schedule(p), InvalidArgument);
  p.edges = {};
  p.nodes = {{kInf, kInf}};
  EXPECT_THROW(heft_schedule(p), InvalidArgument);
}
