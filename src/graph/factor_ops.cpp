// Factor operators (include/weft/graph/factor_ops.hpp).
#include "weft/graph/factor_ops.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

#include "weft/error.hpp"

namespace weft::graph {

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

void check_window(const Series& x, std::size_t window, const char* who) {
  if (window == 0 || window > x.days) {
    throw InvalidArgument(std::string("weft::graph::") + who + ": window " +
                          std::to_string(window) + " outside [1, " + std::to_string(x.days) +
                          "] days");
  }
}

// Runs f(stock, day, sums) over every full window, with running sums of the `k` sequences
// get(stock, day) returns (an array of k doubles; NaN anywhere makes the window NaN).
template <std::size_t K, class Get, class Emit>
void sliding(const Series& x, std::size_t window, Get get, Emit emit) {
  for (std::size_t s = 0; s < x.stocks; ++s) {
    double sum[K] = {};
    std::size_t nans = 0;  // NaN inputs inside the window
    for (std::size_t d = 0; d < x.days; ++d) {
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

}  // namespace

Series moving_mean(const Series& x, std::size_t window) {
  check_window(x, window, "moving_mean");
  Series r(x.stocks, x.days, kNaN);
  const double n = static_cast<double>(window);
  sliding<1>(
      x, window, [&](std::size_t s, std::size_t d) { return std::array<double, 1>{x.at(s, d)}; },
      [&](std::size_t s, std::size_t d, const double* sum) {
        r.at(s, d) = static_cast<float>(sum[0] / n);
      });
  return r;
}

Series moving_stddev(const Series& x, std::size_t window) {
  check_window(x, window, "moving_stddev");
  Series r(x.stocks, x.days, kNaN);
  const double n = static_cast<double>(window);
  sliding<2>(
      x, window,
      [&](std::size_t s, std::size_t d) {
        const double v = x.at(s, d);
        return std::array<double, 2>{v, v * v};
      },
      [&](std::size_t s, std::size_t d, const double* sum) {
        const double mean = sum[0] / n;
        // Running sums can leave a tiny negative variance for a constant window.
        r.at(s, d) = static_cast<float>(std::sqrt(std::max(0.0, sum[1] / n - mean * mean)));
      });
  return r;
}

Series moving_correlation(const Series& x, const Series& y, std::size_t window) {
  if (x.stocks != y.stocks || x.days != y.days) {
    throw InvalidArgument("weft::graph::moving_correlation: series of different shapes");
  }
  check_window(x, window, "moving_correlation");
  Series r(x.stocks, x.days, kNaN);
  const double n = static_cast<double>(window);
  sliding<5>(
      x, window,
      [&](std::size_t s, std::size_t d) {
        const double a = x.at(s, d), b = y.at(s, d);
        return std::array<double, 5>{a, b, a * a, b * b, a * b};
      },
      [&](std::size_t s, std::size_t d, const double* sum) {
        const double cov = sum[4] / n - (sum[0] / n) * (sum[1] / n);
        const double va = sum[2] / n - (sum[0] / n) * (sum[0] / n);
        const double vb = sum[3] / n - (sum[1] / n) * (sum[1] / n);
        // A (numerically) constant series over the window has no correlation.
        const double scale_a = std::max(1.0, sum[2] / n), scale_b = std::max(1.0, sum[3] / n);
        if (va <= 1e-12 * scale_a || vb <= 1e-12 * scale_b) return;
        r.at(s, d) = static_cast<float>(std::clamp(cov / std::sqrt(va * vb), -1.0, 1.0));
      });
  return r;
}

Series delta(const Series& x, std::size_t lag) {
  if (lag == 0 || lag >= x.days) {
    throw InvalidArgument("weft::graph::delta: lag " + std::to_string(lag) + " outside [1, " +
                          std::to_string(x.days) + ") days");
  }
  Series r(x.stocks, x.days, kNaN);
  for (std::size_t s = 0; s < x.stocks; ++s) {
    for (std::size_t d = lag; d < x.days; ++d) r.at(s, d) = x.at(s, d) - x.at(s, d - lag);
  }
  return r;
}

Series rank(const Series& x) {
  Series r(x.stocks, x.days, kNaN);
  std::vector<std::size_t> order;
  for (std::size_t d = 0; d < x.days; ++d) {
    order.clear();
    for (std::size_t s = 0; s < x.stocks; ++s) {
      if (!std::isnan(x.at(s, d))) order.push_back(s);
    }
    std::sort(order.begin(), order.end(),
              [&](std::size_t a, std::size_t b) { return x.at(a, d) < x.at(b, d); });
    const std::size_t n = order.size();
    for (std::size_t i = 0; i < n;) {
      std::size_t j = i;
      while (j + 1 < n && x.at(order[j + 1], d) == x.at(order[i], d)) ++j;
      const double mean_rank = 0.5 * static_cast<double>(i + j);  // ties: their mean rank
      const float v = n > 1 ? static_cast<float>(mean_rank / static_cast<double>(n - 1)) : 0.5f;
      for (std::size_t k = i; k <= j; ++k) r.at(order[k], d) = v;
      i = j + 1;
    }
  }
  return r;
}

Series scale(const Series& x) {
  Series r(x.stocks, x.days, kNaN);
  for (std::size_t d = 0; d < x.days; ++d) {
    double sum = 0;
    for (std::size_t s = 0; s < x.stocks; ++s) {
      if (!std::isnan(x.at(s, d))) sum += std::abs(static_cast<double>(x.at(s, d)));
    }
    for (std::size_t s = 0; s < x.stocks; ++s) {
      const float v = x.at(s, d);
      if (std::isnan(v)) continue;
      r.at(s, d) = sum > 0 ? static_cast<float>(v / sum) : 0.0f;
    }
  }
  return r;
}

}  // namespace weft::graph
