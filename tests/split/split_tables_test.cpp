// DB1 and DB2 of the adaptive split (weft/split/tables.hpp): the seed's buckets, its update
// rule through a median window, cold buckets, and DB2's per-core and per-class shares.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "simulated_machine.hpp"
#include "weft/error.hpp"
#include "weft/split/tables.hpp"

namespace ws = weft::split;

namespace {

// A region of bucket b where the GPU did `gpu_work` at `gpu_rate` and each core did its work at
// its own rate.
ws::RegionTiming timing(double gpu_work, double gpu_rate, const std::vector<double>& core_work,
                        const std::vector<double>& core_rate) {
  ws::RegionTiming t;
  t.gpu_work = gpu_work;
  t.gpu_seconds = gpu_work > 0 ? gpu_work / gpu_rate : 0;
  t.core_work = core_work;
  for (std::size_t j = 0; j < core_work.size(); ++j) {
    t.core_seconds.push_back(core_work[j] > 0 ? core_work[j] / core_rate[j] : 0);
  }
  return t;
}

ws::SplitOptions opts(std::size_t window = 1) {
  ws::SplitOptions o;
  o.buckets = 50;
  o.size_min = 0;
  o.size_max = 4900;
  o.window = window;
  o.min_share = 0;
  o.try_alone = false;  // the seed's rule alone; the tests of try_alone turn it on
  return o;
}

// A region of `work` that took `seconds`, split or on one side.
ws::RegionTiming costed(double gpu_work, double cpu_work, double seconds) {
  ws::RegionTiming t;
  t.seconds = seconds;
  t.gpu_work = gpu_work;
  t.gpu_seconds = gpu_work > 0 ? seconds : 0;
  t.core_work = {cpu_work};
  t.core_seconds = {cpu_work > 0 ? seconds : 0};
  return t;
}

}  // namespace

TEST(SplitTables, BucketsAreEvenlySpacedAsTheSeedDefinesThem) {
  ws::SplitTables t(3, {200, 36}, opts());  // the seed's example: F_i = 100 i
  EXPECT_EQ(t.bucket_of(0), 0u);
  EXPECT_EQ(t.bucket_of(99.9), 0u);
  EXPECT_EQ(t.bucket_of(100), 1u);
  EXPECT_EQ(t.bucket_of(4899), 48u);
  EXPECT_EQ(t.bucket_of(4900), 49u);
  EXPECT_EQ(t.bucket_of(1e9), 49u);  // F >= F_{M-1} uses the last bucket
  EXPECT_DOUBLE_EQ(t.buckets()[7].size_from, 700);
}

TEST(SplitTables, StartsFromThePeakPriorAndEqualCoreShares) {
  ws::SplitTables t(3, {200, 36}, opts());
  for (std::size_t b : {0u, 10u, 49u}) EXPECT_NEAR(t.gsplit(b), 200.0 / 236.0, 1e-12);
  EXPECT_NEAR(t.prior_gsplit(), 0.8475, 1e-4);
  for (double c : t.csplit()) EXPECT_NEAR(c, 1.0 / 3, 1e-12);
}

TEST(SplitTables, OneRegionSetsTheBalancingSplitAsTheSeedOverwrites) {
  ws::SplitTables t(3, {200, 36}, opts(1));
  const std::size_t b = t.bucket_of(1000);
  // The GPU really runs at 100, the cores at 10, 12 and 14 (36 together).
  t.update(b, timing(85, 100, {5, 5, 5}, {10, 12, 14}));
  // Pgpu' = 100; Pcpu' = 15 / max(0.5, 0.4167, 0.357) = 30.
  EXPECT_NEAR(t.gsplit(b), 100.0 / 130.0, 1e-12);
  EXPECT_NEAR(t.buckets()[b].last_used, 0.85, 1e-12);  // the split that ran: 85 of 100
  EXPECT_NEAR(t.buckets()[b].last_balanced, 100.0 / 130.0, 1e-12);
  const std::vector<double> c = t.csplit();
  EXPECT_NEAR(c[0], 10.0 / 36, 1e-12);
  EXPECT_NEAR(c[1], 12.0 / 36, 1e-12);
  EXPECT_NEAR(c[2], 14.0 / 36, 1e-12);
}

