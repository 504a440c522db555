// bench/gpu/apps_benchmarks.hpp - the parts of `weft bench gpu-apps` (apps_suite.cu runs them):
// each adds its applications' comparisons to the suite. The pool is paused when a function is
// called and when it returns.
#pragma once

#include <cuda_runtime.h>

#include <vector>

#include "../harness/harness.hpp"
#include "app_pool.hpp"
#include "cholesky_pool.hpp"

namespace weft::bench::gpu {

/// Median of `reps` timed runs after one untimed, in microseconds.
template <class F>
double median_us(int reps, F&& run) {
  std::vector<double> t;
  for (int r = 0; r < reps + 1; ++r) {
    const double dt = time_seconds(run);
    if (r > 0) t.push_back(dt * 1e6);
  }
  return median(t);
}

/// A device copy of `v` (the pool must be paused: allocation synchronizes the device).
template <class T>
T* device_copy(const std::vector<T>& v) {
  T* d = nullptr;
  if (cudaMalloc(&d, sizeof(T) * v.size()) != cudaSuccess ||
      cudaMemcpy(d, v.data(), sizeof(T) * v.size(), cudaMemcpyHostToDevice) != cudaSuccess) {
    throw std::runtime_error("gpu-apps: a device buffer could not be made");
  }
  return d;
}
template <class T>
std::vector<T> host_copy(const T* d, std::size_t n) {
  std::vector<T> v(n);
  if (cudaMemcpy(v.data(), d, sizeof(T) * n, cudaMemcpyDeviceToHost) != cudaSuccess) {
    throw std::runtime_error("gpu-apps: a device buffer could not be read");
  }
  return v;
}

/// cholesky_<n> against cuSOLVER's potrf and LAPACKE's dpotrf on the CPU, weft on `wide_pool`
/// (cholesky_pool.hpp) at the block size cholesky_block_for chooses; the other block size, and
/// the chosen one on the applications' `pool`, as metrics. Both pools run task graphs, and
/// both are paused on entry and on return.
void cholesky_benchmarks(Suite& suite, apps::gpu::AppPool& pool, apps::gpu::CholeskyPool& wide_pool,
                         const std::vector<int>& sizes, int reps);
/// spmv_bs_mixed: the pool mixing SpMV and Black-Scholes tasks against the same bodies as
/// kernels one after the other (serial) and on two streams (cke), the pool one kind after the
/// other (pool_serial), and cuSPARSE's SpMV then the Black-Scholes kernel (cusparse). The pool
/// is the job's own (apps::gpu::SpmvBsPool on GPU 0); no other pool may be running.
void spmv_bs_benchmark(Suite& suite, bool quick, int reps);

/// tnn_<n>_<d>: the pool's Gram tiles feeding the heaps as they land, against one cuBLAS GEMM
/// of the whole Gram matrix, then the heaps on the CPU (gemm_then_heaps); both feed the heaps
/// on the same CPU executor (the cores the pool's lanes leave).
void tnn_benchmarks(Suite& suite, apps::gpu::AppPool& pool, bool quick, int reps);
/// kmeans_<n>: the pool's assignment tasks against cuBLAS (scores by GEMM, an argmin kernel)
/// and OpenBLAS on the CPU, the same iterations and centroid update.
void kmeans_benchmarks(Suite& suite, apps::gpu::AppPool& pool, bool quick, int reps);

/// multi_gpu_gemm_efficiency_<n> (2 GPUs or more): one DGEMM cut into tile tasks on a pool over
/// every GPU; the rate of all together over the sum of each GPU's rate alone (seed 000 §4.5).
/// Makes its own pools (the caller's must be paused).
void multi_gpu_gemm_benchmarks(Suite& suite, bool quick, int reps);

}  // namespace weft::bench::gpu
