// weft/graph/mapping/cost_model.hpp - one predictor of the graph layer's mappers:
// time = a + b * size for a kernel on a device, and for a transfer in one direction
// (size = bytes). Fitted by least squares from a calibration run, then refined after every
// measured execution by recursive least squares (RLS) with a forgetting factor, so that a model
// follows a machine whose behaviour drifts. The RLS step is robust (Huber's clipping of the
// error): measured times have a long upper tail (a kernel disturbed by a neighbour, a page
// fault), and plain least squares follows the tail's mean, not the typical run.
#pragma once

#include <cstddef>
#include <limits>
#include <span>

namespace weft::graph {

/// One measurement: the input size (elements or bytes) and the time it took, in seconds.
struct CostSample {
  double size = 0;
  double seconds = 0;
};

/// A linear cost model, time = intercept + slope * size, with its RLS state. Not thread-safe:
/// one owner updates it (the graph executor, under its own lock).
///
/// @code
///   std::vector<weft::graph::CostSample> runs = calibrate(...);
///   auto m = weft::graph::LinearCostModel::fit(runs);  // least squares
///   double t = m.predict(1 << 20);                      // seconds for 2^20 elements
///   m.update(1 << 20, measured_seconds);                // RLS step after a real run
/// @endcode
class LinearCostModel {
 public:
  /// The default forgetting factor: each update weighs the past by 0.98, so a model has an
  /// effective memory of ~50 measurements.
  static constexpr double kDefaultForgetting = 0.98;

  /// A model with the given coefficients and no data behind them: the first updates move it
  /// freely (a large initial covariance). Throws InvalidArgument for a forgetting factor
  /// outside (0, 1] or non-finite coefficients.
  LinearCostModel(double intercept, double slope, double forgetting = kDefaultForgetting);

  /// The least-squares fit of `samples` (at least two distinct sizes), as the starting point of
  /// RLS: its covariance is the inverse of the normal matrix, so the next updates weigh like
  /// more samples of the same fit. Throws InvalidArgument for fewer than two distinct sizes, a
  /// negative or non-finite size or time, or a bad forgetting factor.
  static LinearCostModel fit(std::span<const CostSample> samples,
                             double forgetting = kDefaultForgetting);

  /// Predicted seconds for `size` (never negative: a negative line is clamped to 0).
  [[nodiscard]] double predict(double size) const noexcept;

  /// One RLS step with a new measurement, its error (measured - predicted) clipped to
  /// kClip * spread() of the prediction. The kShiftRun-th measurement in a row beyond the clip on
  /// the same side resets the covariance instead: the model was wrong (the machine changed, or
  /// the calibration saw the kernel run differently), and this step moves the prediction at
  /// this size to within 1 - kShiftGain of the measurement. Throws InvalidArgument for a
  /// negative or non-finite size or time (the model is then unchanged).
  void update(double size, double seconds);

  /// Errors beyond this many spreads count as this many (Huber's clipping).
  static constexpr double kClip = 2.0;
  /// Measurements in a row beyond the clip, on one side, that make a model wrong rather than
  /// unlucky: about one start in a thousand by chance when one run in ten is beyond the clip.
  /// Counted across sizes, so a model wrong at one size and right at another, measured in
  /// turn, is not reset: it gets there by clipped steps.
  static constexpr int kShiftRun = 3;
  /// The share of the error that the step after a reset takes.
  static constexpr double kShiftGain = 0.99;
  /// The spread never falls below this (a few percent is every machine's jitter).
  static constexpr double kMinSpread = 0.02;
  /// Weight of the newest measurement in the spread (a window of about ten).
  static constexpr double kSpreadWeight = 0.1;
  /// The typical |measured - predicted| / predicted of recent measurements (a running mean of
  /// the clipped errors; at least kMinSpread): how far the model lets one measurement pull it.
  /// Infinite (no clipping) for a model without measurements behind it.
  [[nodiscard]] double spread() const noexcept { return spread_; }

  [[nodiscard]] double intercept() const noexcept { return theta_[0]; }
  [[nodiscard]] double slope() const noexcept { return theta_[1]; }
  [[nodiscard]] double forgetting() const noexcept { return lambda_; }
  /// The measurements just before, in a row, beyond the clip: positive above, negative below.
  [[nodiscard]] int one_sided() const noexcept { return one_sided_; }
  /// Measurements behind the model: the fit's samples plus every update.
  [[nodiscard]] std::size_t observations() const noexcept { return observations_; }

  /// Median of |predicted - measured| / measured over `samples` (those with a positive time);
  /// 0 when there are none.
  [[nodiscard]] double median_relative_error(std::span<const CostSample> samples) const;

  /// Everything a model is, for storing it and resuming its RLS exactly (ModelStore).
  struct State {
    double intercept = 0, slope = 0;
    double p00 = 0, p01 = 0, p11 = 0;  // RLS covariance
    double p_trace_limit = 0;          // the wind-up guard's bound
    double forgetting = 1;
    std::size_t observations = 0;
    double spread = std::numeric_limits<double>::infinity();  // infinite: not known yet
    int one_sided = 0;                                        // see one_sided()
  };
  [[nodiscard]] State state() const noexcept;
  /// The model `s` describes. Throws InvalidArgument for non-finite values, a covariance that
  /// is not positive semi-definite, or a bad forgetting factor.
  static LinearCostModel from_state(const State& s);

 private:
  LinearCostModel(const double theta[2], const double p[2][2], double forgetting,
                  std::size_t observations);

  double theta_[2];       // intercept, slope (RLS's parameter vector)
  double p_[2][2];        // RLS covariance (symmetric)
  double p_trace_limit_;  // the wind-up guard: past this trace an update does not forget
  double lambda_;         // the forgetting factor (forgetting())
  std::size_t observations_ = 0;
  double spread_;
  int one_sided_ = 0;
};

}  // namespace weft::graph