TEST(SplitTables, TheMedianWindowIgnoresOneOutlier) {
  ws::SplitTables t(1, {100, 100}, opts(5));
  const std::size_t b = t.bucket_of(500);
  for (int i = 0; i < 4; ++i) t.update(b, timing(50, 300, {50}, {100}));
  EXPECT_NEAR(t.gsplit(b), 0.75, 1e-12);
  t.update(b, timing(50, 3, {50}, {100}));  // one region where the GPU crawled
  EXPECT_NEAR(t.gsplit(b), 0.75, 1e-12);
  // With the seed's overwrite the same outlier sends nearly everything to the CPU.
  ws::SplitTables seed(1, {100, 100}, opts(1));
  seed.update(b, timing(50, 300, {50}, {100}));
  seed.update(b, timing(50, 3, {50}, {100}));
  EXPECT_LT(seed.gsplit(b), 0.03);
}

TEST(SplitTables, TheWindowFollowsALastingChange) {
  ws::SplitTables t(1, {100, 100}, opts(5));
  const std::size_t b = t.bucket_of(500);
  for (int i = 0; i < 5; ++i) t.update(b, timing(50, 300, {50}, {100}));
  for (int i = 0; i < 3; ++i) t.update(b, timing(50, 100, {50}, {100}));  // the GPU slowed down
  EXPECT_NEAR(t.gsplit(b), 0.5, 1e-12);
}

TEST(SplitTables, AColdBucketBorrowsItsNearestMeasuredNeighbour) {
  ws::SplitTables t(1, {1000, 1}, opts(1));
  t.update(10, timing(50, 100, {50}, {100}));  // measured: 1/2
  t.update(40, timing(50, 300, {50}, {100}));  // measured: 3/4
  EXPECT_NEAR(t.gsplit(12), 0.5, 1e-12);
  EXPECT_NEAR(t.gsplit(37), 0.75, 1e-12);
  EXPECT_NEAR(t.gsplit(25), 0.5, 1e-12);  // equally far: the lower one
  EXPECT_NEAR(t.gsplit(49), 0.75, 1e-12);
}

TEST(SplitTables, ASideGivenNoWorkKeepsWhatItKnew) {
  ws::SplitTables t(2, {100, 100}, opts(1));
  const std::size_t b = t.bucket_of(100);
  t.update(b, timing(50, 300, {25, 25}, {50, 50}));
  EXPECT_NEAR(t.gsplit(b), 0.75, 1e-12);
  // An all-GPU region: the GPU ran alone, faster than beside the cores, so it teaches only
  // what the GPU alone costs; the split's rates, and DB2, stay.
  t.update(b, timing(100, 900, {0, 0}, {0, 0}));
  EXPECT_NEAR(t.gsplit(b), 0.75, 1e-12);
  EXPECT_NEAR(t.buckets()[b].gpu_alone_cost.value(), 1.0 / 900, 1e-15);
  const std::vector<double> c = t.csplit();
  EXPECT_NEAR(c[0], 0.5, 1e-12);
}

TEST(SplitTables, ASliverGoesToOneSide) {
  ws::SplitOptions o = opts(1);
  o.min_share = 0.05;
  ws::SplitTables t(1, {1000, 10}, o);  // 0.990: the CPU's 1% would cost more than it saves
  EXPECT_EQ(t.gsplit(0), 1.0);
  t.update(0, timing(100, 10, {0}, {0}));  // the GPU turns out as slow as 10
  EXPECT_NEAR(t.gsplit(0), 0.5, 1e-12);
  ws::SplitTables cpu_side(1, {1, 1000}, o);
  EXPECT_EQ(cpu_side.gsplit(0), 0.0);
}

TEST(SplitTables, PerClassSharesSplitEquallyWithinAClass) {
  ws::SplitOptions o = opts(1);
  o.core_shares = ws::CoreShares::per_class;
  o.core_class = {0, 1, 1, 1};  // core 0 shares a cache with the feeding core
  ws::SplitTables t(4, {100, 100}, o);
  EXPECT_EQ(t.share_rates().size(), 2u);
  t.update(0, timing(0, 1, {10, 10, 10, 10}, {5, 20, 20, 10}));
  // Class 0: 10 work / 2 s / 1 core = 5; class 1: 30 work / 1 s (its slowest) / 3 cores = 10.
  const std::vector<double> c = t.csplit();
  EXPECT_NEAR(c[0], 5.0 / 35, 1e-12);
  EXPECT_NEAR(c[1], 10.0 / 35, 1e-12);
  EXPECT_NEAR(c[3], 10.0 / 35, 1e-12);
}

TEST(SplitTables, AnUnmeasuredCoreIsTakenAsTheMeanOfTheOthers) {
  ws::SplitTables t(3, {100, 100}, opts(1));
  t.update(0, timing(0, 1, {10, 10, 0}, {10, 30, 0}));
  const std::vector<double> c = t.csplit();
  EXPECT_NEAR(c[0], 10.0 / 60, 1e-12);
  EXPECT_NEAR(c[1], 30.0 / 60, 1e-12);
  EXPECT_NEAR(c[2], 20.0 / 60, 1e-12);
}

