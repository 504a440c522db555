// Factor operators (factor_ops.hpp).
#include "factor_ops.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

#include "weft/error.hpp"

namespace factors {

using weft::InvalidArgument;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

void check_window(const Series& x, std::size_t window, const char* who) {
  if (window == 0 || window > x.days) {
    throw InvalidArgument(std::string("factors::") + who + ": window " + std::to_string(window) +
                          " outside [1, " + std::to_string(x.days) + "] days");
  }
}

// Runs emit(stock, day, sums) over every full window of the rows [s0, s1), with running sums
// of the K sequences get(stock, day) returns (an array of K doubles; NaN anywhere makes the
// window NaN).
template <std::size_t K, class Get, class Emit>
void sliding(std::size_t days, std::size_t window, std::size_t s0, std::size_t s1, Get get,
             Emit emit) {
  for (std::size_t s = s0; s < s1; ++s) {
    double sum[K] = {};
    std::size_t nans = 0;  // NaN inputs inside the window
    for (std::size_t d = 0; d < days; ++d) {
      const auto in = get(s, d);
      bool nan = false;
      for (std::size_t k = 0; k < K; ++k) nan = nan || std::isnan(in[k]);
      if (nan) {
        ++nans;
      } else {
        for (std::size_t k = 0; k < K; ++k) sum[k] += in[k];
      }
      if (d >= window) {
        const auto out = get(s, d - window);
        bool out_nan = false;
        for (std::size_t k = 0; k < K; ++k) out_nan = out_nan || std::isnan(out[k]);
        if (out_nan) {
          --nans;
        } else {
          for (std::size_t k = 0; k < K; ++k) sum[k] -= out[k];
        }
      }
      if (d + 1 >= window && nans == 0) emit(s, d, sum);
    }
  }
}

// What scale and average make of a value and its day's totals; one definition for the
// day-blocked loops below (the references') and the row-wise ones (the graph kernels').
// Scale: a hole stays a hole, a day without magnitude scales to 0.
float scaled(float v, double abs_sum) {
  if (std::isnan(v)) return kNaN;
  return abs_sum > 0 ? static_cast<float>(v / abs_sum) : 0.0f;
}
// Average: the mean of the day's values, NaN for a day without any.
float mean_of(double sum, std::size_t n) {
  return n > 0 ? static_cast<float>(sum / static_cast<double>(n)) : kNaN;
}

}  // namespace

