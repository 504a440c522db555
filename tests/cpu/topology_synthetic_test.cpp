// Cache sharing on a machine hwloc describes synthetically (ctest runs this binary with
// HWLOC_SYNTHETIC="pack:2 l3:1 l2:2 core:2 pu:1": two packages, each one L3 over two L2s of two
// cores): units 0-3 share package 0's L3, units 4-7 package 1's. The splitter's seed core
// classes follow from it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "weft/cpu/executor.hpp"
#include "weft/cpu/topology.hpp"
#include "weft/split/splitter.hpp"

namespace {

bool synthetic() {
  const char* s = std::getenv("HWLOC_SYNTHETIC");
  return s != nullptr && std::string(s) == "pack:2 l3:1 l2:2 core:2 pu:1" &&
         weft::cpu::describe_cpu_topology().processing_units == 8;
}

#define REQUIRE_SYNTHETIC() \
  if (!synthetic()) GTEST_SKIP() << "runs under ctest's HWLOC_SYNTHETIC, with hwloc only"

const std::vector<std::size_t> kAll = {0, 1, 2, 3, 4, 5, 6, 7};

// An executor of `workers` workers bound to units 0, 1, ... (worker i on unit i).
std::unique_ptr<weft::cpu::Executor> bound_executor(std::size_t workers) {
  weft::cpu::ExecutorOptions o;
  o.workers = workers;
  o.pinning = weft::cpu::Pinning::always;
  return std::make_unique<weft::cpu::Executor>(o);
}

TEST(Topology, AUnitSharesItsOutermostCacheWithTheUnitsUnderIt) {
  REQUIRE_SYNTHETIC();
  EXPECT_EQ(weft::cpu::shares_cache_with(0, kAll),
            (std::vector<bool>{true, true, true, true, false, false, false, false}));
  EXPECT_EQ(weft::cpu::shares_cache_with(6, kAll),
            (std::vector<bool>{false, false, false, false, true, true, true, true}));
}

TEST(Topology, AUnitThatIsNotThereSharesNothing) {
  REQUIRE_SYNTHETIC();
  EXPECT_EQ(weft::cpu::shares_cache_with(99, {0, 4}), (std::vector<bool>{false, false}));
  EXPECT_EQ(weft::cpu::shares_cache_with(0, {1, 99}), (std::vector<bool>{true, false}));
}

// Seven bound workers on units 0-6, the GPU fed from unit 7: the workers of package 1 share its
// L3 (class 0), those of package 0 do not (class 1).
TEST(SeedCoreClasses, WorkersBesideTheFeedingUnitAreAClassOfTheirOwn) {
  REQUIRE_SYNTHETIC();
  const auto ex = bound_executor(7);
  ASSERT_EQ(ex->pinned_units(), (std::vector<std::size_t>{0, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(weft::split::seed_core_classes(*ex, 7),
            (std::vector<std::size_t>{1, 1, 1, 1, 0, 0, 0}));
}

// Workers all on package 0's units, fed from unit 3: all alike, one class.
TEST(SeedCoreClasses, WorkersAllAlikeAreOneClass) {
  REQUIRE_SYNTHETIC();
  const auto ex = bound_executor(3);
  ASSERT_EQ(ex->pinned_units(), (std::vector<std::size_t>{0, 1, 2}));
  EXPECT_EQ(weft::split::seed_core_classes(*ex, 3), (std::vector<std::size_t>{0, 0, 0}));
  EXPECT_EQ(weft::split::seed_core_classes(*ex, 5), (std::vector<std::size_t>{0, 0, 0}));
}

TEST(SeedCoreClasses, UnboundWorkersAreOneClass) {
  weft::cpu::ExecutorOptions o;
  o.workers = 3;
  o.pinning = weft::cpu::Pinning::none;
  weft::cpu::Executor ex(o);
  EXPECT_EQ(weft::split::seed_core_classes(ex, 0), (std::vector<std::size_t>{0, 0, 0}));
}

}  // namespace
