// The GPU applications on the host backend (CI's CPU path): each verified against its CPU
// reference at small sizes. tests/apps/gpu_apps_device_test.cu runs them on a GPU.
#include <gtest/gtest.h>

#include <vector>

#include "app_pool.hpp"
#include "batched_gemm.hpp"
#include "cholesky.hpp"

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

TEST(CholeskyGraph, EveryTaskWaitsForWhatItReadsAndWhatWroteItsTileBefore) {
  const CholeskyGraph g(4 * CholeskyTile::kTile);
  // 4 tiles: 4 POTRF, 6 TRSM, 6 SYRK, 4 GEMM.
  EXPECT_EQ(g.tasks().size(), 20u);
  std::size_t roots = 0;
  for (int d : g.dependencies()) roots += d == 0 ? 1 : 0;
  EXPECT_EQ(roots, 1u);  // only POTRF(0) can start
  EXPECT_EQ(g.tasks()[0].kind, CholeskyGraph::Kind::potrf);
  EXPECT_THROW(CholeskyGraph(100), std::invalid_argument);
  EXPECT_THROW(CholeskyGraph(0), std::invalid_argument);
}

TEST(Cholesky, TheFactorReproducesTheMatrix) {
  AppPool pool(host_options());
  const int n = 5 * CholeskyTile::kTile;
  const std::vector<double> a = spd_matrix(n);
  std::vector<double> f = a;
  cholesky_on_pool(pool, f.data(), n, n);
  EXPECT_LT(cholesky_residual(a, f, n), 1e-14);
  // The upper triangle is left as it was.
  EXPECT_EQ(f[0 + static_cast<std::size_t>(n - 1) * n], a[0 + static_cast<std::size_t>(n - 1) * n]);
}

TEST(Cholesky, AMatrixThatIsNotPositiveDefiniteIsReportedWithItsColumn) {
  AppPool pool(host_options());
  const int n = 2 * CholeskyTile::kTile;
  std::vector<double> a = spd_matrix(n);
  a[70 + 70 * static_cast<std::size_t>(n)] = -1.0;  // column 70, in the second diagonal tile
  try {
    cholesky_on_pool(pool, a.data(), n, n);
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("column 70"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace apps::gpu
