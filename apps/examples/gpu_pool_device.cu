// docs/gpu.md "Task types": the device path end to end. A task type, its resident kernel (made
// in this CUDA file by device_program), a pool on the GPU, a batch of tasks, and a pause that
// lets the GPU do other work. Built by `make test`; run where there is a GPU (skipped, exit
// 77, where there is none).
#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

#include <weft/gpu/device.cuh>  // the resident kernel: in a .cu file that sees the task types
#include <weft/gpu/pool.hpp>

// y[i] += a * x[i] over one slice, by every task thread of the block that runs it.
struct Saxpy {
  static constexpr std::uint32_t kId = 1;
  struct Payload {
    float a;
    int n;
    const float* x;
    float* y;
  };
  WEFT_HD static void run(Payload& p, const weft::gpu::BlockContext& b) {
    const Payload in = p;  // read once: after each store to y the compiler would read p again
    for (int i = b.thread(); i < in.n; i += b.threads()) in.y[i] += in.a * in.x[i];
  }
};
using Tasks = weft::gpu::TaskTypes<Saxpy>;
using GpuPool = weft::gpu::Pool<Tasks, 32>;  // 32 bytes of payload per task

int main() {
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus == 0) {
    std::puts("no GPU: skipped");
    return 77;
  }
  constexpr int kTasks = 256, kSlice = 4096, kN = kTasks * kSlice;
  // Device memory before the pool: cudaMalloc and cudaFree wait for every kernel on the GPU,
  // the pool's resident one included (see "Pausing").
  float* x = nullptr;
  float* y = nullptr;
  cudaMalloc(&x, kN * sizeof(float));
  cudaMalloc(&y, kN * sizeof(float));
  const std::vector<float> ones(kN, 1.0f);
  cudaMemcpy(x, ones.data(), kN * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemset(y, 0, kN * sizeof(float));

  weft::gpu::PoolOptions options;
  options.backend = weft::gpu::Backend::device;
  options.program = weft::gpu::device_program<Tasks, 32>();  // the kernel, compiled here
  GpuPool pool(options);
  std::printf("pool: %s\n", pool.describe().c_str());

  for (int round = 1; round <= 2; ++round) {
    std::vector<GpuPool::Record> batch;
    for (int t = 0; t < kTasks; ++t) {
      batch.push_back(GpuPool::Record::make<Saxpy>({2.0f, kSlice, x + t * kSlice, y + t * kSlice}));
    }
    pool.push_batch(batch);
    for (int t = 0; t < kTasks; ++t) {
      if (const auto done = pool.pop(); !done.ok()) {
        std::printf("a task failed: %s\n", weft::gpu::to_string(done.status));
        return 1;
      }
    }
    // Paused, the pool's kernel is gone and the GPU takes any other work (cuBLAS, your
    // kernels, whole-device calls); the pool keeps its queues, and resume() relaunches it.
    pool.pause();
    std::vector<float> got(kN);
    cudaMemcpy(got.data(), y, kN * sizeof(float), cudaMemcpyDeviceToHost);
    for (int i = 0; i < kN; ++i) {
      if (got[i] != 2.0f * static_cast<float>(round)) {
        std::printf("y[%d] = %g after round %d\n", i, got[i], round);
        return 1;
      }
    }
    std::printf("round %d: %d tasks, y = %g everywhere\n", round, kTasks, got[0]);
    pool.resume();
  }
  pool.pause();  // the frees below wait for the GPU's kernels
  cudaFree(x);
  cudaFree(y);
  return 0;
}
