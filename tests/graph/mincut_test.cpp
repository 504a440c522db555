// The exact two-device mapper against brute force, and its bad input; costs every mapper
// refuses.
#include "weft/graph/mapping/mincut.hpp"
#include "weft/graph/mapping/policies.hpp"
#include "weft/graph/mapping/schedule.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "random_problems.hpp"
#include "weft/error.hpp"

using weft::InvalidArgument;
using weft::graph::Device;
using weft::graph::mapping_cost;
using weft::graph::MappingProblem;
using weft::graph::min_cut_mapping;

namespace {

double brute_force(const MappingProblem& p) {
  const std::size_t n = p.nodes.size();
  double best = INFINITY;
  for (std::size_t mask = 0; mask < (std::size_t{1} << n); ++mask) {
    std::vector<Device> d(n);
    for (std::size_t i = 0; i < n; ++i) d[i] = (mask >> i) & 1 ? Device::gpu : Device::cpu;
    best = std::min(best, mapping_cost(p, d));
  }
  return best;
}

constexpr double kInf = MappingProblem::kNoImplementation;

}  // namespace

TEST(MinCutMapping, MatchesBruteForceOnRandomDags) {
  std::mt19937_64 rng(2026);
  for (int round = 0; round < 300; ++round) {
    const std::size_t n = 1 + round % 11;
    const MappingProblem p = weft::graph::testing::random_dag(rng, n);
    const auto m = min_cut_mapping(p);
    ASSERT_EQ(m.device.size(), n);
    EXPECT_NEAR(m.cost, brute_force(p), 1e-9) << "round " << round << ", " << n << " nodes";
    EXPECT_DOUBLE_EQ(m.cost, mapping_cost(p, m.device));
    for (std::size_t i = 0; i < n; ++i) {
      if (std::isinf(p.nodes[i].gpu)) {
        EXPECT_EQ(m.device[i], Device::cpu) << "a fence went to the GPU";
      }
    }
  }
}

TEST(MinCutMapping, MatchesBruteForceWithDataSharedBySeveralConsumers) {
  std::mt19937_64 rng(77);
  for (int round = 0; round < 300; ++round) {
    const std::size_t n = 2 + round % 10;
    const MappingProblem p = weft::graph::testing::random_dag(rng, n, {.share_one_in = 2});
    const auto m = min_cut_mapping(p);
    EXPECT_NEAR(m.cost, brute_force(p), 1e-9) << "round " << round << ", " << n << " nodes";
  }
}

TEST(MinCutMapping, MatchesBruteForceWithSharedGraphInputs) {
  std::mt19937_64 rng(4242);
  for (int round = 0; round < 300; ++round) {
    const std::size_t n = 2 + round % 10;
    const MappingProblem p =
        weft::graph::testing::random_dag(rng, n, {.share_one_in = 3, .shared_inputs = 2});
    const auto m = min_cut_mapping(p);
    EXPECT_NEAR(m.cost, brute_force(p), 1e-9) << "round " << round << ", " << n << " nodes";
  }
}

// One input (8 to copy in) read by three nodes that each gain 3 on the GPU: charged per reader
// (24) no node would go; copied once for all (8 < 9) all three do.
TEST(MinCutMapping, AGraphInputReadByManyIsCopiedInOnce) {
  MappingProblem p;
  p.nodes = {{5, 2}, {5, 2}, {5, 2}};
  p.inputs.push_back({{0, 1, 2}, 8});
  const std::vector<Device> all_gpu(3, Device::gpu), all_cpu(3, Device::cpu);
  EXPECT_DOUBLE_EQ(mapping_cost(p, all_gpu), 3 * 2 + 8);
  EXPECT_DOUBLE_EQ(mapping_cost(p, all_cpu), 3 * 5);
  EXPECT_DOUBLE_EQ(mapping_cost(p, {Device::gpu, Device::cpu, Device::cpu}), 2 + 8 + 10);
  EXPECT_EQ(min_cut_mapping(p).device, all_gpu);
  EXPECT_EQ(weft::graph::map_pptm(p), all_gpu);  // each reader's share: 8 / 3 < its gain 3
  // A schedule copies the input in before its first GPU reader only: 8 + 2 + 2 + 2 on the GPU.
  EXPECT_DOUBLE_EQ(weft::graph::simulate_schedule(p, all_gpu).makespan, 14);
  p.inputs[0].to_gpu = 10;  // above the three gains together
  EXPECT_EQ(min_cut_mapping(p).device, all_cpu);
  EXPECT_EQ(weft::graph::map_pptm(p), all_cpu);
  p.inputs[0].readers = {0, 1, 7};
  EXPECT_THROW(min_cut_mapping(p), InvalidArgument);
  EXPECT_THROW(mapping_cost(p, all_gpu), InvalidArgument);
  EXPECT_THROW(weft::graph::map_pptm(p), InvalidArgument);
  EXPECT_THROW(weft::graph::heft_schedule(p), InvalidArgument);
}

