// The linear cost models: least-squares fit, RLS refinement with forgetting, bad input.
#include "weft/graph/cost_model.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "weft/error.hpp"
#include "weft/graph/cost_models.hpp"
#include "weft/graph/model_store.hpp"

using weft::InvalidArgument;
using weft::graph::CostSample;
using weft::graph::LinearCostModel;

namespace {

std::vector<CostSample> line(double a, double b, std::initializer_list<double> sizes) {
  std::vector<CostSample> v;
  for (double x : sizes) v.push_back({x, a + b * x});
  return v;
}

}  // namespace

TEST(LinearCostModel, FitRecoversAnExactLine) {
  // 5 us of launch cost and 0.4 ns per element, over the sizes the seed's pipelines use.
  const auto s = line(5e-6, 0.4e-9, {1e5, 1e6, 1e7, 3.2e7, 3.2e8});
  const auto m = LinearCostModel::fit(s);
  EXPECT_NEAR(m.intercept(), 5e-6, 1e-9);
  EXPECT_NEAR(m.slope(), 0.4e-9, 1e-15);
  EXPECT_NEAR(m.predict(1e8), 5e-6 + 0.04, 1e-9);
  EXPECT_EQ(m.observations(), 5u);
  EXPECT_LT(m.median_relative_error(s), 1e-6);
}

TEST(LinearCostModel, FitIsLeastSquaresUnderNoise) {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> noise(0.0, 1e-4);
  std::vector<CostSample> s;
  for (int i = 0; i < 400; ++i) {
    const double x = 1e6 * (1 + i % 20);
    s.push_back({x, 2e-3 + 1e-9 * x + noise(rng)});
  }
  const auto m = LinearCostModel::fit(s);
  EXPECT_NEAR(m.intercept(), 2e-3, 3e-5);
  EXPECT_NEAR(m.slope(), 1e-9, 3e-12);
  // The least-squares property: the residuals sum to zero and are uncorrelated with size.
  double sum = 0, dot = 0;
  for (const auto& c : s) {
    const double r = c.seconds - (m.intercept() + m.slope() * c.size);
    sum += r;
    dot += r * c.size;
  }
  EXPECT_NEAR(sum, 0.0, 1e-12);
  EXPECT_NEAR(dot / 1e7, 0.0, 1e-9);
}

TEST(LinearCostModel, UpdatesWithoutForgettingContinueTheFit) {
  // RLS started from the fit of the first samples, fed the rest, ends where the batch fit of
  // all samples ends (lambda = 1 makes them the same estimator) as long as no error is large
  // enough to be clipped: 0.1% noise against a clip at 2 spreads of at least 2%.
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> size(1e7, 1e8);
  std::normal_distribution<double> noise(0.0, 0.001);
  std::vector<CostSample> all;
  for (int i = 0; i < 60; ++i) {
    const double x = size(rng);
    all.push_back({x, (1e-3 + 2e-9 * x) * (1 + noise(rng))});
  }
  auto online = LinearCostModel::fit(std::span(all).first(10), 1.0);
  for (std::size_t i = 10; i < all.size(); ++i) online.update(all[i].size, all[i].seconds);
  const auto batch = LinearCostModel::fit(all, 1.0);
  EXPECT_NEAR(online.intercept(), batch.intercept(), 1e-9);
  EXPECT_NEAR(online.slope(), batch.slope(), 1e-15);
  EXPECT_EQ(online.observations(), all.size());
}

