// The splitter's applications (apps/split/) on whatever GPU side is here: CUDA device 0 where
// there is one (the GPU parts' copies, kernels and cuBLAS calls), else the emulated device. Every
// split, the learned one and both ends, gives the reference's result.
#include <gtest/gtest.h>

#include <memory>

#include "split_apps.hpp"
#include "weft/cpu/executor.hpp"
#include "weft/split/splitter.hpp"

namespace ws = weft::split;

namespace {

void check_every_split(apps::split::SplitApp& app) {
  weft::cpu::ExecutorOptions o;
  o.workers = 2;
  o.pinning = weft::cpu::Pinning::none;
  weft::cpu::Executor ex(o);
  auto gpu = ws::GpuSide::best_available();
  ws::Splitter s(ex, *gpu, app.name(), {1, 1}, {.min_share = 0});
  for (int i = 0; i < 3; ++i) {
    app.clear_output();
    s.run(app.work(), app.gpu(), app.cpu());
    EXPECT_TRUE(app.verify()) << app.name() << " adaptive region " << i << " on "
                              << gpu->description();
  }
  for (double g : {0.0, 1.0, 0.37}) {
    app.clear_output();
    s.run_fixed(app.work(), g, app.gpu(), app.cpu());
    EXPECT_TRUE(app.verify()) << app.name() << " at GPU share " << g;
  }
  app.clear_output();
  EXPECT_FALSE(app.verify()) << "a cleared output passes the check";
  if (!gpu->is_emulated()) {
    EXPECT_GT(app.gpu_local_rate(0), 0);
  }
}

}  // namespace

TEST(SplitApps, GemmRowsMatchesTheReferenceAtEverySplit) {
  // Rows not a multiple of the GPU's chunk, nor of the grain.
  auto app = apps::split::make_gemm_rows(2500, 96, 80, 1);
  check_every_split(*app);
}

TEST(SplitApps, TriadMatchesTheReferenceAtEverySplit) {
  auto app = apps::split::make_triad((5 << 20) + 77, 2);  // more than one chunk of the GPU's
  check_every_split(*app);
}

TEST(SplitApps, SpmvMatchesTheReferenceAtEverySplit) {
  auto app = apps::split::make_spmv(30000, 300, 3);
  check_every_split(*app);
}

TEST(SplitApps, BadSizesAreRefused) {
  EXPECT_THROW(apps::split::make_gemm_rows(0, 1, 1, 1), std::invalid_argument);
  EXPECT_THROW(apps::split::make_triad(0, 1), std::invalid_argument);
  EXPECT_THROW(apps::split::make_spmv(0, 1, 1), std::invalid_argument);
}

TEST(SplitApps, HplLuPassesHplsResidualCheckAtEverySplit) {
  weft::cpu::ExecutorOptions o;
  o.workers = 2;
  o.pinning = weft::cpu::Pinning::none;
  weft::cpu::Executor ex(o);
  auto gpu = ws::GpuSide::best_available();
  // n not a multiple of nb (the last panel is narrower), and more than one GPU chunk of columns.
  std::unique_ptr<apps::split::HplLu> made;
  try {
    made = std::make_unique<apps::split::HplLu>(1100, 96, 5);
  } catch (const std::runtime_error& e) {
    GTEST_SKIP() << e.what();  // built without CBLAS and LAPACKE
  }
  apps::split::HplLu& lu = *made;
  ws::Splitter probe(ex, *gpu, "hpl_lu_probe", {1, 1});
  const ws::PeakRates prior = lu.peak_rates(probe, *gpu);
  EXPECT_GT(prior.gpu, 0);
  EXPECT_GT(prior.cpu, 0);
  ws::Splitter s(ex, *gpu, "hpl_lu", prior, {.min_share = 0});
  for (double g : {-1.0, -1.0, 0.0, 1.0, 0.45}) {
    lu.reset();
    std::vector<ws::RegionReport> regions;
    EXPECT_GT(lu.factor(s, *gpu, g, &regions), 0);
    EXPECT_EQ(regions.size(), 11u);  // one update per panel but the last
    const double residual = lu.scaled_residual();
    EXPECT_LT(residual, 16) << "GPU share " << g << " on " << gpu->description();
  }
  // One wrong entry of U fails the check: it is not vacuous.
  lu.reset();
  lu.factor(s, *gpu, 0.5);
  lu.matrix()[600 + 700 * 1100] += 1e-6;
  EXPECT_GT(lu.scaled_residual(), 16);
  lu.reset();
  EXPECT_THROW((void)lu.scaled_residual(), std::logic_error);  // nothing factored
}

TEST(SplitApps, HplLuRefusesBadSizes) {
  EXPECT_THROW(apps::split::HplLu(0, 1, 1), std::invalid_argument);
  EXPECT_THROW(apps::split::HplLu(10, 11, 1), std::invalid_argument);
}
