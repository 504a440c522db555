// factor_ops.hpp - the CPU implementations of the quantitative-finance factor operators the
// factor application composes (the graph kernels of factor_kernels.hpp split the same cores
// across workers; the pipelines use them as sequential references): series of S stocks over D
// days, windowed over time or taken across stocks on one day. Windowed operators
// run in O(S * D) with running sums in double, whatever the window.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace factors {

/// S stocks x D days, stock-major: value(s, d) = values[s * days + d]. NaN marks "no value"
/// (the first w - 1 days of a window of w, or propagated from an input).
struct Series {
  std::size_t stocks = 0;
  std::size_t days = 0;
  std::vector<float> values;

  Series() = default;
  Series(std::size_t s, std::size_t d, float fill = 0.0f)
      : stocks(s), days(d), values(s * d, fill) {}
  float& at(std::size_t s, std::size_t d) { return values[s * days + d]; }
  [[nodiscard]] float at(std::size_t s, std::size_t d) const { return values[s * days + d]; }
};

/// Mean of the last `window` days (NaN before a full window, or when one of them is NaN).
/// Throws InvalidArgument for a window of 0 or longer than the series.
Series moving_mean(const Series& x, std::size_t window);
/// Population standard deviation of the last `window` days (as moving_mean).
Series moving_stddev(const Series& x, std::size_t window);
/// Pearson correlation of x and y over the last `window` days (NaN where either is constant over
/// the window). Throws InvalidArgument for series of different shapes, or as moving_mean.
Series moving_correlation(const Series& x, const Series& y, std::size_t window);
/// x(d) - x(d - lag) (NaN for the first `lag` days). Throws InvalidArgument for lag 0 or
/// lag >= days.
Series delta(const Series& x, std::size_t lag);
/// Cross-sectional rank on each day, scaled to [0, 1] (0 the smallest; ties get their mean
/// rank; NaN stays NaN and is not ranked; a day with one value gives it 0.5).
Series rank(const Series& x);
/// Cross-sectional scaling on each day: x / sum |x| (NaN ignored in the sum; a day whose sum is
/// 0 gives 0).
Series scale(const Series& x);
/// AVG, the applications' fence (it has no GPU implementation): each value replaced by its
/// day's cross-sectional mean over the stocks with a value (NaN when none has).
Series average(const Series& x);
/// Element-wise x * y and x - y (NaN propagates). Throw InvalidArgument for different shapes.
Series multiply(const Series& x, const Series& y);
Series subtract(const Series& x, const Series& y);

namespace detail {
// The operators' CPU cores on raw stock-major arrays, over rows [s0, s1) (windowed, per stock)
// or days [d0, d1) (cross-sectional), so that the graph's kernels split them across workers.
void moving_mean_rows(const float* x, float* r, std::size_t days, std::size_t window,
                      std::size_t s0, std::size_t s1);
void moving_stddev_rows(const float* x, float* r, std::size_t days, std::size_t window,
                        std::size_t s0, std::size_t s1);
void moving_correlation_rows(const float* x, const float* y, float* r, std::size_t days,
                             std::size_t window, std::size_t s0, std::size_t s1);
void delta_rows(const float* x, float* r, std::size_t days, std::size_t lag, std::size_t s0,
                std::size_t s1);
void rank_days(const float* x, float* r, std::size_t stocks, std::size_t days, std::size_t d0,
               std::size_t d1);
void scale_days(const float* x, float* r, std::size_t stocks, std::size_t days, std::size_t d0,
                std::size_t d1);
void average_days(const float* x, float* r, std::size_t stocks, std::size_t days, std::size_t d0,
                  std::size_t d1);

// The same cross-sectional sums by rows, for the graph kernels (factor_kernels.cpp): reading
// a few days of every stock per block of days, as the functions above do, touches a new page
// per stock; these read and write whole rows.
/// Adds the rows [s0, s1) into per-day sums (of |x| when `absolute`) and counts of values
/// (NaN is a hole), `sum` and `count` holding `days` entries each, overwritten.
void day_sums_of_rows(const float* x, std::size_t days, std::size_t s0, std::size_t s1,
                      bool absolute, double* sum, std::uint32_t* count);
/// Rows [s0, s1) of scale / average from the per-day totals.
void scale_rows(const float* x, float* r, std::size_t days, const double* sum, std::size_t s0,
                std::size_t s1);
void average_rows(float* r, std::size_t days, const double* sum, const std::uint32_t* count,
                  std::size_t s0, std::size_t s1);
}  // namespace detail

}  // namespace factors