namespace detail {

void moving_mean_rows(const float* x, float* r, std::size_t days, std::size_t window,
                      std::size_t s0, std::size_t s1) {
  std::fill(r + s0 * days, r + s1 * days, kNaN);
  const double n = static_cast<double>(window);
  sliding<1>(
      days, window, s0, s1,
      [&](std::size_t s, std::size_t d) { return std::array<double, 1>{x[s * days + d]}; },
      [&](std::size_t s, std::size_t d, const double* sum) {
        r[s * days + d] = static_cast<float>(sum[0] / n);
      });
}

void moving_stddev_rows(const float* x, float* r, std::size_t days, std::size_t window,
                        std::size_t s0, std::size_t s1) {
  std::fill(r + s0 * days, r + s1 * days, kNaN);
  const double n = static_cast<double>(window);
  sliding<2>(
      days, window, s0, s1,
      [&](std::size_t s, std::size_t d) {
        const double v = x[s * days + d];
        return std::array<double, 2>{v, v * v};
      },
      [&](std::size_t s, std::size_t d, const double* sum) {
        const double mean = sum[0] / n;
        // Running sums can leave a tiny negative variance for a constant window.
        r[s * days + d] = static_cast<float>(std::sqrt(std::max(0.0, sum[1] / n - mean * mean)));
      });
}

void moving_correlation_rows(const float* x, const float* y, float* r, std::size_t days,
                             std::size_t window, std::size_t s0, std::size_t s1) {
  std::fill(r + s0 * days, r + s1 * days, kNaN);
  const double n = static_cast<double>(window);
  sliding<5>(
      days, window, s0, s1,
      [&](std::size_t s, std::size_t d) {
        const double a = x[s * days + d], b = y[s * days + d];
        return std::array<double, 5>{a, b, a * a, b * b, a * b};
      },
      [&](std::size_t s, std::size_t d, const double* sum) {
        const double cov = sum[4] / n - (sum[0] / n) * (sum[1] / n);
        const double va = sum[2] / n - (sum[0] / n) * (sum[0] / n);
        const double vb = sum[3] / n - (sum[1] / n) * (sum[1] / n);
        // A (numerically) constant series over the window has no correlation.
        const double scale_a = std::max(1.0, sum[2] / n), scale_b = std::max(1.0, sum[3] / n);
        if (va <= 1e-12 * scale_a || vb <= 1e-12 * scale_b) return;
        r[s * days + d] = static_cast<float>(std::clamp(cov / std::sqrt(va * vb), -1.0, 1.0));
      });
}

void delta_rows(const float* x, float* r, std::size_t days, std::size_t lag, std::size_t s0,
                std::size_t s1) {
  for (std::size_t s = s0; s < s1; ++s) {
    const float* xs = x + s * days;
    float* rs = r + s * days;
    std::fill(rs, rs + lag, kNaN);
    for (std::size_t d = lag; d < days; ++d) rs[d] = xs[d] - xs[d - lag];
  }
}

void rank_days(const float* x, float* r, std::size_t stocks, std::size_t days, std::size_t d0,
               std::size_t d1) {
  // Days in blocks: one pass over the stocks gathers a block's values (a cache line per stock)
  // instead of touching every stock's line once per day.
  constexpr std::size_t kBlock = 16;
  std::vector<float> values(kBlock * stocks);
  std::vector<std::size_t> order;
  for (std::size_t b = d0; b < d1; b += kBlock) {
    const std::size_t nb = std::min(kBlock, d1 - b);
    for (std::size_t s = 0; s < stocks; ++s) {
      for (std::size_t k = 0; k < nb; ++k) values[k * stocks + s] = x[s * days + b + k];
    }
    for (std::size_t k = 0; k < nb; ++k) {
      const float* v = values.data() + k * stocks;
      order.clear();
      for (std::size_t s = 0; s < stocks; ++s) {
        if (!std::isnan(v[s])) order.push_back(s);
      }
      std::sort(order.begin(), order.end(),
                [&](std::size_t a, std::size_t c) { return v[a] < v[c]; });
      const std::size_t n = order.size();
      for (std::size_t s = 0; s < stocks; ++s) {
        if (std::isnan(v[s])) r[s * days + b + k] = kNaN;
      }
      for (std::size_t i = 0; i < n;) {
        std::size_t j = i;
        while (j + 1 < n && v[order[j + 1]] == v[order[i]]) ++j;
        const double mean_rank = 0.5 * static_cast<double>(i + j);  // ties: their mean rank
        const float rv = n > 1 ? static_cast<float>(mean_rank / static_cast<double>(n - 1)) : 0.5f;
        for (std::size_t q = i; q <= j; ++q) r[order[q] * days + b + k] = rv;
        i = j + 1;
      }
    }
  }
}

// Per day of [d0, d1): the sum of |x| (scale) or the mean (average) over the stocks with a
// value, the stocks visited row by row so that each reads a contiguous run of days.
template <class Finish>
void per_day(const float* x, float* r, std::size_t stocks, std::size_t days, std::size_t d0,
             std::size_t d1, bool absolute, Finish finish) {
  std::vector<double> sum(d1 - d0, 0.0);
  std::vector<std::size_t> count(d1 - d0, 0);
  for (std::size_t s = 0; s < stocks; ++s) {
    const float* xs = x + s * days;
    for (std::size_t d = d0; d < d1; ++d) {
      if (std::isnan(xs[d])) continue;
      sum[d - d0] += absolute ? std::abs(static_cast<double>(xs[d])) : xs[d];
      ++count[d - d0];
    }
  }
  for (std::size_t s = 0; s < stocks; ++s) {
    for (std::size_t d = d0; d < d1; ++d) {
      r[s * days + d] = finish(x[s * days + d], sum[d - d0], count[d - d0]);
    }
  }
}

void scale_days(const float* x, float* r, std::size_t stocks, std::size_t days, std::size_t d0,
                std::size_t d1) {
  per_day(x, r, stocks, days, d0, d1, true,
          [](float v, double sum, std::size_t) { return scaled(v, sum); });
}

void average_days(const float* x, float* r, std::size_t stocks, std::size_t days, std::size_t d0,
                  std::size_t d1) {
  per_day(x, r, stocks, days, d0, d1, false,
          [](float, double sum, std::size_t n) { return mean_of(sum, n); });
}

void day_sums_of_rows(const float* x, std::size_t days, std::size_t s0, std::size_t s1,
                      bool absolute, double* sum, std::uint32_t* count) {
  std::fill(sum, sum + days, 0.0);
  std::fill(count, count + days, 0u);
  for (std::size_t s = s0; s < s1; ++s) {
    const float* xs = x + s * days;
    // Branch-free (a hole adds 0 and counts 0), so the loop vectorises (GCC 12 -O3,
    // -fopt-info-vec-optimized: "loop vectorized using 16 byte vectors").
    for (std::size_t d = 0; d < days; ++d) {
      const float v = xs[d];
      const bool hole = std::isnan(v);
      const double add = absolute ? std::abs(static_cast<double>(v)) : static_cast<double>(v);
      sum[d] += hole ? 0.0 : add;
      count[d] += hole ? 0u : 1u;
    }
  }
}

void scale_rows(const float* x, float* r, std::size_t days, const double* sum, std::size_t s0,
                std::size_t s1) {
  for (std::size_t s = s0; s < s1; ++s) {
    const float* xs = x + s * days;
    float* rs = r + s * days;
    for (std::size_t d = 0; d < days; ++d) rs[d] = scaled(xs[d], sum[d]);
  }
}

void average_rows(float* r, std::size_t days, const double* sum, const std::uint32_t* count,
                  std::size_t s0, std::size_t s1) {
  if (s0 >= s1) return;
  // The first row computed, the others copies of it.
  float* first = r + s0 * days;
  for (std::size_t d = 0; d < days; ++d) first[d] = mean_of(sum[d], count[d]);
  for (std::size_t s = s0 + 1; s < s1; ++s) std::copy(first, first + days, r + s * days);
}

}  // namespace detail

