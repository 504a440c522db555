// Mapping policies: A-Free, D-Map and PPTM on graphs whose best mapping is known.
#include "weft/graph/mapping/policies.hpp"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "random_problems.hpp"
#include "weft/error.hpp"

using weft::InvalidArgument;
using weft::graph::Device;
using weft::graph::map_a_free;
using weft::graph::map_d_map;
using weft::graph::map_pptm;
using weft::graph::mapping_cost;
using weft::graph::MappingProblem;
using weft::graph::min_cut_mapping;

namespace {
constexpr double kInf = MappingProblem::kNoImplementation;
constexpr Device C = Device::cpu;
constexpr Device G = Device::gpu;
}  // namespace

TEST(MappingPolicies, AFreeAndDMap) {
  MappingProblem p;
  p.nodes = {{1, kInf}, {5, 2}, {3, 9}};
  p.edges = {{0, 1, 1, 1}, {1, 2, 1, 1}};
  EXPECT_EQ(map_a_free(p), (std::vector<Device>{C, C, C}));
  EXPECT_EQ(map_d_map(p), (std::vector<Device>{C, G, G}));
  p.nodes.push_back({kInf, 1});
  EXPECT_THROW(map_a_free(p), InvalidArgument);
}

TEST(MappingPolicies, PptmKeepsANodeBetweenTwoFencesOnTheCpuWhenItsGainDoesNotPay) {
  // factor4's shape: fence -> x -> fence, x 2 faster on the GPU, 3 to move the data
  // each way. D-Map sends x to the GPU and pays 6 to gain 2; PPTM keeps it on the CPU, which is
  // the optimum.
  MappingProblem p;
  p.nodes = {{1, kInf}, {10, 8}, {1, kInf}};
  p.edges = {{0, 1, 3, 3}, {1, 2, 3, 3}};
  const auto pptm = map_pptm(p);
  EXPECT_EQ(pptm, (std::vector<Device>{C, C, C}));
  EXPECT_LT(mapping_cost(p, pptm), mapping_cost(p, map_d_map(p)));
  EXPECT_DOUBLE_EQ(mapping_cost(p, pptm), min_cut_mapping(p).cost);
}

TEST(MappingPolicies, PptmAccumulatesGainsAlongAChainUntilTheyPayForTheTransfer) {
  // fence -> a -> b -> c (the output): each gains 3, the input transfer costs 4. a alone would
  // not pay (3 < 4); the chain does (9 > 4): all three go to the GPU.
  MappingProblem p;
  p.nodes = {{1, kInf}, {10, 7}, {10, 7}, {10, 7}};
  p.edges = {{0, 1, 4, 4}, {1, 2, 1, 1}, {2, 3, 1, 1}};
  const auto pptm = map_pptm(p);
  EXPECT_EQ(pptm, (std::vector<Device>{C, G, G, G}));
  EXPECT_DOUBLE_EQ(mapping_cost(p, pptm), min_cut_mapping(p).cost);
  // a alone as the output: 3 gained, 4 to move its input: it stays on the CPU.
  MappingProblem alone;
  alone.nodes = {{1, kInf}, {10, 7}};
  alone.edges = {{0, 1, 4, 4}};
  EXPECT_EQ(map_pptm(alone), (std::vector<Device>{C, C}));
}

TEST(MappingPolicies, PptmRemapsProducersOfANodeItSendsBackToTheCpu) {
  // a -> b -> fence. a gains 5, b loses 1; b's result must come back for the fence.
  MappingProblem p;
  p.nodes = {{10, 5}, {10, 11}, {1, kInf}};
  p.edges = {{0, 1, 1, 1}, {1, 2, 3, 3}};
  // Back-transfer 3: the chain's gain (5 - 1 = 4) pays for it: PPTM keeps both on the GPU
  // (cost 20). The optimum is a alone on the GPU (17: b loses on the GPU, and a's result is
  // cheap to move): PPTM's chains do not split, the minimum cut does.
  EXPECT_EQ(map_pptm(p), (std::vector<Device>{G, G, C}));
  EXPECT_DOUBLE_EQ(mapping_cost(p, map_pptm(p)), 20.0);
  EXPECT_EQ(min_cut_mapping(p).device, (std::vector<Device>{G, C, C}));
  EXPECT_DOUBLE_EQ(min_cut_mapping(p).cost, 17.0);
  // Back-transfer 6: it does not (4 < 6): b goes to the CPU, and a, now feeding a CPU node,
  // is decided against the transfer to b (1 < 5): a stays on the GPU. The optimum, too.
  p.edges[1] = {1, 2, 6, 6};
  EXPECT_EQ(map_pptm(p), (std::vector<Device>{G, C, C}));
  EXPECT_DOUBLE_EQ(mapping_cost(p, map_pptm(p)), min_cut_mapping(p).cost);
}

// A shared producer's gain is passed to none of its consumers (factor1's shape): P gains 9 and
// feeds the fence F and the output O; O gains 0.05 but must take F's result over (2). With P's
// gain inherited, O would go to the GPU (7.05 > 0): cost 6.95 against the optimum's 5.
TEST(MappingPolicies, PptmPassesNoSharedProducersGainToItsConsumers) {
  MappingProblem p;
  p.nodes = {{10, 1}, {1, kInf}, {1, 0.95}};  // P, F, O
  // P -> F crosses back (2); P -> O is free back (F already brings P's data to the host).
  p.edges = {{0, 1, 2, 2}, {0, 2, 2, 0}, {1, 2, 2, 2}};
  const auto pptm = map_pptm(p);
  EXPECT_EQ(pptm, (std::vector<Device>{Device::gpu, Device::cpu, Device::cpu}));
  EXPECT_DOUBLE_EQ(mapping_cost(p, pptm), 5.0);
  EXPECT_EQ(pptm, min_cut_mapping(p).device);
}

TEST(MappingPolicies, PptmNeverPutsAFenceOnTheGpuAndIsNeverBelowTheOptimum) {
  std::mt19937_64 rng(4);
  int better_than_dmap = 0;
  for (int round = 0; round < 200; ++round) {
    const std::size_t n = 2 + round % 12;
    const MappingProblem p = weft::graph::testing::random_tree(rng, n, {.fence_one_in = 5});
    const auto d = map_pptm(p);
    for (std::size_t i = 0; i < n; ++i) {
      if (p.nodes[i].gpu == kInf) {
        EXPECT_EQ(d[i], C);
      }
    }
    EXPECT_GE(mapping_cost(p, d), min_cut_mapping(p).cost - 1e-9);
    if (mapping_cost(p, d) < mapping_cost(p, map_d_map(p)) - 1e-9) ++better_than_dmap;
  }
  EXPECT_GT(better_than_dmap, 20) << "PPTM should beat D-Map where transfers dominate";
}

TEST(MappingPolicies, CyclesAndBadEdgesAreRejected) {
  MappingProblem p;
  p.nodes = {{1, 1}, {1, 1}, {1, 1}};
  p.edges = {{0, 1, 1, 1}, {1, 2, 1, 1}, {2, 1, 1, 1}};
  try {
    map_pptm(p);
    FAIL() << "a cycle was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("cycle"), std::string::npos) << e.what();
  }
  p.edges = {{0, 3, 1, 1}};
  EXPECT_THROW(map_pptm(p), InvalidArgument);
}
