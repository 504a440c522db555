// The linear cost models: least-squares fit, RLS refinement with forgetting, bad input.
#include "weft/graph/mapping/cost_model.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "weft/error.hpp"
#include "weft/graph/mapping/cost_models.hpp"
#include "weft/graph/mapping/model_store.hpp"

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
  // 5 us of launch cost and 0.4 ns per element, over the sizes the factor pipelines use.
  const auto s = line(5e-6, 0.4e-9, {1e5, 1e6, 1e7, 3.2e7, 3.2e8});
  const auto m = LinearCostModel::fit(s);
  EXPECT_NEAR(m.intercept(), 5e-6, 1e-9);
  EXPECT_NEAR(m.slope(), 0.4e-9, 1e-15);
  EXPECT_NEAR(m.predict(1e8), 5e-6 + 0.04, 1e-9);
  EXPECT_EQ(m.observations(), 5u);
  EXPECT_LT(m.median_relative_error(s), 1e-6);
}

// Finite samples whose fit overflows (a slope past the double's range) are refused, where the
// model came out NaN and predicted every node free.
TEST(LinearCostModel, AFitThatOverflowsIsRefused) {
  const std::vector<CostSample> huge{{1.0, 0.0}, {1.5, 1.7e308}};
  EXPECT_THROW((void)LinearCostModel::fit(huge), weft::InvalidArgument);
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
// the median relative error (the figure `weft bench graph` reports per kernel) counts.
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
  // Calibrated at 1 ns per element; then the machine slows by 3% (a neighbour, a warmer chip):
  // inside the clipping band (2 spreads of at least 2%), so no reset happens and only forgetting
  // lets the model follow. With forgetting it follows within 150 runs; without it, the old data
  // keeps it off.
  constexpr double kSlower = 1.03;
  std::vector<CostSample> calib = line(1e-4, 1e-9, {1e6, 2e6, 4e6, 8e6, 1.6e7, 3.2e7});
  auto forgetting = LinearCostModel::fit(calib, 0.95);
  std::vector<CostSample> heavy;
  for (int i = 0; i < 2000; ++i) heavy.push_back({1e6 * (1 + i % 32), 0});
  for (auto& h : heavy) h.seconds = 1e-4 + 1e-9 * h.size;
  auto stubborn = LinearCostModel::fit(heavy, 1.0);  // 2000 runs of history, never forgotten
  auto forgets = LinearCostModel::fit(heavy, 0.95);
  for (int i = 0; i < 150; ++i) {
    const double x = 1e6 * (1 + (i * 7) % 32);
    for (auto* m : {&stubborn, &forgets, &forgetting}) {
      m->update(x, (1e-4 + 1e-9 * x) * kSlower);
      ASSERT_EQ(m->one_sided(), 0) << "a 3% step is inside the clip: no run beyond it";
    }
  }
  const double now = (1e-4 + 1e-9 * 1.6e7) * kSlower;
  // Within 0.5%: after 150 updates at 0.95 the fit's 2000 runs still weigh ~1 run's worth.
  EXPECT_NEAR(forgets.predict(1.6e7) / now, 1.0, 0.005);
  EXPECT_NEAR(forgetting.predict(1.6e7) / now, 1.0, 0.005);
  EXPECT_LT(stubborn.predict(1.6e7) / now, 0.98) << "2000 old runs outweigh 150 new ones";
}