namespace {

void check_shapes(const Series& x, const Series& y, const char* who) {
  if (x.stocks != y.stocks || x.days != y.days) {
    throw InvalidArgument(std::string("factors::") + who + ": series of different shapes");
  }
}

}  // namespace

Series moving_mean(const Series& x, std::size_t window) {
  check_window(x, window, "moving_mean");
  Series r(x.stocks, x.days);
  detail::moving_mean_rows(x.values.data(), r.values.data(), x.days, window, 0, x.stocks);
  return r;
}

Series moving_stddev(const Series& x, std::size_t window) {
  check_window(x, window, "moving_stddev");
  Series r(x.stocks, x.days);
  detail::moving_stddev_rows(x.values.data(), r.values.data(), x.days, window, 0, x.stocks);
  return r;
}

Series moving_correlation(const Series& x, const Series& y, std::size_t window) {
  check_shapes(x, y, "moving_correlation");
  check_window(x, window, "moving_correlation");
  Series r(x.stocks, x.days);
  detail::moving_correlation_rows(x.values.data(), y.values.data(), r.values.data(), x.days, window,
                                  0, x.stocks);
  return r;
}

Series delta(const Series& x, std::size_t lag) {
  if (lag == 0 || lag >= x.days) {
    throw InvalidArgument("factors::delta: lag " + std::to_string(lag) + " outside [1, " +
                          std::to_string(x.days) + ") days");
  }
  Series r(x.stocks, x.days);
  detail::delta_rows(x.values.data(), r.values.data(), x.days, lag, 0, x.stocks);
  return r;
}

Series rank(const Series& x) {
  Series r(x.stocks, x.days);
  detail::rank_days(x.values.data(), r.values.data(), x.stocks, x.days, 0, x.days);
  return r;
}

Series scale(const Series& x) {
  Series r(x.stocks, x.days);
  detail::scale_days(x.values.data(), r.values.data(), x.stocks, x.days, 0, x.days);
  return r;
}

Series average(const Series& x) {
  Series r(x.stocks, x.days);
  detail::average_days(x.values.data(), r.values.data(), x.stocks, x.days, 0, x.days);
  return r;
}

Series multiply(const Series& x, const Series& y) {
  check_shapes(x, y, "multiply");
  Series r(x.stocks, x.days);
  for (std::size_t i = 0; i < r.values.size(); ++i) r.values[i] = x.values[i] * y.values[i];
  return r;
}

Series subtract(const Series& x, const Series& y) {
  check_shapes(x, y, "subtract");
  Series r(x.stocks, x.days);
  for (std::size_t i = 0; i < r.values.size(); ++i) r.values[i] = x.values[i] - y.values[i];
  return r;
}

}  // namespace factors