// P's result is read by three fences: copied back once (3), not three times (9).
TEST(MinCutMapping, ADatumReadByManyIsPaidOnceEachWay) {
  MappingProblem p;
  p.nodes = {{10, 5}, {1, kInf}, {1, kInf}, {1, kInf}};
  for (std::size_t c = 1; c <= 3; ++c) p.edges.push_back({0, c, 3, 3, /*datum=*/7});
  const std::vector<Device> gpu_first{Device::gpu, Device::cpu, Device::cpu, Device::cpu};
  EXPECT_DOUBLE_EQ(mapping_cost(p, gpu_first), 5 + 3 + 3);
  EXPECT_EQ(min_cut_mapping(p).device, gpu_first);
  EXPECT_EQ(weft::graph::map_pptm(p), gpu_first);
  for (auto& e : p.edges) e.datum = MappingProblem::kNoDatum;  // three separate copies
  EXPECT_DOUBLE_EQ(mapping_cost(p, gpu_first), 5 + 9 + 3);
  EXPECT_EQ(min_cut_mapping(p).device[0], Device::cpu);
  EXPECT_EQ(weft::graph::map_pptm(p)[0], Device::cpu);
}

TEST(MinCutMapping, AChainStaysOnTheGpuOnlyWhenItsGainCoversTheTransfers) {
  // cpu-only source -> a -> b -> cpu-only sink. a and b each gain 3 on the GPU; moving the data
  // there and back costs 4 each way: together (gain 6 < 8) they stay on the CPU; with gains of
  // 5 each (10 > 8) both go to the GPU; never one alone (it would pay both transfers).
  for (const double gain : {3.0, 5.0}) {
    MappingProblem p;
    p.nodes = {{1, kInf}, {10, 10 - gain}, {10, 10 - gain}, {1, kInf}};
    p.edges = {{0, 1, 4, 4}, {1, 2, 4, 4}, {2, 3, 4, 4}};
    const auto m = min_cut_mapping(p);
    const Device expect = gain > 4 ? Device::gpu : Device::cpu;
    EXPECT_EQ(m.device[1], expect) << "gain " << gain;
    EXPECT_EQ(m.device[2], expect) << "gain " << gain;
    EXPECT_EQ(m.device[0], Device::cpu);
    EXPECT_EQ(m.device[3], Device::cpu);
  }
}

TEST(MinCutMapping, TransferCostsAreDirectional) {
  // a (CPU only) -> b: moving a's output to the GPU is cheap, so b goes there although the
  // way back would be dear (nobody needs it back).
  MappingProblem p;
  p.nodes = {{1, kInf}, {10, 2}};
  p.edges = {{0, 1, 1, 100}};
  EXPECT_EQ(min_cut_mapping(p).device[1], Device::gpu);
  p.edges = {{0, 1, 100, 1}};
  EXPECT_EQ(min_cut_mapping(p).device[1], Device::cpu);
}

TEST(MinCutMapping, TiesGoToTheGpuAndEmptyProblemsAreFine) {
  MappingProblem p;
  p.nodes = {{5, 5}};
  EXPECT_EQ(min_cut_mapping(p).device[0], Device::gpu);
  EXPECT_TRUE(min_cut_mapping(MappingProblem{}).device.empty());
}

