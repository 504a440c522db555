// docs/split.md's opening example, built and run as a test so that it stays true. It runs on
// the emulated device (a host thread standing in for the GPU), so it runs anywhere.
#include <weft/weft.hpp>

#include <cstdint>
#include <cstdio>
#include <vector>

namespace ws = weft::split;

int main() {
  // Two workers take the CPU's part; this thread feeds the GPU side.
  weft::cpu::Executor ex({.workers = 2, .pinning = weft::cpu::Pinning::none});
  // GpuSide::best_available() gives CUDA device 0 where there is one.
  auto gpu = ws::GpuSide::emulated();
  // The prior: each side's peak rate in the region's unit of work (here, elements a second).
  ws::Splitter split(ex, *gpu, "scale", {.gpu = 4e9, .cpu = 1e9});

  std::vector<double> x(1 << 20, 1.0);
  const auto n = static_cast<std::int64_t>(x.size());
  const ws::RegionWork region{.size = double(n), .work = double(n), .items = n, .grain = 1024};
  auto scale = [&](ws::Range r) {
    for (std::int64_t i = r.begin; i < r.end; ++i) x[static_cast<std::size_t>(i)] *= 2;
  };
  for (int i = 0; i < 5; ++i) {
    const ws::RegionReport report = split.run(
        region,
        [&](ws::Range r, const ws::GpuContext& g) {
          // On a CUDA device: enqueue the copies and kernels for r on g.stream, and return.
          if (g.emulated) scale(r);
        },
        [&](ws::Range r, std::size_t /*core*/) { scale(r); });
    std::printf("region %d: %.0f%% of the work on the GPU side, %.0f%% next\n", i,
                100 * report.gsplit, 100 * report.next_gsplit);
  }
  for (double v : x) {
    if (v != 32.0) return 1;  // every element doubled once per region
  }
  return 0;
}
