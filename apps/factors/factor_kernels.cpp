// The factor operators as graph kernels: CPU implementations split over the executor's workers
// (rows for windowed operators and for scale and average, blocks of days for rank, chunks for
// element-wise ones), GPU implementations from factor_gpu.hpp.
#include "factor_kernels.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "factor_gpu.hpp"
#include "factor_ops.hpp"
#include "weft/cpu/executor.hpp"
#include "weft/cpu/parallel.hpp"
#include "weft/cpu/topology.hpp"
#include "weft/error.hpp"
#include "weft/graph/stream_copy.hpp"

namespace factors::kernels {

using weft::InvalidArgument;
using weft::graph::CpuCall;
using weft::graph::CpuCallFn;
using weft::graph::GpuCall;
using weft::graph::GpuCallFn;
using weft::graph::Kernel;
using weft::graph::stream_copy_unfenced;
using weft::graph::stream_fence;

namespace {

void check_shape(Shape shape, const char* who) {
  if (shape.stocks == 0 || shape.days == 0) {
    throw InvalidArgument(std::string("factors::kernels::") + who + ": an empty shape (" +
                          std::to_string(shape.stocks) + " stocks x " + std::to_string(shape.days) +
                          " days)");
  }
}

void check_window(Shape shape, std::size_t window, const char* who) {
  check_shape(shape, who);
  if (window == 0 || window > shape.days) {
    throw InvalidArgument(std::string("factors::kernels::") + who + ": window " +
                          std::to_string(window) + " outside [1, " + std::to_string(shape.days) +
                          "] days");
  }
}

// Every argument is one series of `shape`; `args` of them.
std::function<void(std::span<const std::size_t>)> same_shape(Shape shape, std::size_t args,
                                                             std::string name) {
  return [shape, args, name](std::span<const std::size_t> bytes) {
    if (bytes.size() != args) {
      throw InvalidArgument(name + " takes " + std::to_string(args) + " arguments, got " +
                            std::to_string(bytes.size()));
    }
    for (std::size_t i = 0; i < bytes.size(); ++i) {
      if (bytes[i] != shape.bytes()) {
        throw InvalidArgument(name + ": argument " + std::to_string(i) + " has " +
                              std::to_string(bytes[i]) + " bytes, the shape " +
                              std::to_string(shape.stocks) + " x " + std::to_string(shape.days) +
                              " needs " + std::to_string(shape.bytes()));
      }
    }
  };
}

// Runs f(begin, end) over [0, n) split across the call's executor (or inline without one).
template <class F>
void split(const CpuCall& c, std::size_t n, F f) {
  if (c.executor == nullptr || n < 2) {
    f(std::size_t{0}, n);
    return;
  }
  // Dynamic chunks, ~8 per worker, as a precaution rather than a measured gain: the dispatcher
  // and CUDA's callback thread share the cores with the workers, and a static part whose worker
  // is delayed would set the node's time. Counted per worker, so it scales with any machine.
  const auto workers = static_cast<std::int64_t>(c.executor->num_workers());
  const std::int64_t grain =
      std::max<std::int64_t>(1, static_cast<std::int64_t>(n) / (8 * workers));
  weft::cpu::parallel_for_range(
      *c.executor, 0, static_cast<std::int64_t>(n),
      [&](std::int64_t b, std::int64_t e) {
        f(static_cast<std::size_t>(b), static_cast<std::size_t>(e));
      },
      weft::cpu::Schedule::dynamic(grain));
}

// Whether a kernel writes output `out` past the caches (stream_copy.hpp): when the run copies
// it to the GPU next (CpuCall::copied_to_device), and when the call's arguments together span
// at least stream_min_bytes(), by default the last-level cache measured at start-up: the
// call's own traffic then evicts the output before its consumer could read it from the cache
// anyway, and non-temporal stores spare the read each ordinary store of a line not in the cache
// makes first; a call whose data fit can leave its output there. The test is the call's data,
// not the output's size alone: an output smaller than the cache is still evicted by the inputs
// read beside it (docs/decisions/021-stream-threshold-is-the-last-level-cache.md). Either way
// the values written are the same. A tuning value read once per kernel call, ordering nothing:
// relaxed on both sides; initialised on first use (a function-local static: thread-safe).
std::atomic<std::size_t>& stream_threshold() {
  static std::atomic<std::size_t> threshold{default_stream_min_bytes()};
  return threshold;
}
bool streams_output(const CpuCall& c, std::size_t out) {
  if (c.copied_to_device(out)) return true;
  std::size_t spanned = 0;
  for (const std::size_t b : c.bytes) spanned += b;
  return spanned >= stream_threshold().load(std::memory_order_relaxed);
}

// Writes the output rows [s0, s1) of argument `out` by rows(shift, r, b, e), which computes rows
// [b, e) of its inputs shifted by `shift` rows into r (row b at r + b * days): straight into
// the output, or, when it streams the output (streams_output), a row at a time into a buffer
// that stays in the cache, each row then streamed out past the caches.
template <class Rows>
void write_rows(const CpuCall& c, std::size_t out, Shape shape, std::size_t s0, std::size_t s1,
                Rows rows) {
  float* r = c.get<float>(out);
  if (!streams_output(c, out)) {
    rows(std::size_t{0}, r, s0, s1);
    return;
  }
  std::vector<float> row(shape.days);
  for (std::size_t s = s0; s < s1; ++s) {
    rows(s, row.data(), std::size_t{0}, std::size_t{1});
    stream_copy_unfenced(r + s * shape.days, row.data(), shape.days * sizeof(float));
  }
  stream_fence();
}

// An element-wise operator over [b, e): op(i, n, r) writes elements [i, i + n) into r (element
// i at r[0]); blocks of kBlock through a buffer and streamed out when it streams the output,
// as write_rows.
template <class Op>
void write_elements(const CpuCall& c, std::size_t out, std::size_t b, std::size_t e, Op op) {
  float* r = c.get<float>(out);
  if (!streams_output(c, out)) {
    op(b, e - b, r + b);
    return;
  }
  // 8 KiB: inside any CPU's L1 data cache (32 KiB or more on every x86-64 and Arm server core),
  // so the block is written and then streamed out without a trip to memory.
  constexpr std::size_t kBlock = 2048;
  float block[kBlock];
  for (std::size_t i = b; i < e; i += kBlock) {
    const std::size_t n = std::min(kBlock, e - i);
    op(i, n, block);
    stream_copy_unfenced(r + i, block, n * sizeof(float));
  }
  stream_fence();
}

// Scale and average by rows, in three parallel passes: (1) per chunk of stocks, the per-day
// sums and counts of its rows; (2) per day, the chunks' partials added in chunk order; (3) per
// stock, its row from the day totals. The chunks are fixed (32, fewer with fewer stocks; not
// one per worker), so the sums and the results do not depend on the executor. Rows, because
// the day-blocked loops (still the references' and rank's shape) read a few days of every stock
// per block, a page apart once a row is 4 KiB (1024 days), and took nearly twice the time
// (docs/decisions/022-cross-sectional-operators-work-by-rows.md).
template <class Rows>
void cross_sectional(const CpuCall& c, Shape shape, bool absolute, Rows rows) {
  const float* x = c.get<float>(0);
  const std::size_t stocks = shape.stocks, days = shape.days;
  constexpr std::size_t kChunks = 32;
  const std::size_t chunks = std::min(stocks, kChunks);
  std::vector<double> partial(chunks * days);
  std::vector<std::uint32_t> partial_count(chunks * days);
  split(c, chunks, [&](std::size_t k0, std::size_t k1) {
    for (std::size_t k = k0; k < k1; ++k) {
      detail::day_sums_of_rows(x, days, stocks * k / chunks, stocks * (k + 1) / chunks, absolute,
                               partial.data() + k * days, partial_count.data() + k * days);
    }
  });
  std::vector<double> sum(days);
  std::vector<std::uint32_t> count(days);
  split(c, days, [&](std::size_t d0, std::size_t d1) {
    for (std::size_t d = d0; d < d1; ++d) {
      double total = 0;
      std::uint32_t n = 0;
      for (std::size_t k = 0; k < chunks; ++k) {
        total += partial[k * days + d];
        n += partial_count[k * days + d];
      }
      sum[d] = total;
      count[d] = n;
    }
  });
  split(c, stocks, [&](std::size_t s0, std::size_t s1) { rows(sum.data(), count.data(), s0, s1); });
}

// Average's rows are all one row (the day means): computed once per part, then copied to each
// row, streamed when it streams the output (write_rows).
void average_out(const CpuCall& c, Shape shape, const double* sum, const std::uint32_t* count,
                 std::size_t s0, std::size_t s1) {
  if (!streams_output(c, 1)) {
    detail::average_rows(c.get<float>(1), shape.days, sum, count, s0, s1);
    return;
  }
  std::vector<float> row(shape.days);
  detail::average_rows(row.data(), shape.days, sum, count, 0, 1);
  for (std::size_t s = s0; s < s1; ++s) {
    stream_copy_unfenced(c.get<float>(1) + s * shape.days, row.data(), shape.days * sizeof(float));
  }
  stream_fence();
}

// Rank splits days in multiples of 16 (its core's block).
template <class F>
void split_days(const CpuCall& c, std::size_t days, F f) {
  const std::size_t blocks = (days + 15) / 16;
  split(c, blocks, [&](std::size_t b, std::size_t e) { f(b * 16, std::min(days, e * 16)); });
}

// A windowed operator's name carries its window: on the GPU each output sums its window, so
// the time per byte depends on it, and nodes of different windows need models of their own.
std::string windowed(const char* name, std::size_t window) {
  std::string s = name;  // appended: GCC 12 warns falsely (-Wrestrict) on "/" + to_string(..)
  s += '/';
  s += std::to_string(window);
  return s;
}

Kernel unary(const std::string& name, Shape shape, CpuCallFn cpu, GpuCallFn gpu) {
  return {name, std::move(cpu), std::move(gpu), same_shape(shape, 2, name)};
}

Kernel binary(const std::string& name, Shape shape, CpuCallFn cpu, GpuCallFn gpu) {
  return {name, std::move(cpu), std::move(gpu), same_shape(shape, 3, name)};
}

}  // namespace

bool gpu_compiled() noexcept { return detail::gpu::compiled(); }

std::size_t default_stream_min_bytes() noexcept {
  // Measured once, at first use: the last-level cache hwloc reports. The floor and the value
  // for an unknown cache only choose how outputs are written, never what they hold, so a wrong
  // guess costs speed on that machine, not results: below 4 MiB a call's data fit in one core's
  // L2 on current servers anyway, and 32 MiB is the order of a server's L3.
  static const std::size_t bytes = [] {
    constexpr std::size_t kFloor = std::size_t{4} << 20;
    constexpr std::size_t kUnknown = std::size_t{32} << 20;
    const std::size_t llc = weft::cpu::describe_cpu_topology().last_level_cache_bytes;
    return llc == 0 ? kUnknown : std::max(llc, kFloor);
  }();
  return bytes;
}
void set_stream_min_bytes(std::size_t bytes) noexcept {
  stream_threshold().store(bytes, std::memory_order_relaxed);
}
std::size_t stream_min_bytes() noexcept {
  return stream_threshold().load(std::memory_order_relaxed);
}

Kernel moving_mean(Shape shape, std::size_t window) {
  check_window(shape, window, "moving_mean");
  return unary(
      windowed("moving_mean", window), shape,
      [=](const CpuCall& c) {
        split(c, shape.stocks, [&](std::size_t s0, std::size_t s1) {
          write_rows(c, 1, shape, s0, s1,
                     [&](std::size_t shift, float* r, std::size_t b, std::size_t e) {
                       detail::moving_mean_rows(c.get<float>(0) + shift * shape.days, r, shape.days,
                                                window, b, e);
                     });
        });
      },
      [=](const GpuCall& c) {
        detail::gpu::moving_mean(c.get<float>(0), c.get<float>(1), shape.stocks, shape.days, window,
                                 c.stream);
      });
}

Kernel moving_stddev(Shape shape, std::size_t window) {
  check_window(shape, window, "moving_stddev");
  return unary(
      windowed("moving_stddev", window), shape,
      [=](const CpuCall& c) {
        split(c, shape.stocks, [&](std::size_t s0, std::size_t s1) {
          write_rows(c, 1, shape, s0, s1,
                     [&](std::size_t shift, float* r, std::size_t b, std::size_t e) {
                       detail::moving_stddev_rows(c.get<float>(0) + shift * shape.days, r,
                                                  shape.days, window, b, e);
                     });
        });
      },
      [=](const GpuCall& c) {
        detail::gpu::moving_stddev(c.get<float>(0), c.get<float>(1), shape.stocks, shape.days,
                                   window, c.stream);
      });
}

Kernel moving_correlation(Shape shape, std::size_t window) {
  check_window(shape, window, "moving_correlation");
  return binary(
      windowed("moving_correlation", window), shape,
      [=](const CpuCall& c) {
        split(c, shape.stocks, [&](std::size_t s0, std::size_t s1) {
          write_rows(c, 2, shape, s0, s1,
                     [&](std::size_t shift, float* r, std::size_t b, std::size_t e) {
                       detail::moving_correlation_rows(c.get<float>(0) + shift * shape.days,
                                                       c.get<float>(1) + shift * shape.days, r,
                                                       shape.days, window, b, e);
                     });
        });
      },
      [=](const GpuCall& c) {
        detail::gpu::moving_correlation(c.get<float>(0), c.get<float>(1), c.get<float>(2),
                                        shape.stocks, shape.days, window, c.stream);
      });
}

Kernel delta(Shape shape, std::size_t lag) {
  check_shape(shape, "delta");
  if (lag == 0 || lag >= shape.days) {
    throw InvalidArgument("factors::kernels::delta: lag " + std::to_string(lag) + " outside [1, " +
                          std::to_string(shape.days) + ") days");
  }
  return unary(
      "delta", shape,
      [=](const CpuCall& c) {
        split(c, shape.stocks, [&](std::size_t s0, std::size_t s1) {
          write_rows(
              c, 1, shape, s0, s1, [&](std::size_t shift, float* r, std::size_t b, std::size_t e) {
                detail::delta_rows(c.get<float>(0) + shift * shape.days, r, shape.days, lag, b, e);
              });
        });
      },
      [=](const GpuCall& c) {
        detail::gpu::delta(c.get<float>(0), c.get<float>(1), shape.stocks, shape.days, lag,
                           c.stream);
      });
}

// Rank writes its output in place even when a GPU node reads it next or it is large
// (streams_output): it writes blocks of 16 days down every row, 64-byte pieces that straddle
// cache lines (a row is not a whole number of lines), which non-temporal stores would send to
// memory as partial lines.
Kernel rank(Shape shape) {
  check_shape(shape, "rank");
  return unary(
      "rank", shape,
      [=](const CpuCall& c) {
        split_days(c, shape.days, [&](std::size_t d0, std::size_t d1) {
          detail::rank_days(c.get<float>(0), c.get<float>(1), shape.stocks, shape.days, d0, d1);
        });
      },
      [=](const GpuCall& c) {
        detail::gpu::rank(c.get<float>(0), c.get<float>(1), shape.stocks, shape.days, c.stream);
      });
}

Kernel scale(Shape shape) {
  check_shape(shape, "scale");
  return unary(
      "scale", shape,
      [=](const CpuCall& c) {
        cross_sectional(
            c, shape, true,
            [&](const double* sum, const std::uint32_t*, std::size_t s0, std::size_t s1) {
              write_rows(c, 1, shape, s0, s1,
                         [&](std::size_t shift, float* r, std::size_t b, std::size_t e) {
                           detail::scale_rows(c.get<float>(0) + shift * shape.days, r, shape.days,
                                              sum, b, e);
                         });
            });
      },
      [=](const GpuCall& c) {
        detail::gpu::scale(c.get<float>(0), c.get<float>(1), shape.stocks, shape.days, c.stream);
      });
}

Kernel multiply(Shape shape) {
  check_shape(shape, "multiply");
  return binary(
      "multiply", shape,
      [=](const CpuCall& c) {
        split(c, shape.count(), [&](std::size_t b, std::size_t e) {
          const float *x = c.get<float>(0), *y = c.get<float>(1);
          write_elements(c, 2, b, e, [&](std::size_t i, std::size_t n, float* r) {
            for (std::size_t k = 0; k < n; ++k) r[k] = x[i + k] * y[i + k];
          });
        });
      },
      [=](const GpuCall& c) {
        detail::gpu::multiply(c.get<float>(0), c.get<float>(1), c.get<float>(2), shape.count(),
                              c.stream);
      });
}

Kernel subtract(Shape shape) {
  check_shape(shape, "subtract");
  return binary(
      "subtract", shape,
      [=](const CpuCall& c) {
        split(c, shape.count(), [&](std::size_t b, std::size_t e) {
          const float *x = c.get<float>(0), *y = c.get<float>(1);
          write_elements(c, 2, b, e, [&](std::size_t i, std::size_t n, float* r) {
            for (std::size_t k = 0; k < n; ++k) r[k] = x[i + k] - y[i + k];
          });
        });
      },
      [=](const GpuCall& c) {
        detail::gpu::subtract(c.get<float>(0), c.get<float>(1), c.get<float>(2), shape.count(),
                              c.stream);
      });
}

Kernel average(Shape shape) {
  check_shape(shape, "average");
  return unary("average", shape,
               [=](const CpuCall& c) {
                 cross_sectional(
                     c, shape, false,
                     [&](const double* sum, const std::uint32_t* count, std::size_t s0,
                         std::size_t s1) { average_out(c, shape, sum, count, s0, s1); });
               },
               {});
}

}  // namespace factors::kernels