// A model that is plainly wrong (a CPU kernel calibrated at 137 ms at 768 MB that then runs in
// 74 ms, as happens when calibration saw the kernel beside other work): clipped steps alone would
// take tens of runs; kShiftRun runs in a row beyond the clip reset the covariance and the model is
// right after them, at the size it was wrong at, and not moved at the size it was right at.
// Whatever the forgetting factor.
TEST(LinearCostModel, AWrongModelIsRightAfterAFewRuns) {
  std::mt19937_64 rng(3);
  std::normal_distribution<double> noise(0.0, 0.02);
  const double small = 7.7e7, large = 7.68e8;
  auto typical = [](double x) { return 1e-4 + 9.7e-11 * x; };  // 7.6 / 74.6 ms
  std::vector<CostSample> calib;
  for (int i = 0; i < 4; ++i) calib.push_back({small, typical(small) * (1 + noise(rng))});
  calib.push_back({large, 0.137});
  calib.push_back({large, 0.136});
  for (double lambda : {0.98, 1.0}) {
    auto m = LinearCostModel::fit(calib, lambda);
    const double small_before = m.predict(small);
    ASSERT_GT(m.predict(large) / typical(large), 1.7);
    for (int i = 0; i < LinearCostModel::kShiftRun; ++i) {
      m.update(large, typical(large) * (1 + noise(rng)));
    }
    EXPECT_NEAR(m.predict(large) / typical(large), 1.0, 0.05) << "lambda " << lambda;
    EXPECT_NEAR(m.predict(small) / small_before, 1.0, 0.05) << "lambda " << lambda;
    EXPECT_EQ(m.one_sided(), 0);
    // And it stays right: the next runs are inside the clip again.
    for (int i = 0; i < 20; ++i) m.update(large, typical(large) * (1 + noise(rng)));
    EXPECT_NEAR(m.predict(large) / typical(large), 1.0, 0.03) << "lambda " << lambda;
  }
}

