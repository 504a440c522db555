// Least squares and recursive least squares for the linear cost models
// (include/weft/graph/mapping/cost_model.hpp). Two parameters: written out by hand, no
// linear-algebra library needed (a 2x2 solve), which keeps the graph layer free of BLAS/LAPACK.
#include "weft/graph/mapping/cost_model.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "weft/error.hpp"

namespace weft::graph {

namespace {

// The covariance of a model with no data behind it: large against any coefficient the
// first measurements imply, so the first updates move it freely.
constexpr double kUninformedCovariance = 1e12;

void check_forgetting(double lambda) {
  if (!(lambda > 0.0 && lambda <= 1.0)) {
    throw InvalidArgument(
        "weft::graph::LinearCostModel: forgetting factor must be in (0, 1] (got " +
        std::to_string(lambda) + ")");
  }
}

void check_sample(double size, double seconds, const char* what) {
  if (!std::isfinite(size) || size < 0.0 || !std::isfinite(seconds) || seconds < 0.0) {
    throw InvalidArgument(std::string("weft::graph::LinearCostModel::") + what +
                          ": size and time must be finite and non-negative (got size " +
                          std::to_string(size) + ", " + std::to_string(seconds) + " s)");
  }
}

}  // namespace

LinearCostModel::LinearCostModel(double intercept, double slope, double forgetting)
    : theta_{intercept, slope},
      p_{{kUninformedCovariance, 0.0}, {0.0, kUninformedCovariance}},
      p_trace_limit_(2 * kUninformedCovariance),
      lambda_(forgetting),
      spread_(std::numeric_limits<double>::infinity()) {
  check_forgetting(forgetting);
  if (!std::isfinite(intercept) || !std::isfinite(slope)) {
    throw InvalidArgument("weft::graph::LinearCostModel: coefficients must be finite");
  }
}

LinearCostModel::LinearCostModel(const double theta[2], const double p[2][2], double forgetting,
                                 std::size_t observations)
    : theta_{theta[0], theta[1]},
      p_{{p[0][0], p[0][1]}, {p[1][0], p[1][1]}},
      // Forgetting divides the covariance by lambda at every update; along a direction no
      // measurement excites (all sizes alike) it would grow without bound ("covariance
      // wind-up") and one odd measurement would then throw the model anywhere. Bounded at
      // 10^6 times the fit's own uncertainty: past it, an update does not forget.
      p_trace_limit_(1e6 * (p[0][0] + p[1][1])),
      lambda_(forgetting),
      observations_(observations),
      spread_(std::numeric_limits<double>::infinity()) {}

LinearCostModel LinearCostModel::fit(std::span<const CostSample> samples, double forgetting) {
  check_forgetting(forgetting);
  if (samples.size() < 2) {
    throw InvalidArgument("weft::graph::LinearCostModel::fit: needs at least two samples (got " +
                          std::to_string(samples.size()) + ")");
  }
  // Centre the sizes first: the normal equations of raw sizes (up to ~1e9) are badly
  // conditioned; centred they are not.
  double mean_x = 0, mean_y = 0;
  for (const CostSample& s : samples) {
    check_sample(s.size, s.seconds, "fit");
    mean_x += s.size;
    mean_y += s.seconds;
  }
  const double n = static_cast<double>(samples.size());
  mean_x /= n;
  mean_y /= n;
  double sxx = 0, sxy = 0;
  for (const CostSample& s : samples) {
    sxx += (s.size - mean_x) * (s.size - mean_x);
    sxy += (s.size - mean_x) * (s.seconds - mean_y);
  }
  if (!(sxx > 0.0)) {
    throw InvalidArgument(
        "weft::graph::LinearCostModel::fit: the samples need at least two distinct sizes");
  }
  const double slope = sxy / sxx;
  const double theta[2] = {mean_y - slope * mean_x, slope};
  // Finite samples can still overflow the sums (times near 1e308): a NaN model would predict
  // 0 s, a free node, and could not be stored.
  if (!std::isfinite(theta[0]) || !std::isfinite(theta[1]) || !std::isfinite(sxx)) {
    throw InvalidArgument(
        "weft::graph::LinearCostModel::fit: the samples overflow the fit (non-finite "
        "coefficients)");
  }
  // The inverse of the normal matrix [[n, sum x], [sum x, sum x^2]], from the centred sums:
  // its determinant is n * sxx.
  const double sum_x = n * mean_x;
  const double sum_xx = sxx + n * mean_x * mean_x;
  const double det = n * sxx;
  const double p[2][2] = {{sum_xx / det, -sum_x / det}, {-sum_x / det, n / det}};
  LinearCostModel m(theta, p, forgetting, samples.size());
  // The spread starts as the fit's own: the mean relative residual.
  double spread = 0;
  std::size_t counted = 0;
  for (const CostSample& s : samples) {
    const double fitted = m.predict(s.size);
    if (fitted > 0) {
      spread += std::abs(s.seconds - fitted) / fitted;
      ++counted;
    }
  }
  // Residuals of the line the samples themselves fitted understate its error: two of the
  // samples' degrees of freedom went into the line (n / (n - 2), as for the variance of a
  // regression). With two samples there is nothing left to estimate it from: unknown.
  if (counted > 2) {
    const double dof = static_cast<double>(counted) / static_cast<double>(counted - 2);
    m.spread_ = std::max(kMinSpread, dof * spread / static_cast<double>(counted));
  }
  return m;
}

double LinearCostModel::predict(double size) const noexcept {
  return std::max(0.0, theta_[0] + theta_[1] * size);
}

void LinearCostModel::update(double size, double seconds) {
  check_sample(size, seconds, "update");
  // RLS with forgetting factor lambda (e.g. Haykin, Adaptive Filter Theory, ch. 10):
  //   k = P phi / (lambda + phi' P phi); theta += k (y - phi' theta);
  //   P = (P - k phi' P) / lambda,  with phi = (1, size).
  const double phi[2] = {1.0, size};
  auto times_phi = [&](double(&out)[2]) {
    out[0] = p_[0][0] * phi[0] + p_[0][1] * phi[1];
    out[1] = p_[1][0] * phi[0] + p_[1][1] * phi[1];
  };
  double p_phi[2];
  times_phi(p_phi);
  const bool forget = p_[0][0] + p_[1][1] < p_trace_limit_;
  const double lambda = forget ? lambda_ : 1.0;
  const double predicted = theta_[0] + theta_[1] * size;
  double error = seconds - predicted;
  if (predicted > 0) {
    if (std::isfinite(spread_)) {
      // Huber: an error beyond kClip spreads moves the model as one of kClip spreads would.
      const double limit = kClip * spread_ * predicted;
      const int side = error > limit ? 1 : error < -limit ? -1 : 0;
      one_sided_ = side == 0 ? 0 : (one_sided_ * side > 0 ? one_sided_ + side : side);
      const bool reset = std::abs(one_sided_) >= kShiftRun;
      if (reset) {
        // kShiftRun measurements in a row beyond the clip, all on one side: not the tail but a
        // model that is wrong (the machine changed, or the calibration did not see the kernel
        // as it runs now). Clipped steps would take tens of runs to get there, so the
        // covariance is reset ("covariance resetting" in adaptive control): scaled until this
        // measurement's gain is kShiftGain, so the step nearly fits it, and, the scaled P
        // keeping its shape, moves the line at the sizes behind the model as little as it can.
        const double excitation = phi[0] * p_phi[0] + phi[1] * p_phi[1];
        if (excitation > 0) {
          const double scale = kShiftGain / (1.0 - kShiftGain) * lambda / excitation;
          if (scale > 1.0) {
            for (auto& row : p_) {
              for (double& v : row) v *= scale;
            }
            times_phi(p_phi);
          }
        }
        one_sided_ = 0;
      }
      const double clipped = std::clamp(error, -limit, limit);
      if (!reset) error = clipped;
      // The spread follows the clipped errors: a model that was wrong says nothing of the jitter.
      spread_ += kSpreadWeight * (std::abs(clipped) / predicted - spread_);
    } else {
      spread_ = std::abs(error) / predicted;  // the first measurement a prediction met
    }
    spread_ = std::max(kMinSpread, spread_);
  }
  const double denom = lambda + phi[0] * p_phi[0] + phi[1] * p_phi[1];
  const double k[2] = {p_phi[0] / denom, p_phi[1] / denom};
  theta_[0] += k[0] * error;
  theta_[1] += k[1] * error;
  double p[2][2];
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 2; ++j) p[i][j] = (p_[i][j] - k[i] * p_phi[j]) / lambda;
  }
  // Keep P symmetric (rounding would make it drift apart).
  const double off = 0.5 * (p[0][1] + p[1][0]);
  p_[0][0] = p[0][0];
  p_[1][1] = p[1][1];
  p_[0][1] = p_[1][0] = off;
  ++observations_;
}

