// bench/gpu/segment_dots.hpp - the tasks of `weft demo`'s pool section: dot products over
// segments of random length of two vectors, as one would meet in sparse or graph codes; their
// input, their CPU reference, and the pool task that computes one (on a GPU's resident blocks
// or, without a GPU, on the pool's host backend).
#pragma once

#include <weft/gpu/task.hpp>

#include "harness/harness.hpp"

#include <chrono>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace weft::bench::gpu {

/// Segment lengths 32..2048, log-uniform (most tasks tiny, a few 64 times larger), over two
/// vectors of uniform values; `ref` is each segment's dot product on the CPU, in double.
struct SegmentDots {
  int tasks = 0;
  int total = 0;  // floats in each vector
  std::vector<int> begin, len;
  std::vector<float> x, y, ref;
  double cpu_seconds = 0;  // the reference's time, one thread

  static SegmentDots make(int tasks) {
    SegmentDots d;
    d.tasks = tasks;
    std::mt19937_64 rng(42);
    d.begin.resize(tasks);
    d.len.resize(tasks);
    for (int t = 0; t < tasks; ++t) {
      d.len[t] =
          static_cast<int>(std::exp2(5.0 + 6.0 * std::uniform_real_distribution<>(0, 1)(rng)));
      d.begin[t] = d.total;
      d.total += d.len[t];
    }
    d.x.resize(d.total);
    d.y.resize(d.total);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (int i = 0; i < d.total; ++i) {
      d.x[i] = u(rng);
      d.y[i] = u(rng);
    }
    const auto t0 = std::chrono::steady_clock::now();
    d.ref.resize(tasks);
    for (int t = 0; t < tasks; ++t) {
      double s = 0;
      for (int i = 0; i < d.len[t]; ++i)
        s += double(d.x[d.begin[t] + i]) * double(d.y[d.begin[t] + i]);
      d.ref[t] = static_cast<float>(s);
    }
    d.cpu_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return d;
  }
  /// Whether a float sum of segment t is the reference's to rounding.
  [[nodiscard]] bool close(float got, int t) const {
    return std::fabs(got - ref[t]) <= 1e-3f * (1.0f + std::sqrt(static_cast<float>(len[t])));
  }
};

#if defined(__CUDACC__)
// Dot product of x[begin, begin + n) and y[same] by the task's threads (a power of two, at
// most 1024); thread 0 stores it. Through the BlockContext: a resident block has two warps
// that do not run tasks, so threadIdx.x, blockDim.x and __syncthreads() are not the task's.
__device__ inline void block_dot(const float* x, const float* y, int begin, int n, float* out,
                                 const weft::gpu::BlockContext& b) {
  __shared__ float partial[1024];
  const int me = b.thread();
  float s = 0.0f;
  for (int i = me; i < n; i += b.threads()) s += x[begin + i] * y[begin + i];
  partial[me] = s;
  b.sync();
  for (int w = b.threads() / 2; w > 0; w /= 2) {
    if (me < w) partial[me] += partial[me + w];
    b.sync();
  }
  if (me == 0) *out = partial[0];
}
#endif

/// One segment's dot product, as a pool task.
struct SegmentDot {
  static constexpr std::uint32_t kId = 1;
  struct Payload {
    const float* x;
    const float* y;
    int begin;
    int n;
    float result;
  };
  WEFT_HD static void run(Payload& p, const weft::gpu::BlockContext& b) {
#if defined(__CUDA_ARCH__)
    block_dot(p.x, p.y, p.begin, p.n, &p.result, b);
    b.sync();
#else
    (void)b;
    float s = 0.0f;
    for (int i = 0; i < p.n; ++i) s += p.x[p.begin + i] * p.y[p.begin + i];
    p.result = s;
#endif
  }
};
using DemoTypes = weft::gpu::TaskTypes<SegmentDot>;
inline constexpr std::size_t kDemoCapacity = 32;

/// How a pool ran the segments: its time from the push to the last pop, the results that were
/// wrong (or came back with a tag no task had), and the tasks not delivered exactly once.
struct PoolRun {
  double seconds = 0;
  int wrong = 0;
  int missing = 0;
  [[nodiscard]] bool ok() const { return wrong == 0 && missing == 0; }
};

/// Pushes every segment of `d` to `pool` as one batch, the vectors at `x` and `y` (where the
/// pool's blocks reach them), pops them all and checks each against the reference.
template <class Pool>
PoolRun run_segments(Pool& pool, const SegmentDots& d, const float* x, const float* y) {
  using Record = typename Pool::Record;
  std::vector<Record> records(static_cast<std::size_t>(d.tasks));
  for (int t = 0; t < d.tasks; ++t) {
    records[t] = Record::template make<SegmentDot>({x, y, d.begin[t], d.len[t], 0.0f},
                                                   static_cast<std::uint64_t>(t));
  }
  std::vector<int> seen(static_cast<std::size_t>(d.tasks), 0);  // deliveries of each task
  std::vector<Record> got(4096);
  PoolRun run;
  run.seconds = time_seconds([&] {
    pool.push_batch(records);
    for (int done = 0; done < d.tasks;) {
      const std::size_t k = pool.pop_batch(got);
      for (std::size_t i = 0; i < k; ++i) {
        if (got[i].tag >= seen.size()) {  // a tag no task was pushed with
          ++run.wrong;
          continue;
        }
        const auto t = static_cast<int>(got[i].tag);
        ++seen[got[i].tag];
        if (!got[i].ok() || !d.close(got[i].template as<SegmentDot>().result, t)) ++run.wrong;
      }
      done += static_cast<int>(k);
    }
  });
  for (const int n : seen) run.missing += n == 1 ? 0 : 1;
  return run;
}

}  // namespace weft::bench::gpu
