// The GPU part of `weft demo`: many small, irregular tasks - dot products over segments of
// random length of two vectors in device memory - as one would meet in sparse or graph codes.
// Done three ways on the same input: through the pool, as one kernel launch per task, and on
// the CPU (the reference every GPU result is checked against).
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "pool_demo.hpp"
#include "segment_dots.hpp"
#include "weft/gpu/detail/cuda_check.cuh"
#include "weft/gpu/device.cuh"
#include "weft/gpu/pool.hpp"

namespace weft::bench::gpu {

namespace {

using DemoPool = weft::gpu::Pool<DemoTypes, kDemoCapacity>;

__global__ void segment_dot_kernel(const float* x, const float* y, int begin, int n, float* out) {
  // The same body as the pool's task, in a kernel of its own (bar.sync 1 over the whole block).
  const weft::gpu::BlockContext b(static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x),
                                  static_cast<int>(blockIdx.x), nullptr);
  block_dot(x, y, begin, n, out, b);
}

weft::gpu::PoolOptions demo_options() {
  weft::gpu::PoolOptions o;
  o.backend = weft::gpu::Backend::device;
  o.program = weft::gpu::device_program<DemoTypes, kDemoCapacity>();
  return o;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

std::string describe_default_pool(std::string& why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    why = e != cudaSuccess ? cudaGetErrorString(e) : "no GPU found";
    return {};
  }
  try {
    DemoPool pool(demo_options());
    return pool.describe() + "; " + std::to_string(pool.num_blocks()) + " blocks, " +
           std::to_string(pool.num_slots()) + " slots, " + std::to_string(pool.num_lanes()) +
           " scheduler lane(s)";
  } catch (const std::exception& ex) {
    why = ex.what();
    return {};
  }
}

bool run_gpu_demo(bool quick) {
  const SegmentDots d = SegmentDots::make(quick ? 20'000 : 200'000);
  const int tasks = d.tasks, total = d.total;
  const double cpu_s = d.cpu_seconds;
  auto close = [&d](float got, int t) { return d.close(got, t); };

  float *dx = nullptr, *dy = nullptr, *dout = nullptr;
  WEFT_CUDA_CHECK(cudaMalloc(&dx, sizeof(float) * total));
  WEFT_CUDA_CHECK(cudaMalloc(&dy, sizeof(float) * total));
  WEFT_CUDA_CHECK(cudaMalloc(&dout, sizeof(float) * tasks));
  WEFT_CUDA_CHECK(cudaMemcpy(dx, d.x.data(), sizeof(float) * total, cudaMemcpyHostToDevice));
  WEFT_CUDA_CHECK(cudaMemcpy(dy, d.y.data(), sizeof(float) * total, cudaMemcpyHostToDevice));

  // One kernel launch per task (a stream, back to back), before any pool exists: the pool's
  // resident kernel would keep other kernels waiting.
  cudaStream_t stream;
  WEFT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const auto l0 = std::chrono::steady_clock::now();
  for (int t = 0; t < tasks; ++t) {
    segment_dot_kernel<<<1, 128, 0, stream>>>(dx, dy, d.begin[t], d.len[t], dout + t);
  }
  WEFT_CUDA_CHECK(cudaStreamSynchronize(stream));
  const double launch_s = seconds_since(l0);
  std::vector<float> launched(tasks);
  WEFT_CUDA_CHECK(cudaMemcpy(launched.data(), dout, sizeof(float) * tasks, cudaMemcpyDeviceToHost));
  WEFT_CUDA_CHECK(cudaStreamDestroy(stream));
  int launch_wrong = 0;
  for (int t = 0; t < tasks; ++t) launch_wrong += close(launched[t], t) ? 0 : 1;

  PoolRun pooled;
  std::string described;
  {
    DemoPool pool(demo_options());
    described = pool.describe();
    pooled = run_segments(pool, d, dx, dy);
  }
  cudaFree(dx);
  cudaFree(dy);
  cudaFree(dout);

  std::printf("GPU: %s\n", described.c_str());
  std::printf("%d segmented dot products, segments of 32..2048 floats (%d floats in all)\n", tasks,
              total);
  std::printf("%-28s %10s %12s %10s  %s\n", "way", "time (s)", "us per task", "vs launch",
              "result");
  auto row = [&](const char* name, double s, bool ok) {
    std::printf("%-28s %10.4f %12.3f %9.1fx  %s\n", name, s, s / tasks * 1e6, launch_s / s,
                ok ? "verified" : "WRONG");
  };
  row("CPU, one thread (reference)", cpu_s, true);
  row("kernel launch per task", launch_s, launch_wrong == 0);
  row("weft GPU pool", pooled.seconds, pooled.ok());
  if (pooled.missing != 0) {
    std::printf("pool: %d task(s) not delivered exactly once\n", pooled.missing);
  }
  return launch_wrong == 0 && pooled.ok();
}

}  // namespace weft::bench::gpu