TEST(MinCutMapping, BadInputIsRejectedWithAReason) {
  MappingProblem p;
  p.nodes = {{1, 1}, {1, 1}};
  p.edges = {{0, 2, 1, 1}};
  EXPECT_THROW(min_cut_mapping(p), InvalidArgument);
  p.edges = {{0, 1, -1, 1}};
  EXPECT_THROW(min_cut_mapping(p), InvalidArgument);
  p.edges = {};
  p.nodes = {{kInf, kInf}};
  EXPECT_THROW(min_cut_mapping(p), InvalidArgument);
  p.nodes = {{std::nan(""), 1}};
  EXPECT_THROW(min_cut_mapping(p), InvalidArgument);
  EXPECT_THROW(mapping_cost(MappingProblem{{{1, 1}}, {}, {}}, {}), InvalidArgument);
}

TEST(Mappers, EveryMapperRefusesNaNNegativeOrInfiniteCostsNamingThem) {
  // A NaN compares false with everything: a mapper that took one would return some mapping,
  // silently. Each entry point refuses it, and a negative cost, and an infinite transfer (only a
  // node's time may be infinite: kNoImplementation).
  MappingProblem good;
  good.nodes = {{2, 1}, {3, 2}, {1, kInf}};  // node 2 is a fence
  good.edges = {{0, 1, 0.5, 0.5, 0}, {1, 2, 0.5, 0.5}};
  good.inputs = {{{0, 1}, 0.25}};
  const std::vector<Device> on_cpu(good.nodes.size(), Device::cpu);
  const std::vector<std::pair<std::string, std::function<void(const MappingProblem&)>>> mappers = {
      {"map_a_free", [](const MappingProblem& p) { (void)weft::graph::map_a_free(p); }},
      {"map_d_map", [](const MappingProblem& p) { (void)weft::graph::map_d_map(p); }},
      {"map_pptm", [](const MappingProblem& p) { (void)weft::graph::map_pptm(p); }},
      {"min_cut_mapping", [](const MappingProblem& p) { (void)min_cut_mapping(p); }},
      {"mapping_cost", [&](const MappingProblem& p) { (void)mapping_cost(p, on_cpu); }},
      {"heft_schedule", [](const MappingProblem& p) { (void)weft::graph::heft_schedule(p); }},
      {"simulate_schedule",
       [&](const MappingProblem& p) { (void)weft::graph::simulate_schedule(p, on_cpu); }}};
  const double nan = std::nan("");
  struct Bad {
    std::string what;  // as the message names it
    std::function<void(MappingProblem&)> spoil;
  };
  const std::vector<Bad> bad = {
      {"node 1's CPU time", [&](MappingProblem& p) { p.nodes[1].cpu = nan; }},
      {"node 1's GPU time", [&](MappingProblem& p) { p.nodes[1].gpu = nan; }},
      {"node 0's CPU time", [&](MappingProblem& p) { p.nodes[0].cpu = -1; }},
      {"node 0's GPU time", [&](MappingProblem& p) { p.nodes[0].gpu = -kInf; }},
      {"edge 0 -> 1's host-to-device transfer",
       [&](MappingProblem& p) { p.edges[0].to_gpu = nan; }},
      {"edge 1 -> 2's device-to-host transfer", [&](MappingProblem& p) { p.edges[1].to_cpu = -1; }},
      {"edge 0 -> 1's host-to-device transfer",
       [&](MappingProblem& p) { p.edges[0].to_gpu = kInf; }},
      {"shared input 0's host-to-device transfer",
       [&](MappingProblem& p) { p.inputs[0].to_gpu = nan; }},
      {"shared input 0's host-to-device transfer",
       [&](MappingProblem& p) { p.inputs[0].to_gpu = kInf; }},
  };
  for (const auto& [name, map] : mappers) {
    EXPECT_NO_THROW(map(good)) << name;
    for (const Bad& b : bad) {
      MappingProblem p = good;
      b.spoil(p);
      try {
        map(p);
        ADD_FAILURE() << name << " took a bad " << b.what;
      } catch (const InvalidArgument& e) {
        const std::string why = e.what();
        EXPECT_NE(why.find("weft::graph::" + name + ": " + b.what), std::string::npos) << why;
      }
    }
  }
}
