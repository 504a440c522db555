// The GPU applications on a GPU: each verified against its CPU reference on the device
// backend, with device memory. Each test skips (never passes) where no GPU is usable.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <vector>

#include "app_pool.hpp"
#include "batched_gemm.hpp"
#include "cholesky.hpp"

namespace apps::gpu {
namespace {

bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

template <class T>
double batched_gemm_error_on_gpu(AppPool& pool, const GemmBatch& batch) {
  std::vector<T> a, b;
  fill_inputs(batch, a, b);
  std::vector<T> ref(batch.c_size), got(batch.c_size);
  reference_gemm(batch, a.data(), b.data(), ref.data());
  T *da = nullptr, *db = nullptr, *dc = nullptr;
  pool.pause();  // allocations and copies synchronize the device
  EXPECT_EQ(cudaMalloc(&da, sizeof(T) * a.size()), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&db, sizeof(T) * b.size()), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&dc, sizeof(T) * got.size()), cudaSuccess);
  cudaMemcpy(da, a.data(), sizeof(T) * a.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(db, b.data(), sizeof(T) * b.size(), cudaMemcpyHostToDevice);
  cudaMemset(dc, 0xFF, sizeof(T) * got.size());
  pool.resume();
  const auto tasks = gemm_tasks<T, kAppCapacity>(batch, da, db, dc);
  run_tasks(pool, std::span<const AppPool::Record>(tasks));
  pool.pause();
  cudaMemcpy(got.data(), dc, sizeof(T) * got.size(), cudaMemcpyDeviceToHost);
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc);
  pool.resume();
  return max_relative_error<T>(got, ref);
}

TEST(BatchedGemmOnGpu, EqualAndVariableSizesMatchTheReference) {
  if (!have_gpu()) GTEST_SKIP() << "no usable GPU on this machine";
  AppPool pool(device_pool_options({0}));
  const GemmBatch fixed = GemmBatch::uniform(40, 64, 64, 64);
  const GemmBatch variable = GemmBatch::variable(30, 1, 200, 11);
  EXPECT_EQ(batched_gemm_error_on_gpu<double>(pool, fixed), 0.0);
  EXPECT_EQ(batched_gemm_error_on_gpu<float>(pool, fixed), 0.0);
  EXPECT_EQ(batched_gemm_error_on_gpu<double>(pool, variable), 0.0);
  EXPECT_EQ(batched_gemm_error_on_gpu<float>(pool, variable), 0.0);
}

TEST(CholeskyOnGpu, TheFactorReproducesTheMatrix) {
  if (!have_gpu()) GTEST_SKIP() << "no usable GPU on this machine";
  AppPool pool(device_pool_options({0}));
  const int n = 8 * CholeskyTile::kTile;
  const std::vector<double> a = spd_matrix(n);
  std::vector<double> f(a.size());
  double* d = nullptr;
  pool.pause();
  ASSERT_EQ(cudaMalloc(&d, sizeof(double) * a.size()), cudaSuccess);
  cudaMemcpy(d, a.data(), sizeof(double) * a.size(), cudaMemcpyHostToDevice);
  pool.resume();
  cholesky_on_pool(pool, d, n, n);
  pool.pause();
  cudaMemcpy(f.data(), d, sizeof(double) * f.size(), cudaMemcpyDeviceToHost);
  cudaFree(d);
  EXPECT_LT(cholesky_residual(a, f, n), 1e-14);
}

}  // namespace
}  // namespace apps::gpu