TEST(SplitTables, TheSizeRangeIsLearnedFromTheFirstRegionWhenNotGiven) {
  ws::SplitOptions o;
  o.buckets = 11;
  ws::SplitTables t(1, {1, 1}, o);
  EXPECT_FALSE(t.size_range_set());
  EXPECT_EQ(t.bucket_of(500), 5u);  // [0, 1000] in steps of 100
  EXPECT_TRUE(t.size_range_set());
  EXPECT_EQ(t.bucket_of(1000), 10u);
}

TEST(SplitTables, BadOptionsAndInputsAreRefusedByName) {
  auto refused = [](auto make, const char* words) {
    try {
      make();
      ADD_FAILURE() << "accepted: " << words;
    } catch (const weft::InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  refused([] { ws::SplitTables(0, {1, 1}, {}); }, "no cores");
  refused([] { ws::SplitTables(1, {0, 1}, {}); }, "peak rates");
  refused([] { ws::SplitTables(1, {1, std::nan("")}, {}); }, "peak rates");
  refused([] { ws::SplitTables(1, {1, 1}, {.buckets = 0}); }, "0 size buckets");
  refused([] { ws::SplitTables(1, {1, 1}, {.window = 0}); }, "window");
  refused([] { ws::SplitTables(1, {1, 1}, {.size_min = 5, .size_max = 1}); }, "size range");
  refused([] { ws::SplitTables(1, {1, 1}, {.min_share = 0.5}); }, "min_share");
  refused(
      [] {
        ws::SplitTables(2, {1, 1}, {.core_shares = ws::CoreShares::per_class, .core_class = {0}});
      },
      "one class per core");
  refused([] { ws::SplitTables(1, {1, 1}, {}).bucket_of(-1); }, "size");
  refused([] { ws::SplitTables(2, {1, 1}, {}).update(0, timing(1, 1, {1}, {1})); }, "cores");
}

TEST(SplitTables, ProbesTheLargerSideAloneAndKeepsTheSplitWhenItIsCheaper) {
  ws::SplitOptions o = opts(1);
  o.try_alone = true;
  ws::SplitTables t(1, {300, 100}, o);      // peaks: the GPU 300 a second, the cores 100
  EXPECT_DOUBLE_EQ(t.gsplit(0), 0.75);      // the split first
  t.update(0, costed(75, 25, 1.0));         // balanced: 100 work in 1 s
  EXPECT_DOUBLE_EQ(t.gsplit(0), 1.0);       // then the GPU alone, once
  t.update(0, costed(100, 0, 100.0 / 75));  // alone it does 100 in 1.33 s
  EXPECT_NEAR(t.gsplit(0), 0.75, 1e-9);     // the split was cheaper
  EXPECT_NEAR(t.gsplit(10), 0.75, 1e-9);    // and its neighbours know it
}

TEST(SplitTables, GoesAloneWhereTheSidesSlowEachOtherDown) {
  ws::SplitOptions o = opts(1);
  o.try_alone = true;
  o.revisit = 3;
  ws::SplitTables t(1, {300, 100}, o);
  t.update(0, costed(75, 25, 1.2));  // beside each other both crawl: 100 in 1.2 s
  t.update(0, costed(100, 0, 1.0));  // the GPU alone: 100 in 1 s
  EXPECT_DOUBLE_EQ(t.gsplit(0), 1.0);
  t.update(0, costed(100, 0, 1.0));
  t.update(0, costed(100, 0, 1.0));
  EXPECT_LT(t.gsplit(0), 1.0);  // three regions alone: the split is tried again
  t.update(0, costed(75, 25, 1.2));
  EXPECT_DOUBLE_EQ(t.gsplit(0), 1.0);  // still dearer
}

TEST(SplitTables, ProbesTheCpuAloneWhenItTakesMostOfTheWork) {
  ws::SplitOptions o = opts(1);
  o.try_alone = true;
  ws::SplitTables t(1, {100, 300}, o);
  t.update(0, costed(25, 75, 1.0));
  EXPECT_DOUBLE_EQ(t.gsplit(0), 0.0);
  t.update(0, costed(0, 100, 0.9));
  EXPECT_DOUBLE_EQ(t.gsplit(0), 0.0);
}

// The cores alone cost at least 1/60 s per unit of work at their peak (1/75 with the slack
// for a measured peak); the split costs 1/100: that probe could not win, and is not run.
TEST(SplitTables, DoesNotProbeASideWhosePeakRateCannotBeatTheSplit) {
  ws::SplitOptions o = opts(1);
  o.try_alone = true;
  ws::SplitTables t(1, {40, 60}, o);
  EXPECT_DOUBLE_EQ(t.gsplit(0), 0.4);
  t.update(0, costed(40, 60, 1.0));        // 100 work in 1 s: the cores ran at their peak beside it
  EXPECT_NEAR(t.gsplit(0), 0.4, 1e-9);     // not 0: the cores alone would take 1.67 s at best
  ws::SplitTables fast(1, {400, 600}, o);  // the same machine with peaks ten times higher
  fast.update(0, costed(40, 60, 1.0));
  EXPECT_DOUBLE_EQ(fast.gsplit(0), 0.0);  // alone they could win: probed
}

// A prior that was wrong (the cores ran alone faster than their "peak"): the alone cost the
// tables measured is weighed as it is; only the probe was the prior's to skip.
TEST(SplitTables, AMeasuredAloneCostOutweighsThePeak) {
  ws::SplitOptions o = opts(1);
  o.try_alone = true;
  ws::SplitTables t(1, {40, 60}, o);
  t.update(0, costed(40, 60, 1.0));
  t.update(0, costed(0, 100, 0.5));  // the cores alone: 100 in 0.5 s, twice their "peak"
  EXPECT_DOUBLE_EQ(t.gsplit(0), 0.0);
}

TEST(SplitTables, ASplitFarFromTheBalancedOneIsNotHeldAgainstTheAlone) {
  ws::SplitOptions o = opts(1);
  o.try_alone = true;
  ws::SplitTables t(1, {99, 1}, o);
  EXPECT_DOUBLE_EQ(t.gsplit(0), 0.99);  // the prior's split, far from the truth
  ws::RegionTiming far;
  far.seconds = 1.0;
  far.gpu_work = 99;
  far.gpu_seconds = 99.0 / 75;  // the GPU does 75 a second
  far.core_work = {1};
  far.core_seconds = {1.0 / 25};  // a core 25
  ws::SplitTables u(1, {99, 1}, o);
  u.update(0, far);
  EXPECT_TRUE(u.buckets()[0].split_cost.empty());  // 0.99 is far from 0.75
  EXPECT_NEAR(u.gsplit(0), 0.75, 1e-9);            // so the balanced split runs, not a probe
}

using weft::split::test::simulate;

ws::SplitOptions simulated_options() {
  ws::SplitOptions o;
  o.buckets = 10;
  o.size_min = 0;
  o.size_max = 100;
  return o;
}

TEST(SplitTables, SettleNearTheBalanceOnANoisyMachineAndStaySplit) {
  // Beside each other, with the slowest of 4 noisy cores deciding the CPU's time (1.16 times
  // its mean), 0.002 + g 10/80 = 1.16 (0.001 + (1 - g) 10/36) at g = 0.72; splitting there
  // takes 0.092 s against 0.102 s for the GPU alone.
  double converge_sum = 0;
  for (unsigned seed = 1; seed <= 20; ++seed) {
    ws::SplitTables t(4, {300, 10}, simulated_options());
    const std::vector<double> used = simulate(t, 80, seed, 20);
    const double final_split = t.gsplit(5);
    EXPECT_NEAR(final_split, 0.72, 0.05) << "seed " << seed;
    const auto alone_late = std::count(used.begin() + 5, used.end(), 1.0);
    // An unlucky early sample of the split's cost may send a region or two alone; no more.
    EXPECT_LE(alone_late, 2) << "seed " << seed << " kept going alone after its probe";
    std::size_t settled = used.size();
    while (settled > 0 && std::abs(used[settled - 1] - final_split) <= 0.02) --settled;
    converge_sum += static_cast<double>(settled + 1);
  }
  // Regions until the split stays within 2% of the final: the cold region, the probe alone and
  // the rates' noise (the split wanders by about 0.03) bound it; the mean guards against a
  // change that makes it flap.
  EXPECT_LE(converge_sum / 20, 10.0);
}

TEST(SplitTables, GoAloneOnAMachineWhereSplittingCostsMore) {
  // The GPU beside the cores runs at half its alone rate: the balanced split (0.58) takes
  // 0.118 s, the GPU alone 0.102 s.
  for (unsigned seed = 1; seed <= 20; ++seed) {
    ws::SplitTables t(4, {300, 10}, simulated_options());
    const std::vector<double> used = simulate(t, 50, seed, 30);
    const auto alone_late = std::count(used.begin() + 10, used.end(), 1.0);
    EXPECT_GE(alone_late, 17) << "seed " << seed;  // 20 regions: alone but for a revisit or so
  }
}
