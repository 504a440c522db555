// apps/gpu/spmv_bs.hpp - the mixed application of seed 000 §4.4 (docs/apps.md): a sparse
// matrix-vector product (CSR, skewed row lengths) and Black-Scholes option pricing, two kinds
// of task with different needs (memory-bound and irregular; compute-bound and regular) that the
// pool can run one kind after the other or mixed. Written against the public API only.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include <weft/gpu/pool.hpp>

namespace apps::gpu {

/// y[r] = sum_j values[j] x[cols[j]] over the rows [first, first + count) of a CSR matrix.
struct SpmvRows {
  static constexpr std::uint32_t kId = 121;
  struct Payload {
    const std::int64_t* row_start;  // rows + 1 entries
    const int* cols;
    const float* values;
    const float* x;
    float* y;
    int first, count;
  };
  // On the GPU one warp per row (vector CSR): the lanes read consecutive entries and the sums
  // meet by shuffles, so a long row is read coalesced and spread over 32 lanes instead of one
  // thread; on the host one thread takes the rows in order.
  // On `p` itself, which lives in the block's shared memory (docs/gpu.md, "Task types"): the
  // inner loop stores nothing, so the fields are read again only after each row's store to y,
  // and a copy would take the registers of a block an SM from this memory-bound body.
  WEFT_HD static void run(Payload& p, const weft::gpu::BlockContext& ctx) {
#if defined(__CUDA_ARCH__)
    if (ctx.threads() % 32 == 0) {
      const int lane = ctx.thread() % 32, warps = ctx.threads() / 32;
      for (int r = p.first + ctx.thread() / 32; r < p.first + p.count; r += warps) {
        const std::int64_t end = p.row_start[r + 1];
        std::int64_t j = p.row_start[r] + lane;
        // Four entries per lane per round: four chains of loads (column, then x) in flight.
        float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
        for (; j + 96 < end; j += 128) {
          const int c0 = p.cols[j], c1 = p.cols[j + 32], c2 = p.cols[j + 64], c3 = p.cols[j + 96];
          s0 += p.values[j] * p.x[c0];
          s1 += p.values[j + 32] * p.x[c1];
          s2 += p.values[j + 64] * p.x[c2];
          s3 += p.values[j + 96] * p.x[c3];
        }
        for (; j < end; j += 32) s0 += p.values[j] * p.x[p.cols[j]];
        float sum = (s0 + s1) + (s2 + s3);
        for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
        if (lane == 0) p.y[r] = sum;
      }
      return;
    }
#endif
    for (int r = p.first + ctx.thread(); r < p.first + p.count; r += ctx.threads()) {
      float sum = 0.0f;
      for (std::int64_t j = p.row_start[r]; j < p.row_start[r + 1]; ++j)
        sum += p.values[j] * p.x[p.cols[j]];
      p.y[r] = sum;
    }
  }
};

/// The cumulative normal distribution (Abramowitz-Stegun, as the CUDA SDK's Black-Scholes).
WEFT_HD inline float normal_cdf(float d) {
  const float k = 1.0f / (1.0f + 0.2316419f * fabsf(d));
  const float poly =
      k * (0.31938153f +
           k * (-0.356563782f + k * (1.781477937f + k * (-1.821255978f + k * 1.330274429f))));
  const float cnd = 0.3989422804014327f * expf(-0.5f * d * d) * poly;
  return d > 0 ? 1.0f - cnd : cnd;
}

/// European call and put prices of the options [first, first + count).
struct BlackScholes {
  static constexpr std::uint32_t kId = 122;
  struct Payload {
    const float* spot;
    const float* strike;
    const float* years;
    float* call;
    float* put;
    float rate, volatility;
    int first, count;
  };
  WEFT_HD static void price(const Payload p, int i) {
    const float s = p.spot[i], x = p.strike[i], t = p.years[i];
    const float sqrt_t = sqrtf(t);
    const float d1 =
        (logf(s / x) + (p.rate + 0.5f * p.volatility * p.volatility) * t) / (p.volatility * sqrt_t);
    const float d2 = d1 - p.volatility * sqrt_t;
    const float discount = expf(-p.rate * t);
    p.call[i] = s * normal_cdf(d1) - x * discount * normal_cdf(d2);
    p.put[i] = x * discount * (1.0f - normal_cdf(d2)) - s * (1.0f - normal_cdf(d1));
  }
  WEFT_HD static void run(Payload& payload, const weft::gpu::BlockContext& ctx) {
    // A copy: `payload` lives in the block's shared memory, where each option's stores to
    // call and put could alias it, so the compiler would read its fields again for every option
    // (docs/gpu.md, "Task types").
    const Payload p = payload;
    for (int i = p.first + ctx.thread(); i < p.first + p.count; i += ctx.threads()) price(p, i);
  }
};

/// A CSR matrix with skewed row lengths: most rows short, a few long (a power law), columns
/// spread over the matrix; values and x small integers over powers of two.
struct CsrMatrix {
  int rows = 0, cols = 0;
  std::vector<std::int64_t> row_start;
  std::vector<int> col;
  std::vector<float> value;
  static CsrMatrix skewed(int rows, int cols, int longest, std::uint64_t seed);
};

/// y = A x on the CPU. Throws std::invalid_argument, naming the sizes, unless the matrix is
/// whole (rows + 1 row starts, a column and a value per entry, columns in [0, cols)) and x has
/// cols entries.
void reference_spmv(const CsrMatrix& a, const std::vector<float>& x, std::vector<float>& y);

struct Options {
  std::vector<float> spot, strike, years;
  static Options random(int count, std::uint64_t seed);
};

/// Call and put prices on the CPU (the task's own formula). Throws std::invalid_argument
/// unless there are as many strikes and maturities as spots.
void reference_black_scholes(const Options& o, float rate, float volatility,
                             std::vector<float>& call, std::vector<float>& put);

/// The mixed job's own pool: its two task types only, so that its resident kernel needs the few
/// registers they do. In a kernel of every application's types (app_pool.hpp) the FP64 tiles
/// set 168 registers a thread, which leaves two blocks on an SM: eight task warps to keep
/// SpMV's loads in flight, where its plain kernel has up to sixty-four
/// (docs/decisions/018-gpu-app-bodies.md, "Fourth round").
using SpmvBsTasks = weft::gpu::TaskTypes<SpmvRows, BlackScholes>;
inline constexpr std::size_t kSpmvBsCapacity = 64;  // both payloads are at most 56 bytes
using SpmvBsPool = weft::gpu::Pool<SpmvBsTasks, kSpmvBsCapacity>;

/// The resident kernel of SpmvBsTasks, for PoolOptions::program (compiled in
/// spmv_bs_program.cu; an invalid program in a build without CUDA: a device pool says so).
weft::gpu::DeviceProgram spmv_bs_program();

/// Options of an SpmvBsPool on the GPUs (`devices`: empty, every one), 128 task threads per
/// block, as many blocks per SM as fit, one slot per block (a free block takes the next task).
weft::gpu::PoolOptions spmv_bs_pool_options(std::vector<int> devices = {});

/// Where the pool's blocks reach the mixed job's arrays (device memory on the device backend).
struct SpmvBsArrays {
  const std::int64_t* row_start;
  const int* cols;
  const float* values;
  const float* x;
  float* y;
  int rows;
  const float* spot;
  const float* strike;
  const float* years;
  float* call;
  float* put;
  int options;
  float rate, volatility;
};

/// The checks of spmv_bs_tasks (below).
void check_spmv_bs_tasks(const SpmvBsArrays& a, int rows_per_task, int options_per_task);

/// The SpMV tasks (rows_per_task rows each) and the Black-Scholes tasks (options_per_task
/// each); `mixed`: both kinds in one seeded random order, else every SpMV task before every
/// Black-Scholes task. (Random, not a strict alternation: blocks that take tasks in turn over
/// an even number of SMs would give each SM's blocks one kind only.) Throws
/// std::invalid_argument, naming the value, unless both counts per task are >= 1, rows and
/// options are >= 0, and the arrays of each kind with work are non-null.
template <std::size_t Capacity>
std::vector<weft::gpu::TaskRecord<Capacity>> spmv_bs_tasks(const SpmvBsArrays& a, int rows_per_task,
                                                           int options_per_task, bool mixed) {
  check_spmv_bs_tasks(a, rows_per_task, options_per_task);
  using Record = weft::gpu::TaskRecord<Capacity>;
  std::vector<Record> spmv, bs;
  // The loops count in 64 bits: a count per task near 2^31 must not wrap them.
  for (std::int64_t at = 0; at < a.rows; at += rows_per_task) {
    const auto r = static_cast<int>(at);
    const int n = a.rows - r < rows_per_task ? a.rows - r : rows_per_task;
    spmv.push_back(Record::template make<SpmvRows>({a.row_start, a.cols, a.values, a.x, a.y, r, n},
                                                   spmv.size()));
  }
  for (std::int64_t at = 0; at < a.options; at += options_per_task) {
    const auto i = static_cast<int>(at);
    const int n = a.options - i < options_per_task ? a.options - i : options_per_task;
    bs.push_back(Record::template make<BlackScholes>(
        {a.spot, a.strike, a.years, a.call, a.put, a.rate, a.volatility, i, n}, bs.size()));
  }
  std::vector<Record> all;
  all.reserve(spmv.size() + bs.size());
  if (!mixed) {
    all.insert(all.end(), spmv.begin(), spmv.end());
    all.insert(all.end(), bs.begin(), bs.end());
    return all;
  }
  all.insert(all.end(), spmv.begin(), spmv.end());
  all.insert(all.end(), bs.begin(), bs.end());
  std::mt19937 order(2026);
  std::shuffle(all.begin(), all.end(), order);
  return all;
}

}  // namespace apps::gpu
