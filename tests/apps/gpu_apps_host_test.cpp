// The GPU applications on the host backend (CI's CPU path): each verified against its CPU
// reference at small sizes. tests/apps/gpu_apps_device_test.cu runs them on a GPU.
#include <gtest/gtest.h>

#include <vector>

#include "app_pool.hpp"
#include "batched_gemm.hpp"

namespace apps::gpu {
namespace {

weft::gpu::PoolOptions host_options() {
  weft::gpu::PoolOptions o;
  o.host_blocks = 4;
  return o;
}

template <class T>
double batched_gemm_error(AppPool& pool, const GemmBatch& batch) {
  std::vector<T> a, b;
  fill_inputs(batch, a, b);
  std::vector<T> c(batch.c_size, T(-7)), ref(batch.c_size);
  reference_gemm(batch, a.data(), b.data(), ref.data());
  const auto tasks = gemm_tasks<T, kAppCapacity>(batch, a.data(), b.data(), c.data());
  EXPECT_EQ(tasks.size(), batch.tiles());
  run_tasks(pool, std::span<const AppPool::Record>(tasks));
  return max_relative_error<T>(c, ref);
}

TEST(BatchedGemm, EqualSizesMatchTheReferenceInBothPrecisions) {
  AppPool pool(host_options());
  const GemmBatch batch = GemmBatch::uniform(6, 64, 64, 64);
  EXPECT_EQ(batch.tiles(), 6u);
  EXPECT_EQ(batched_gemm_error<double>(pool, batch), 0.0);
  EXPECT_EQ(batched_gemm_error<float>(pool, batch), 0.0);
}

TEST(BatchedGemm, VariableSizesAcrossTileEdgesMatchTheReference) {
  AppPool pool(host_options());
  // Sizes from 1 to 150: tiles cut at 64 and 128, chunks of K cut at 32.
  const GemmBatch batch = GemmBatch::variable(24, 1, 150, 7);
  EXPECT_GT(batch.tiles(), batch.shapes.size());
  EXPECT_EQ(batched_gemm_error<double>(pool, batch), 0.0);
  EXPECT_EQ(batched_gemm_error<float>(pool, batch), 0.0);
}

TEST(BatchedGemm, BadSizesAreRefusedNamingThem) {
  EXPECT_THROW((void)GemmBatch::uniform(0, 64, 64, 64), std::invalid_argument);
  EXPECT_THROW((void)GemmBatch::variable(10, 20, 10, 1), std::invalid_argument);
}

}  // namespace
}  // namespace apps::gpu
