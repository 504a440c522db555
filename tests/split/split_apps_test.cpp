// The splitter's applications (apps/split/) on whatever GPU side is here: CUDA device 0 where
// there is one (the GPU parts' copies, kernels and cuBLAS calls), else the emulated device. Every
// split, the learned one and both ends, gives the reference's result.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

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

// A part given a range outside its items refuses it, naming it, where it would write past
// its arrays.
TEST(SplitApps, APartRefusesARangeOutsideItsItems) {
  const auto triad = apps::split::make_triad(1000, 1);
  const ws::GpuContext emulated{nullptr, -1, true};
  for (const ws::Range bad : {ws::Range{0, 1001}, ws::Range{-1, 10}, ws::Range{20, 10}}) {
    EXPECT_THROW(triad->cpu_part(bad, 0), std::out_of_range);
    EXPECT_THROW(triad->gpu_part(bad, emulated), std::out_of_range);
  }
  try {
    apps::split::make_gemm_rows(8, 4, 4, 1)->cpu_part({4, 9}, 0);
    ADD_FAILURE() << "no exception";
  } catch (const std::out_of_range& e) {
    EXPECT_NE(std::string(e.what()).find("gemm_rows: range [4, 9) outside its 8 items"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(apps::split::make_spmv(50, 5, 1)->cpu_part({0, 51}, 0), std::out_of_range);
  EXPECT_NO_THROW(triad->cpu_part({0, 1000}, 0));
}

class SplitHplLu : public ::testing::Test {
 protected:
  void SetUp() override {
    weft::cpu::ExecutorOptions o;
    o.workers = 2;
    o.pinning = weft::cpu::Pinning::none;
    ex_ = std::make_unique<weft::cpu::Executor>(o);
    gpu_ = ws::GpuSide::best_available();
    // n not a multiple of nb (the last panel is narrower), and more than one GPU chunk of
    // columns.
    try {
      lu_ = std::make_unique<apps::split::HplLu>(1100, 96, 5);
    } catch (const std::runtime_error& e) {
      GTEST_SKIP() << e.what();  // built without CBLAS and LAPACKE
    }
  }

  // Factors at the learned split (twice), at both ends and at 0.45; each passes HPL's check.
  void factor_at_every_split(std::size_t regions_per_factorisation) {
    ws::Splitter probe(*ex_, *gpu_, "hpl_lu_probe", {1, 1});
    const ws::PeakRates prior = lu_->peak_rates(probe, *gpu_);
    EXPECT_GT(prior.gpu, 0);
    EXPECT_GT(prior.cpu, 0);
    ws::Splitter s(*ex_, *gpu_, "hpl_lu", prior, {.min_share = 0});
    for (double g : {-1.0, -1.0, 0.0, 1.0, 0.45}) {
      lu_->reset();
      std::vector<ws::RegionReport> regions;
      EXPECT_GT(lu_->factor(s, *gpu_, g, &regions), 0);
      EXPECT_EQ(regions.size(), regions_per_factorisation);
      EXPECT_LT(lu_->scaled_residual(), 16) << "GPU share " << g << " on " << gpu_->description()
                                            << (lu_->look_ahead() ? " with look-ahead" : "");
    }
  }

  std::unique_ptr<weft::cpu::Executor> ex_;
  std::unique_ptr<ws::GpuSide> gpu_;
  std::unique_ptr<apps::split::HplLu> lu_;
};

TEST_F(SplitHplLu, LooksAheadByDefault) { EXPECT_TRUE(lu_->look_ahead()); }

TEST_F(SplitHplLu, WithoutLookAheadPassesHplsResidualCheckAtEverySplit) {
  lu_->set_look_ahead(false);
  factor_at_every_split(11);  // one update per panel but the last
  // One wrong entry of U fails the check: it is not vacuous.
  ws::Splitter s(*ex_, *gpu_, "hpl_lu", {1, 1});
  lu_->reset();
  lu_->factor(s, *gpu_, 0.5);
  lu_->matrix()[600 + 700 * 1100] += 1e-6;
  EXPECT_GT(lu_->scaled_residual(), 16);
  lu_->reset();
  EXPECT_THROW((void)lu_->scaled_residual(), std::logic_error);  // nothing factored
}

TEST_F(SplitHplLu, WithLookAheadPassesHplsResidualCheckAtEverySplit) {
  lu_->set_look_ahead(true);
  // The last panel's columns (44) are the look-ahead's after the panel before, whose region is
  // then empty: 10 regions.
  factor_at_every_split(10);
}

TEST_F(SplitHplLu, LookAheadGivesTheSameFactors) {
  ws::Splitter s(*ex_, *gpu_, "hpl_lu", {1, 1});
  lu_->set_look_ahead(false);
  lu_->factor(s, *gpu_, 0.45);
  const std::vector<double> without(lu_->matrix(), lu_->matrix() + 1100 * 1100);
  lu_->reset();
  lu_->set_look_ahead(true);
  lu_->factor(s, *gpu_, 0.45);
  double largest = 0;
  for (std::size_t i = 0; i < without.size(); ++i) {
    largest = std::max(largest, std::abs(lu_->matrix()[i] - without[i]));
  }
  // The same operations on each column, in the same order; only the blocking of the BLAS calls
  // may differ, by rounding.
  EXPECT_LT(largest, 1e-9);
  // The regions hold the columns after the next panel: fewer than without look-ahead.
  EXPECT_EQ(lu_->update_work(0).items, 1100 - 96 - 96);
  EXPECT_EQ(lu_->update_work(960).items, 0);
  lu_->set_look_ahead(false);
  EXPECT_EQ(lu_->update_work(0).items, 1100 - 96);
}

TEST(SplitApps, HplLuRefusesBadSizes) {
  EXPECT_THROW(apps::split::HplLu(0, 1, 1), std::invalid_argument);
  EXPECT_THROW(apps::split::HplLu(10, 11, 1), std::invalid_argument);
  // One panel and nothing right of it: no update whose rates could be measured.
  weft::cpu::ExecutorOptions o;
  o.workers = 2;
  o.pinning = weft::cpu::Pinning::none;
  weft::cpu::Executor ex(o);
  auto gpu = ws::GpuSide::emulated();
  ws::Splitter s(ex, *gpu, "lu", {1, 1});
  apps::split::HplLu one_panel(64, 64, 1);
  try {
    (void)one_panel.peak_rates(s, *gpu);
    ADD_FAILURE() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("n = 64 with nb = 64 leaves no trailing update"),
              std::string::npos)
        << e.what();
  }
}