// Measured times have a long upper tail: here 10% of the runs take twice as long. Least
// squares follows the mean (+10%); the clipped RLS step stays near the typical run, which is what
// the median relative error (the figure) counts.
TEST(LinearCostModel, ASlowRunNowAndThenDoesNotPullTheModelUp) {
  std::mt19937_64 rng(5);
  std::normal_distribution<double> noise(0.0, 0.03);
  std::uniform_int_distribution<int> tenth(0, 9);
  auto measure = [&](double x) {
    const double typical = 1e-3 + 2e-9 * x;
    return typical * (1 + noise(rng)) * (tenth(rng) == 0 ? 2.0 : 1.0);
  };
  std::vector<CostSample> calibration, later;
  for (double x : {1e7, 1e8, 1e7, 1e8}) calibration.push_back({x, 1e-3 + 2e-9 * x});
  auto robust = LinearCostModel::fit(calibration);
  for (int i = 0; i < 400; ++i) {
    const double x = i % 2 == 0 ? 1e7 : 1e8;
    later.push_back({x, measure(x)});
    robust.update(x, later.back().seconds);
  }
  const auto least_squares = LinearCostModel::fit(later);
  for (double x : {1e7, 1e8}) {
    const double typical = 1e-3 + 2e-9 * x;
    EXPECT_GT(least_squares.predict(x) / typical, 1.07) << "the tail moves the mean by ~10%";
    EXPECT_NEAR(robust.predict(x) / typical, 1.0, 0.04) << x;
  }
  EXPECT_LT(robust.median_relative_error(later), least_squares.median_relative_error(later));
}

TEST(LinearCostModel, ForgettingFollowsADriftingMachine) {
  // Calibrated at 1 ns per element; then the machine slows to 3 ns (thermal throttling, a
  // neighbour on the GPU). With forgetting the model follows within 150 runs; without it,
  // the old data keeps it far off.
  std::vector<CostSample> calib = line(1e-4, 1e-9, {1e6, 2e6, 4e6, 8e6, 1.6e7, 3.2e7});
  auto forgetting = LinearCostModel::fit(calib, 0.95);
  std::vector<CostSample> heavy;
  for (int i = 0; i < 2000; ++i) heavy.push_back({1e6 * (1 + i % 32), 0});
  for (auto& h : heavy) h.seconds = 1e-4 + 1e-9 * h.size;
  auto stubborn = LinearCostModel::fit(heavy, 1.0);  // 2000 runs of history, never forgotten
  auto forgets = LinearCostModel::fit(heavy, 0.95);
  for (int i = 0; i < 150; ++i) {
    const double x = 1e6 * (1 + (i * 7) % 32);
    stubborn.update(x, 1e-4 + 3e-9 * x);
    forgets.update(x, 1e-4 + 3e-9 * x);
    forgetting.update(x, 1e-4 + 3e-9 * x);
  }
  // Within 5%: after 150 updates at 0.95 the fit's 2000 runs still weigh ~1 run's worth.
  EXPECT_NEAR(forgets.slope(), 3e-9, 0.15e-9);
  EXPECT_NEAR(forgetting.slope(), 3e-9, 0.15e-9);
  EXPECT_LT(stubborn.slope(), 1.3e-9) << "without forgetting 2000 old runs outweigh 150 new ones";
}

TEST(LinearCostModel, OneSizeOnlyDoesNotWindTheCovarianceUp) {
  // Forgetting with every measurement at one size excites only one direction; the covariance
  // of the other must not grow without bound (an odd measurement would then throw the slope
  // anywhere).
  auto m = LinearCostModel::fit(line(1e-4, 1e-9, {1e6, 1e7}), 0.9);
  for (int i = 0; i < 5000; ++i) m.update(1e6, 1e-4 + 1e-9 * 1e6);
  m.update(1e7, 1e-4 + 1e-9 * 1e7 + 1e-4);  // one measurement 1% off at another size
  EXPECT_TRUE(std::isfinite(m.slope()));
  EXPECT_NEAR(m.predict(5e6), 1e-4 + 5e-3, 5e-4);
}

TEST(LinearCostModel, AnUninformedModelLearnsFromItsFirstMeasurements) {
  LinearCostModel m(0.0, 0.0);
  m.update(1e6, 1e-4 + 1e-3);
  m.update(1e7, 1e-4 + 1e-2);
  m.update(4e6, 1e-4 + 4e-3);
  EXPECT_NEAR(m.predict(2e7), 1e-4 + 2e-2, 2e-4);
}

TEST(LinearCostModel, PredictionsAreNeverNegative) {
  const auto m = LinearCostModel::fit(line(-1e-3, 1e-9, {1e6, 1e7}));
  EXPECT_EQ(m.predict(0), 0.0);
  EXPECT_GT(m.predict(1e7), 0.0);
}

