// factor_kernels.hpp - the factor operators as weft graph kernels: each has a CPU implementation
// (the cores of factor_ops.hpp split across the executor's workers) and, except AVG (the fence), a
// GPU one (CUDA, factor_kernels.cu). All data are float series of one Shape, stock-major.
#pragma once

#include <cstddef>

#include "weft/graph/graph.hpp"

namespace factors::kernels {

/// S stocks x D days of floats.
struct Shape {
  std::size_t stocks = 0;
  std::size_t days = 0;
  [[nodiscard]] std::size_t count() const noexcept { return stocks * days; }
  [[nodiscard]] std::size_t bytes() const noexcept { return count() * sizeof(float); }
};

// Arguments: the inputs read, then the output written; every argument of Shape::bytes()
// (checked when the node is added). Kernel names are the operator's ("delta", "rank", ...), with
// the window for windowed ones ("moving_mean/10"): on the GPU their time per byte grows with
// the window, so each window has cost models of its own. Throw InvalidArgument for an
// empty shape, a window of 0 or longer than the days, a lag of 0 or >= the days.
weft::graph::Kernel moving_mean(Shape shape, std::size_t window);
weft::graph::Kernel moving_stddev(Shape shape, std::size_t window);
weft::graph::Kernel moving_correlation(Shape shape, std::size_t window);  // x, y -> r
weft::graph::Kernel delta(Shape shape, std::size_t lag);
weft::graph::Kernel rank(Shape shape);
weft::graph::Kernel scale(Shape shape);
weft::graph::Kernel multiply(Shape shape);  // x, y -> x * y
weft::graph::Kernel subtract(Shape shape);  // x, y -> x - y
/// AVG: the fence, CPU only.
weft::graph::Kernel average(Shape shape);

/// The CPU implementations (all but rank's) write an output past the caches (stream_copy.hpp)
/// when a GPU node reads it next (CpuCall::copied_to_device) and when the call's arguments
/// (inputs and outputs) span at least stream_min_bytes() bytes in all: by default
/// default_stream_min_bytes(), the machine's last-level cache measured at first use (data that
/// large cannot leave the output in the cache for its consumer; smaller calls write in place),
/// at least 4 MiB, 32 MiB where the cache size is unknown.
/// Process-wide; set_stream_min_bytes overrides it, for measurements (`weft bench graph
/// --stream-min-bytes`); SIZE_MAX streams only the outputs going to the GPU.
[[nodiscard]] std::size_t default_stream_min_bytes() noexcept;
void set_stream_min_bytes(std::size_t bytes) noexcept;
[[nodiscard]] std::size_t stream_min_bytes() noexcept;

/// Whether the GPU implementations were compiled (built with CUDA). Without them the
/// kernels still declare one, so that mappings and the emulated device treat them as
/// GPU-capable; calling it on a CUDA stream is then an error.
bool gpu_compiled() noexcept;

}  // namespace factors::kernels