LinearCostModel::State LinearCostModel::state() const noexcept {
  State s;
  s.intercept = theta_[0];
  s.slope = theta_[1];
  s.p00 = p_[0][0];
  s.p01 = p_[0][1];
  s.p11 = p_[1][1];
  s.p_trace_limit = p_trace_limit_;
  s.forgetting = lambda_;
  s.observations = observations_;
  s.spread = spread_;
  s.one_sided = one_sided_;
  return s;
}

LinearCostModel LinearCostModel::from_state(const State& s) {
  check_forgetting(s.forgetting);
  for (const double v : {s.intercept, s.slope, s.p00, s.p01, s.p11, s.p_trace_limit}) {
    if (!std::isfinite(v)) {
      throw InvalidArgument("weft::graph::LinearCostModel::from_state: non-finite value");
    }
  }
  if (s.p00 < 0 || s.p11 < 0 || s.p01 * s.p01 > s.p00 * s.p11 * (1 + 1e-9)) {
    throw InvalidArgument(
        "weft::graph::LinearCostModel::from_state: the covariance is not positive semi-definite");
  }
  if (std::isnan(s.spread) || s.spread < 0) {
    throw InvalidArgument(
        "weft::graph::LinearCostModel::from_state: the spread must be non-negative (infinite: "
        "unknown)");
  }
  if (std::abs(s.one_sided) >= kShiftRun) {
    throw InvalidArgument("weft::graph::LinearCostModel::from_state: one_sided " +
                          std::to_string(s.one_sided) + " outside (-" + std::to_string(kShiftRun) +
                          ", " + std::to_string(kShiftRun) + ")");
  }
  const double theta[2] = {s.intercept, s.slope};
  const double p[2][2] = {{s.p00, s.p01}, {s.p01, s.p11}};
  LinearCostModel m(theta, p, s.forgetting, s.observations);
  m.p_trace_limit_ = s.p_trace_limit;
  m.spread_ = s.spread;
  m.one_sided_ = s.one_sided;
  return m;
}

double LinearCostModel::median_relative_error(std::span<const CostSample> samples) const {
  std::vector<double> errors;
  errors.reserve(samples.size());
  for (const CostSample& s : samples) {
    if (s.seconds > 0.0) errors.push_back(std::abs(predict(s.size) - s.seconds) / s.seconds);
  }
  if (errors.empty()) return 0.0;
  const auto mid = errors.begin() + static_cast<std::ptrdiff_t>(errors.size() / 2);
  std::nth_element(errors.begin(), mid, errors.end());
  if (errors.size() % 2 == 1) return *mid;
  const double upper = *mid;
  const double lower = *std::max_element(errors.begin(), mid);
  return 0.5 * (lower + upper);
}

}  // namespace weft::graph