// Runs beyond the clip that alternate sides, or are broken by a run inside it, are the tail,
// not a wrong model: the count starts again and nothing is reset.
TEST(LinearCostModel, OnlyARunOfOneSidedErrorsResets) {
  auto m = LinearCostModel::fit(line(1e-4, 1e-9, {1e6, 1e7, 1e6, 1e7}));
  const double x = 1e7, right = 1e-4 + 1e-9 * x;
  m.update(x, 2 * right);
  EXPECT_EQ(m.one_sided(), 1);
  m.update(x, 2 * right);
  EXPECT_EQ(m.one_sided(), 2);
  m.update(x, 0.5 * right);
  EXPECT_EQ(m.one_sided(), -1) << "the other side starts a new count";
  m.update(x, 2 * right);
  m.update(x, 2 * right);
  m.update(x, m.predict(x));
  EXPECT_EQ(m.one_sided(), 0) << "a run inside the clip ends the count";
  EXPECT_LT(m.predict(x) / right, 1.3) << "five clipped steps, no reset";
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

// A model's state (what the store keeps) comes back whole, and a state no model can be in is
// refused naming what is wrong.
TEST(LinearCostModel, StateRoundTripsAndBadStatesAreRefused) {
  auto m = LinearCostModel::fit(line(1e-4, 1e-9, {1e6, 1e7, 1e6, 1e7}));
  m.update(1e7, 1.0);  // far beyond the clip: one run of a possible reset
  const auto back = LinearCostModel::from_state(m.state());
  EXPECT_EQ(back.one_sided(), 1);
  EXPECT_DOUBLE_EQ(back.spread(), m.spread());
  EXPECT_DOUBLE_EQ(back.predict(5e6), m.predict(5e6));
  auto refused = [&](auto edit, const char* says) {
    LinearCostModel::State s = m.state();
    edit(s);
    try {
      (void)LinearCostModel::from_state(s);
      ADD_FAILURE() << "accepted: " << says;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  refused([](auto& s) { s.slope = std::nan(""); }, "non-finite");
  refused([](auto& s) { s.p01 = 1e6 * (s.p00 + s.p11); }, "positive semi-definite");
  refused([](auto& s) { s.spread = -0.1; }, "spread");
  refused([](auto& s) { s.one_sided = LinearCostModel::kShiftRun; }, "one_sided");
  refused([](auto& s) { s.one_sided = -LinearCostModel::kShiftRun; }, "one_sided");
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

// A CPU kernel beside copies (the copy engines take host memory bandwidth from it) is learnt
// apart from the kernel alone, and predicted between the two by the share of its time with
// copies in flight.
TEST(CostModels, ACpuKernelBesideCopiesHasAModelOfItsOwn) {
  weft::graph::CostModels m;
  const std::string beside = std::string("delta") + weft::graph::kBesideCopies;
  // Alone: 1 ns per byte.
  m.observe_cpu("delta", 1e6, 1.0e-3, 0.0);
  m.observe_cpu("delta", 2e6, 2.0e-3, 0.05);
  ASSERT_NE(m.find("cpu", "delta"), nullptr);
  // Beside copies throughout: 1.2 ns per byte; these runs leave the kernel's own model alone.
  // The first three (one of them slowed 5x by something else) seed the model beside copies as
  // the own line times their median slowdown, at every size, though two were at one size.
  m.observe_cpu("delta", 1e6, 1.2e-3, 1.0);
  EXPECT_EQ(m.pending("cpu", beside), 1u);
  m.observe_cpu("delta", 1e6, 6.0e-3, 1.0);
  EXPECT_EQ(m.pending("cpu", beside), 2u);
  m.observe_cpu("delta", 2e6, 2.32e-3, 0.8);  // 0.8 of its time beside copies: 2.4 scaled
  ASSERT_NE(m.find("cpu", beside), nullptr);
  EXPECT_EQ(m.pending("cpu", beside), 0u);
  EXPECT_NEAR(m.predict_cpu("delta", 8e6, 1.0), 9.6e-3, 1e-12);
  EXPECT_NEAR(m.predict("cpu", "delta", 1e6), 1.0e-3, 1e-12);
  EXPECT_NEAR(m.predict_cpu("delta", 1e6, 0.0), 1.0e-3, 1e-12);
  EXPECT_NEAR(m.predict_cpu("delta", 1e6, 1.0), 1.2e-3, 1e-12);
  EXPECT_NEAR(m.predict_cpu("delta", 1e6, 0.5), 1.1e-3, 1e-12);
  // Half the time beside copies at 1.1 us per 1000 bytes is the whole overlap's 1.2: the
  // beside-copies model, exact already, does not move.
  m.observe_cpu("delta", 1e6, 1.1e-3, 0.5);
  EXPECT_NEAR(m.predict_cpu("delta", 1e6, 1.0), 1.2e-3, 1e-12);
  // A run between the bands teaches neither model, however far off it is.
  m.observe_cpu("delta", 1e6, 10.0, 0.3);
  EXPECT_NEAR(m.predict_cpu("delta", 1e6, 0.0), 1.0e-3, 1e-12);
  EXPECT_NEAR(m.predict_cpu("delta", 1e6, 1.0), 1.2e-3, 1e-12);
  // A kernel without a model of its own learns one from any run (nothing to scale with yet).
  m.observe_cpu("scale", 1e6, 1.0e-3, 1.0);
  EXPECT_EQ(m.pending("cpu", "scale"), 1u);
  EXPECT_EQ(m.pending("cpu", std::string("scale") + weft::graph::kBesideCopies), 0u);
  // Without a model beside copies, the kernel's own.
  m.observe_cpu("scale", 2e6, 2.0e-3, 1.0);
  EXPECT_NEAR(m.predict_cpu("scale", 1e6, 1.0), 1.0e-3, 1e-12);
  // Bad input.
  for (double bad : {-0.1, 1.5, std::nan("")}) {
    EXPECT_THROW(m.observe_cpu("delta", 1e6, 1e-3, bad), InvalidArgument) << bad;
    EXPECT_THROW((void)m.predict_cpu("delta", 1e6, bad), InvalidArgument) << bad;
  }
  EXPECT_THROW(m.observe_cpu("delta", 1e6, -1.0, 1.0), InvalidArgument);
  EXPECT_THROW(m.observe_cpu("delta", 1e6, std::nan(""), 0.3),
               InvalidArgument);  // no band hides it
  EXPECT_THROW((void)m.predict_cpu("rank", 1e6, 0.5), weft::InvalidState);
}