TEST(LinearCostModel, MedianRelativeError) {
  const LinearCostModel m(0.0, 1.0, 1.0);
  const std::vector<CostSample> s = {{1, 2}, {1, 1}, {1, 0.5}, {1, 0}};  // errors 0.5, 0, 1
  EXPECT_DOUBLE_EQ(m.median_relative_error(s), 0.5);
  EXPECT_DOUBLE_EQ(m.median_relative_error({}), 0.0);
  const std::vector<CostSample> even = {{1, 2}, {1, 1}};  // errors 0.5, 0
  EXPECT_DOUBLE_EQ(m.median_relative_error(even), 0.25);
}

TEST(LinearCostModel, BadInputIsRejectedWithAReason) {
  EXPECT_THROW(LinearCostModel::fit(line(0, 1, {1})), InvalidArgument);
  EXPECT_THROW(LinearCostModel::fit(line(0, 1, {2, 2, 2})), InvalidArgument);
  EXPECT_THROW(LinearCostModel::fit(line(0, 1, {1, 2}), 0.0), InvalidArgument);
  EXPECT_THROW(LinearCostModel::fit(line(0, 1, {1, 2}), 1.5), InvalidArgument);
  const std::vector<CostSample> negative = {{1, 1}, {-2, 1}};
  EXPECT_THROW(LinearCostModel::fit(negative), InvalidArgument);
  const std::vector<CostSample> nan = {{1, 1}, {2, std::nan("")}};
  EXPECT_THROW(LinearCostModel::fit(nan), InvalidArgument);
  EXPECT_THROW(LinearCostModel(std::nan(""), 0), InvalidArgument);
  LinearCostModel m(1, 1);
  EXPECT_THROW(m.update(-1, 1), InvalidArgument);
  EXPECT_THROW(m.update(1, INFINITY), InvalidArgument);
  EXPECT_EQ(m.observations(), 0u);
  try {
    LinearCostModel::fit(line(0, 1, {2, 2}));
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("distinct sizes"), std::string::npos) << e.what();
  }
}

namespace {

TEST(CostModels, FitAfterTwoSizesThenRefineAndSurviveTheStore) {
  weft::graph::CostModels m;
  EXPECT_THROW((void)m.predict("gpu", "rank", 1e6), weft::InvalidState);
  m.observe("gpu", "rank", 1e6, 0.001);
  m.observe("gpu", "rank", 1e6, 0.001);
  EXPECT_EQ(m.find("gpu", "rank"), nullptr);  // one size: no line yet
  EXPECT_EQ(m.pending("gpu", "rank"), 2u);
  m.observe("gpu", "rank", 3e6, 0.003);
  ASSERT_NE(m.find("gpu", "rank"), nullptr);
  EXPECT_EQ(m.pending("gpu", "rank"), 0u);
  EXPECT_NEAR(m.predict("gpu", "rank", 2e6), 0.002, 1e-9);
  EXPECT_THROW(m.observe("gpu", "rank", -1, 0.1), weft::InvalidArgument);
  EXPECT_EQ(m.list().size(), 1u);
  if (!weft::graph::ModelStore::available()) GTEST_SKIP() << "built without SQLite";
  const std::string path = ::testing::TempDir() + "cost_models_test.db";
  std::remove(path.c_str());
  {
    weft::graph::ModelStore store(path);
    m.save(store, "node-a");
  }
  weft::graph::ModelStore store(path);
  weft::graph::CostModels back;
  EXPECT_EQ(back.load(store, "node-b"), 0u);
  EXPECT_EQ(back.load(store, "node-a"), 1u);
  EXPECT_NEAR(back.predict("gpu", "rank", 2e6), 0.002, 1e-9);
  const auto stored = store.get({"node-a", "gpu", "rank"});
  ASSERT_TRUE(stored.has_value());
  EXPECT_LT(stored->fit_error, 1e-6);  // the line goes through its measurements
}

}  // namespace
