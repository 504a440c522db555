#include "spmv_bs.hpp"

#include "app_pool.hpp"
#include "first_null.hpp"

#include <random>
#include <stdexcept>
#include <string>
#include <utility>

namespace apps::gpu {

weft::gpu::PoolOptions spmv_bs_pool_options(std::vector<int> devices) {
  weft::gpu::PoolOptions o = device_pool_options(std::move(devices));
  o.program = spmv_bs_program();
  // One slot a block: the job queues far more tasks than the pool has blocks, and a deeper ring
  // fixes at push time which block runs which task. SpMV tasks over skewed rows and the short
  // Black-Scholes ones then add up to unequal sums per block, and the run waits for the
  // fullest ring. With one slot a free block takes the next task, and the round trip per task
  // is small against these tasks' times (docs/decisions/018-gpu-app-bodies.md, "Fifth round").
  o.ring_depth = 1;
  return o;
}

void check_spmv_bs_tasks(const SpmvBsArrays& a, int rows_per_task, int options_per_task) {
  const std::string where = "apps::gpu::spmv_bs_tasks: ";
  if (rows_per_task < 1 || options_per_task < 1) {
    throw std::invalid_argument(where + "rows and options per task must be >= 1 (got " +
                                std::to_string(rows_per_task) + " and " +
                                std::to_string(options_per_task) + ")");
  }
  if (a.rows < 0 || a.options < 0) {
    throw std::invalid_argument(where + "rows and options must be >= 0 (got " +
                                std::to_string(a.rows) + " and " + std::to_string(a.options) + ")");
  }
  const char* null_spmv = first_null(
      {{"row_start", a.row_start}, {"cols", a.cols}, {"values", a.values}, {"x", a.x}, {"y", a.y}});
  if (a.rows > 0 && null_spmv != nullptr) {
    throw std::invalid_argument(where + "the SpMV array " + null_spmv + " is null");
  }
  const char* null_bs = first_null({{"spot", a.spot},
                                    {"strike", a.strike},
                                    {"years", a.years},
                                    {"call", a.call},
                                    {"put", a.put}});
  if (a.options > 0 && null_bs != nullptr) {
    throw std::invalid_argument(where + "the Black-Scholes array " + null_bs + " is null");
  }
}

CsrMatrix CsrMatrix::skewed(int rows, int cols, int longest, std::uint64_t seed) {
  if (rows < 1 || cols < 1 || longest < 1) {
    throw std::invalid_argument(
        "apps::gpu::CsrMatrix::skewed: rows, cols and longest must be >= 1");
  }
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::uniform_int_distribution<int> column(0, cols - 1);
  CsrMatrix m;
  m.rows = rows;
  m.cols = cols;
  m.row_start.push_back(0);
  for (int r = 0; r < rows; ++r) {
    // u^8 is small for most rows and close to 1 for a few: lengths from 1 to `longest`.
    const double x = u(rng);
    const int len = 1 + static_cast<int>((longest - 1) * x * x * x * x * x * x * x * x);
    for (int j = 0; j < len; ++j) {
      m.col.push_back(column(rng));
      m.value.push_back(static_cast<float>(static_cast<int>(rng() % 5) - 2) / 4.0f);
    }
    m.row_start.push_back(static_cast<std::int64_t>(m.col.size()));
  }
  return m;
}

void reference_spmv(const CsrMatrix& a, const std::vector<float>& x, std::vector<float>& y) {
  const std::string where = "apps::gpu::reference_spmv: ";
  if (a.rows < 0 || a.row_start.size() != static_cast<std::size_t>(a.rows) + 1 ||
      x.size() < static_cast<std::size_t>(a.cols)) {
    throw std::invalid_argument(where + std::to_string(a.rows) + " rows need " +
                                std::to_string(std::int64_t{a.rows} + 1) + " row starts (got " +
                                std::to_string(a.row_start.size()) + ") and x of " +
                                std::to_string(a.cols) + " (got " + std::to_string(x.size()) + ")");
  }
  for (std::size_t r = 0; r < static_cast<std::size_t>(a.rows); ++r) {
    if (a.row_start[r] < 0 || a.row_start[r + 1] < a.row_start[r]) {
      throw std::invalid_argument(where + "row " + std::to_string(r) + " starts at " +
                                  std::to_string(a.row_start[r]) + " and ends at " +
                                  std::to_string(a.row_start[r + 1]) +
                                  ": row starts must rise from 0 or more");
    }
  }
  if (a.row_start.front() < 0) {
    throw std::invalid_argument(where + "the first row starts at " +
                                std::to_string(a.row_start.front()));
  }
  const auto entries = static_cast<std::size_t>(a.row_start.back());
  if (a.col.size() < entries || a.value.size() < entries) {
    throw std::invalid_argument(where + "row starts end at " + std::to_string(entries) +
                                " entries, past the columns or values given");
  }
  for (std::size_t e = 0; e < entries; ++e) {
    if (a.col[e] < 0 || a.col[e] >= a.cols) {
      throw std::invalid_argument(where + "entry " + std::to_string(e) + "'s column " +
                                  std::to_string(a.col[e]) + " is not in [0, " +
                                  std::to_string(a.cols) + ")");
    }
  }
  y.assign(static_cast<std::size_t>(a.rows), 0.0f);
  for (int r = 0; r < a.rows; ++r) {
    float sum = 0.0f;
    for (std::int64_t j = a.row_start[r]; j < a.row_start[r + 1]; ++j)
      sum += a.value[j] * x[a.col[j]];
    y[r] = sum;
  }
}

Options Options::random(int count, std::uint64_t seed) {
  if (count < 1) throw std::invalid_argument("apps::gpu::Options::random: count must be >= 1");
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> spot(5.0f, 30.0f), strike(1.0f, 100.0f),
      years(0.25f, 10.0f);
  Options o;
  for (int i = 0; i < count; ++i) {
    o.spot.push_back(spot(rng));
    o.strike.push_back(strike(rng));
    o.years.push_back(years(rng));
  }
  return o;
}

void reference_black_scholes(const Options& o, float rate, float volatility,
                             std::vector<float>& call, std::vector<float>& put) {
  if (o.strike.size() != o.spot.size() || o.years.size() != o.spot.size()) {
    throw std::invalid_argument(
        "apps::gpu::reference_black_scholes: " + std::to_string(o.spot.size()) + " spots, " +
        std::to_string(o.strike.size()) + " strikes and " + std::to_string(o.years.size()) +
        " maturities");
  }
  const auto n = static_cast<int>(o.spot.size());
  call.assign(o.spot.size(), 0.0f);
  put.assign(o.spot.size(), 0.0f);
  BlackScholes::Payload p{o.spot.data(),
                          o.strike.data(),
                          o.years.data(),
                          call.data(),
                          put.data(),
                          rate,
                          volatility,
                          0,
                          n};
  for (int i = 0; i < n; ++i) BlackScholes::price(p, i);
}

}  // namespace apps::gpu
