// The GPU applications on a GPU: each verified against its CPU reference on the device
// backend, with device memory. Each test skips (never passes) where no GPU is usable.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <weft/cpu/executor.hpp>
#include <weft/gpu/device.cuh>

#include "app_pool.hpp"
#include "batched_gemm.hpp"
#include "cholesky.hpp"
#include "cholesky_pool.hpp"
#include "gemm_tile_variants.hpp"
#include "kmeans.hpp"
#include "multi_gpu_gemm.hpp"
#include "spmv_bs.hpp"
#include "tnn.hpp"

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

// Factors a copy of `a` (order n) in device memory with `factor` (a driver: pool, matrix, n)
// and returns the result. The pool is paused around the allocation and the copies (they
// would wait for the device, which a running pool never lets go).
template <class Pool, class Driver>
std::vector<double> factored_on_gpu(Pool& pool, const std::vector<double>& a, int n,
                                    Driver factor) {
  std::vector<double> f(a.size());
  double* d = nullptr;
  pool.pause();
  EXPECT_EQ(cudaMalloc(&d, sizeof(double) * a.size()), cudaSuccess);
  cudaMemcpy(d, a.data(), sizeof(double) * a.size(), cudaMemcpyHostToDevice);
  pool.resume();
  factor(pool, d, n);
  pool.pause();
  cudaMemcpy(f.data(), d, sizeof(double) * f.size(), cudaMemcpyDeviceToHost);
  cudaFree(d);
  pool.resume();
  return f;
}

TEST(CholeskyOnGpu, TheFactorReproducesTheMatrix) {
  if (!have_gpu()) GTEST_SKIP() << "no usable GPU on this machine";
  AppPool pool(device_pool_options({0}));
  const int n = 8 * CholeskyTile::kTile;
  const std::vector<double> a = spd_matrix(n);
  const std::vector<double> f = factored_on_gpu(
      pool, a, n, [](AppPool& p, double* m, int order) { cholesky_on_pool(p, m, order, order); });
  EXPECT_LT(cholesky_residual(a, f, n), 1e-14);
}

// The same as one task graph: the blocks resolve the dependencies (816 tasks at n = 1024).
TEST(CholeskyOnGpu, TheFactorAsAGraphReproducesTheMatrix) {
  if (!have_gpu()) GTEST_SKIP() << "no usable GPU on this machine";
  weft::gpu::PoolOptions options = device_pool_options({0});
  options.graph_capacity = 1024;  // graphs are opt-in on the device backend
  AppPool pool(options);
  for (const int n : {8 * CholeskyTile::kTile, 16 * CholeskyTile::kTile}) {
    const std::vector<double> a = spd_matrix(n);
    const std::vector<double> f = factored_on_gpu(pool, a, n, [](AppPool& p, double* m, int order) {
      cholesky_graph_on_pool(p, m, order, order);
    });
    EXPECT_LT(cholesky_residual(a, f, n), 1e-14) << "n = " << n;
  }
}

// Factors a 256 x 256 matrix whose second block's first diagonal element is -1, on a live
// `pool`, in tasks of `block` tiles a side, by both drivers: each must throw naming the column.
// The pool is paused on return (and between the runs, for the copies).
template <class PoolT>
void expect_pivot_column_named(PoolT& pool, int block) {
  const int m = 4 * CholeskyTile::kTile, column = 2 * CholeskyTile::kTile + 6;
  std::vector<double> bad = spd_matrix(m);
  bad[column + column * static_cast<std::size_t>(m)] = -1.0;
  double* d = nullptr;
  pool.pause();
  ASSERT_EQ(cudaMalloc(&d, sizeof(double) * bad.size()), cudaSuccess);
  for (const bool as_graph : {false, true}) {
    cudaMemcpy(d, bad.data(), sizeof(double) * bad.size(), cudaMemcpyHostToDevice);
    pool.resume();
    try {
      CholeskyPlan<PoolT> plan(pool, m, block);
      as_graph ? plan.factor_as_graph(d, m) : plan.factor_host_tracked(d, m);
      ADD_FAILURE() << "no error (block " << block << ")";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("(column " + std::to_string(column) + ")"),
                std::string::npos)
          << e.what();
    }
    pool.pause();  // whatever was still in flight has ended
  }
  cudaFree(d);
}

// Blocks of 2 x 2 tiles, one task each, both drivers; and a bad pivot in the second block's
// first diagonal tile, named by its column (on the GPU the tile after it fails too: the first
// is the one reported).
TEST(CholeskyOnGpu, TheFactorInBlocksReproducesTheMatrix) {
  if (!have_gpu()) GTEST_SKIP() << "no usable GPU on this machine";
  weft::gpu::PoolOptions options = device_pool_options({0});
  options.graph_capacity = 1024;
  AppPool pool(options);
  const int n = 16 * CholeskyTile::kTile;  // 8 blocks a side: 120 tasks
  const std::vector<double> a = spd_matrix(n);
  for (const bool as_graph : {false, true}) {
    const std::vector<double> f =
        factored_on_gpu(pool, a, n, [as_graph](AppPool& p, double* m, int order) {
          CholeskyPlan<AppPool> plan(p, order, 2);
          as_graph ? plan.factor_as_graph(m, order) : plan.factor_host_tracked(m, order);
        });
    EXPECT_LT(cholesky_residual(a, f, n), 1e-14) << (as_graph ? "as a graph" : "host-tracked");
  }
  expect_pivot_column_named(pool, 2);
}

// CholeskyPool: one block of 256 task threads a SM, whose updates of blocks of 2 x 2 tiles are
// one 128 x 128 product (UpdateBlockWide); tiles and blocks of 3 on the same pool run the
// other bodies. Both drivers.
TEST(CholeskyOnGpu, TheWidePoolFactorsInTilesAndBlocks) {
  if (!have_gpu()) GTEST_SKIP() << "no usable GPU on this machine";
  CholeskyPool pool(cholesky_pool_options({0}, 1024));
  EXPECT_NE(pool.describe().find("1 blocks of 256 threads"), std::string::npos) << pool.describe();
  constexpr int kTile = CholeskyTile::kTile;
  for (const auto& [n, block] :
       std::vector<std::pair<int, int>>{{16 * kTile, 2}, {8 * kTile, 1}, {6 * kTile, 3}}) {
    const std::vector<double> a = spd_matrix(n);
    for (const bool as_graph : {false, true}) {
      const std::vector<double> f =
          factored_on_gpu(pool, a, n, [&](CholeskyPool& p, double* m, int order) {
            CholeskyPlan<CholeskyPool> plan(p, order, block);
            as_graph ? plan.factor_as_graph(m, order) : plan.factor_host_tracked(m, order);
          });
      EXPECT_LT(cholesky_residual(a, f, n), 1e-14)
          << "n = " << n << ", block " << block << (as_graph ? ", as a graph" : "");
    }
  }
}

// Reports whether UpdateBlockWide::run would take its 128 x 128 path for `update` on the block
// running it: the GPU test that the path is built in and chosen where it should be.
struct WidePathProbe {
  static constexpr std::uint32_t kId = 901;
  struct Payload {
    UpdateBlock::Payload update;
    int taken;
  };
  WEFT_HD static void run(Payload& p, const weft::gpu::BlockContext& ctx) {
    const bool taken = UpdateBlockWide::takes_wide_path(p.update, ctx);
    ctx.sync();
    if (ctx.thread() == 0) p.taken = taken ? 1 : 0;
  }
};

TEST(CholeskyOnGpu, TheWideUpdateIsTakenForAlignedBlocksOfTwoOn256Threads) {
  if (!have_gpu()) GTEST_SKIP() << "no usable GPU on this machine";
  using ProbePool = weft::gpu::Pool<weft::gpu::TaskTypes<WidePathProbe>, 64>;
  weft::gpu::PoolOptions o = cholesky_pool_options({0}, 0);
  o.program = weft::gpu::device_program<weft::gpu::TaskTypes<WidePathProbe>, 64>();
  ProbePool pool(o);
  auto* aligned = reinterpret_cast<double*>(std::uintptr_t{1} << 12);  // never dereferenced
  const std::vector<std::pair<UpdateBlock::Payload, int>> cases{
      {{aligned, 8192, 1, 0, 0, 2}, 1},      // blocks of 2, aligned: the wide path
      {{aligned, 8192, 1, 0, 0, 3}, 0},      // blocks of 3
      {{aligned, 8191, 1, 0, 0, 2}, 0},      // odd lda
      {{aligned + 1, 8192, 1, 0, 0, 2}, 0},  // misaligned matrix
  };
  std::vector<ProbePool::Record> records;
  for (std::size_t c = 0; c < cases.size(); ++c)
    records.push_back(ProbePool::Record::make<WidePathProbe>({cases[c].first, -1}, c));
  pool.push_batch(std::span<const ProbePool::Record>(records), 0);
  for (std::size_t got = 0; got < cases.size(); ++got) {
    const ProbePool::Record r = pool.pop(0);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r.as<WidePathProbe>().taken, cases[r.tag].second) << "case " << r.tag;
  }
}

// One SYRK and one GEMM update of blocks of 2 x 2 tiles on CholeskyPool (the wide path, as
// the test above shows), against the host: A_22 -= A_20 A_20^T on and below the diagonal
// only, A_21 -= A_20 A_10^T whole; every element above the diagonal keeps its value.
TEST(CholeskyOnGpu, TheWideUpdateSubtractsTheProductFromTheLowerTriangleOnly) {
  if (!have_gpu()) GTEST_SKIP() << "no usable GPU on this machine";
  CholeskyPool pool(cholesky_pool_options({0}, 0));
  constexpr int kBlock = 2 * CholeskyTile::kTile, n = 3 * kBlock;
  std::vector<double> a(static_cast<std::size_t>(n) * n);
  std::mt19937_64 gen(43);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (int c = 0; c < n; ++c) {
    for (int r = 0; r < n; ++r) a[r + static_cast<std::size_t>(c) * n] = r < c ? 7.0 : u(gen);
  }
  std::vector<double> want = a;
  auto subtract = [&](int i, int j, bool lower_only) {
    for (int c = j * kBlock; c < (j + 1) * kBlock; ++c) {
      for (int r = i * kBlock; r < (i + 1) * kBlock; ++r) {
        if (lower_only && r < c) continue;
        double sum = 0.0;
        for (int k = 0; k < kBlock; ++k) {
          sum += a[r + static_cast<std::size_t>(k) * n] * a[c + static_cast<std::size_t>(k) * n];
        }
        want[r + static_cast<std::size_t>(c) * n] -= sum;
      }
    }
  };
  subtract(2, 2, true);
  subtract(2, 1, false);
  const std::vector<double> got = factored_on_gpu(pool, a, n, [](CholeskyPool& p, double* m, int) {
    const std::vector<CholeskyPool::Record> tasks{
        CholeskyPool::Record::make<UpdateBlock>({m, n, 2, 2, 0, 2}, 0),
        CholeskyPool::Record::make<UpdateBlock>({m, n, 2, 1, 0, 2}, 1)};
    run_tasks(p, std::span<const CholeskyPool::Record>(tasks));
  });
  double worst = 0.0;
  std::size_t upper_changed = 0;
  for (int c = 0; c < n; ++c) {
    for (int r = 0; r < n; ++r) {
      const std::size_t e = r + static_cast<std::size_t>(c) * n;
      if (r < c) upper_changed += got[e] != 7.0 ? 1 : 0;
      worst = std::max(worst, std::abs(got[e] - want[e]));
    }
  }
  EXPECT_EQ(upper_changed, 0u);
  EXPECT_LT(worst, 1e-12);
}

// On CholeskyPool (POTRF on a window of 4 parts): a non-positive pivot in the second block's
// first diagonal tile is named by its column, in tiles and in blocks of 2, by both drivers.
TEST(CholeskyOnGpu, TheWidePoolNamesANonPositivePivotsColumn) {
  if (!have_gpu()) GTEST_SKIP() << "no usable GPU on this machine";
  CholeskyPool pool(cholesky_pool_options({0}, 1024));
  for (const int block : {1, 2}) expect_pivot_column_named(pool, block);
}

// A non-positive pivot in the second diagonal tile: the register-resident POTRF leaves its
// steps at that column, every thread at the same barrier, and the driver names the column.
TEST(CholeskyOnGpu, ANonPositivePivotIsReportedWithItsColumn) {
  if (!have_gpu()) GTEST_SKIP() << "no usable GPU on this machine";
  AppPool pool(device_pool_options({0}));
  const int n = 2 * CholeskyTile::kTile;
  std::vector<double> a = spd_matrix(n);
  a[70 + 70 * static_cast<std::size_t>(n)] = -1.0;
  double* d = nullptr;
  pool.pause();
  ASSERT_EQ(cudaMalloc(&d, sizeof(double) * a.size()), cudaSuccess);
  cudaMemcpy(d, a.data(), sizeof(double) * a.size(), cudaMemcpyHostToDevice);
  pool.resume();
  try {
    cholesky_on_pool(pool, d, n, n);
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("column 70"), std::string::npos) << e.what();
  }
  pool.pause();  // whatever was still in flight has ended
  cudaFree(d);
}

template <class T>
T* to_device(const std::vector<T>& v) {
  T* d = nullptr;
  EXPECT_EQ(cudaMalloc(&d, sizeof(T) * v.size()), cudaSuccess);
  cudaMemcpy(d, v.data(), sizeof(T) * v.size(), cudaMemcpyHostToDevice);
  return d;
}
template <class T>
std::vector<T> to_host(const T* d, std::size_t n) {
  std::vector<T> v(n);
  cudaMemcpy(v.data(), d, sizeof(T) * n, cudaMemcpyDeviceToHost);
  return v;
}

TEST(SpmvBlackScholesOnGpu, MixedTasksGiveTheReferenceResults) {
  if (!have_gpu()) GTEST_SKIP() << "no usable GPU on this machine";
  const CsrMatrix m = CsrMatrix::skewed(20000, 8000, 2000, 5);
  std::vector<float> x(static_cast<std::size_t>(m.cols));
  for (std::size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<float>(static_cast<int>(i % 9) - 4) / 8.0f;
  std::vector<float> y_ref, call_ref, put_ref;
  reference_spmv(m, x, y_ref);
  const Options o = Options::random(30000, 9);
  reference_black_scholes(o, 0.02f, 0.30f, call_ref, put_ref);
  auto* rs = to_device(m.row_start);
  auto* cols = to_device(m.col);
  auto* vals = to_device(m.value);
  auto* dx = to_device(x);
  auto* dy = to_device(std::vector<float>(y_ref.size()));
  auto* spot = to_device(o.spot);
  auto* strike = to_device(o.strike);
  auto* years = to_device(o.years);
  auto* call = to_device(std::vector<float>(call_ref.size()));
  auto* put = to_device(std::vector<float>(put_ref.size()));
  {
    SpmvBsPool pool(spmv_bs_pool_options({0}));
    const SpmvBsArrays arrays{rs,    cols,   vals,  dx,   dy,  m.rows,
                              spot,  strike, years, call, put, static_cast<int>(o.spot.size()),
                              0.02f, 0.30f};
    const auto tasks = spmv_bs_tasks<kSpmvBsCapacity>(arrays, 512, 1024, true);
    run_tasks(pool, std::span<const SpmvBsPool::Record>(tasks));
    pool.pause();
    // The entries are small multiples of powers of two: every sum is exact in any order.
    EXPECT_LE(max_relative_error<float>(to_host(dy, y_ref.size()), y_ref), 1e-5);
    EXPECT_LE(max_relative_error<float>(to_host(call, call_ref.size()), call_ref), 1e-4);
    EXPECT_LE(max_relative_error<float>(to_host(put, put_ref.size()), put_ref), 1e-4);
  }
  for (void* p : {static_cast<void*>(rs), static_cast<void*>(cols), static_cast<void*>(vals),
                  static_cast<void*>(dx), static_cast<void*>(dy), static_cast<void*>(spot),
                  static_cast<void*>(strike), static_cast<void*>(years), static_cast<void*>(call),
                  static_cast<void*>(put)}) {
    cudaFree(p);
  }
}

// On the GPU too, tile tasks with c_through_shared write exactly the C of the same tasks
// without it: FP64 on the tensor cores, FP32 on the scalar units, tile edges, beta != 0 and
// lower_only (test::varied_tile_tasks), C in device memory.
template <class T>
void expect_gathered_c_equals_direct_on_gpu(AppPool& pool) {
  const GemmBatch batch = GemmBatch::variable(12, 1, 150, 9);
  std::vector<T> a, b;
  fill_inputs(batch, a, b);
  const std::vector<T> before = test::varied_c_before<T>(batch);
  std::vector<T> direct(before.size()), gathered(before.size());
  pool.pause();  // allocations and copies synchronize the device
  T* da = to_device(a);
  T* db = to_device(b);
  T* dc_direct = to_device(before);
  T* dc_gathered = to_device(before);
  pool.resume();
  const auto run = [&](T* dc, bool through_shared) {
    const auto tasks = test::varied_tile_tasks(batch, da, db, dc, through_shared);
    run_tasks(pool, std::span<const AppPool::Record>(tasks));
  };
  run(dc_direct, false);
  run(dc_gathered, true);
  pool.pause();
  cudaMemcpy(direct.data(), dc_direct, sizeof(T) * direct.size(), cudaMemcpyDeviceToHost);
  cudaMemcpy(gathered.data(), dc_gathered, sizeof(T) * gathered.size(), cudaMemcpyDeviceToHost);
  for (T* p : {da, db, dc_direct, dc_gathered}) cudaFree(p);
  pool.resume();
  EXPECT_NE(direct, before);  // the tasks wrote C
  EXPECT_EQ(gathered, direct);
}

TEST(BatchedGemmOnGpu, CThroughSharedMemoryWritesTheSameC) {
  if (!have_gpu()) GTEST_SKIP() << "no usable GPU on this machine";
  AppPool pool(device_pool_options({0}));
  expect_gathered_c_equals_direct_on_gpu<double>(pool);
  expect_gathered_c_equals_direct_on_gpu<float>(pool);
  pool.pause();
}

TEST(TnnOnGpu, HeapsFedFromPinnedTileBuffersFindTheBruteForceNeighbours) {
  if (!have_gpu()) GTEST_SKIP() << "no usable GPU on this machine";
  const PointSet points = PointSet::random(1000, 64, 3);
  constexpr std::size_t kSlots = 64;
  float* buffers = nullptr;  // pinned: the blocks write the tiles, the host reads them
  ASSERT_EQ(cudaHostAlloc(reinterpret_cast<void**>(&buffers), kSlots * 64 * 64 * sizeof(float),
                          cudaHostAllocMapped | cudaHostAllocPortable),
            cudaSuccess);
  auto* cm = to_device(points.col_major);
  auto* rm = to_device(points.row_major);
  {
    AppPool pool(device_pool_options({0}));
    const auto got = tnn_on_pool(pool, points, cm, rm, buffers, kSlots, 16);
    const auto want = reference_tnn(points, 16);
    for (std::size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << "point " << i;
    pool.pause();
  }
  cudaFree(cm);
  cudaFree(rm);
  cudaFreeHost(buffers);
}

TEST(KmeansOnGpu, IterationsAgreeWithTheReference) {
  if (!have_gpu()) GTEST_SKIP() << "no usable GPU on this machine";
  constexpr int n = 10240, d = 256, k = 128, iterations = 5;
  std::vector<float> points(static_cast<std::size_t>(n) * d);
  for (std::size_t i = 0; i < points.size(); ++i) {
    points[i] = static_cast<float>(static_cast<int>((i * 2654435761u) % 17) - 8);
  }
  auto* dp = to_device(points);
  auto* dc = to_device(std::vector<float>(static_cast<std::size_t>(k) * d));
  auto* dn = to_device(std::vector<float>(k));
  int* labels = nullptr;  // pinned: the blocks write them, the host reads them
  ASSERT_EQ(cudaHostAlloc(reinterpret_cast<void**>(&labels), n * sizeof(int),
                          cudaHostAllocMapped | cudaHostAllocPortable),
            cudaSuccess);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  // A copy on a stream of its own runs beside the pool's resident kernel.
  const auto upload = [stream](const float* from, float* to, std::size_t count) {
    cudaMemcpyAsync(to, from, count * sizeof(float), cudaMemcpyHostToDevice, stream);
    cudaStreamSynchronize(stream);
  };
  // The sums on the popping thread, then by four parts on CPU workers.
  weft::cpu::ExecutorOptions options;
  options.workers = 4;
  weft::cpu::Executor workers(options);
  const KmeansResult want = reference_kmeans(points, d, k, iterations);
  for (weft::cpu::Executor* sum_workers : {static_cast<weft::cpu::Executor*>(nullptr), &workers}) {
    KmeansResult got;
    {
      AppPool pool(device_pool_options({0}));
      got = kmeans_on_pool(pool, points, d, k, iterations, dp, dc, dn, labels, upload, sum_workers);
      pool.pause();
    }
    std::size_t same = 0;
    for (int i = 0; i < n; ++i) same += got.labels[i] == want.labels[i] ? 1 : 0;
    // The GPU may fuse multiplies and adds: a point on a near tie may go the other way.
    EXPECT_GE(same, static_cast<std::size_t>(n) * 995 / 1000) << (sum_workers ? "by parts" : "");
    EXPECT_LE(max_relative_error<float>(got.centroids, want.centroids), 1e-2);
  }
  cudaStreamDestroy(stream);
  cudaFreeHost(labels);
  cudaFree(dp);
  cudaFree(dc);
  cudaFree(dn);
}

// One DGEMM over every GPU: each GPU's blocks read its own copy of A and B and write C on GPU 0
// (peer access). Skips with fewer than two GPUs.
TEST(MultiGpuGemmOnGpus, TilesOnEveryGpuMakeTheProduct) {
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus < 2) {
    GTEST_SKIP() << "fewer than two usable GPUs on this machine";
  }
  gpus = std::min(gpus, ReplicatedGemmTile::kMaxGpus);
  constexpr int n = 320;  // five tiles a side
  const GemmBatch one = GemmBatch::uniform(1, n, n, n);
  std::vector<double> a, b, got(static_cast<std::size_t>(n) * n), ref(got.size());
  fill_inputs(one, a, b);
  reference_gemm(one, a.data(), b.data(), ref.data());
  std::vector<int> devices;
  std::vector<const double*> as, bs;
  for (int g = 0; g < gpus; ++g) {
    ASSERT_EQ(cudaSetDevice(g), cudaSuccess);
    double *da = nullptr, *db = nullptr;
    ASSERT_EQ(cudaMalloc(&da, sizeof(double) * a.size()), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&db, sizeof(double) * b.size()), cudaSuccess);
    cudaMemcpy(da, a.data(), sizeof(double) * a.size(), cudaMemcpyHostToDevice);
    cudaMemcpy(db, b.data(), sizeof(double) * b.size(), cudaMemcpyHostToDevice);
    devices.push_back(g);
    as.push_back(da);
    bs.push_back(db);
  }
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  double* dc = nullptr;
  ASSERT_EQ(cudaMalloc(&dc, sizeof(double) * got.size()), cudaSuccess);
  cudaMemset(dc, 0xFF, sizeof(double) * got.size());
  {
    AppPool pool(device_pool_options(devices));
    const int per_gpu = static_cast<int>(pool.num_blocks() / devices.size());
    const auto tasks = replicated_gemm_tasks<kAppCapacity>(as, bs, dc, n, per_gpu);
    EXPECT_EQ(tasks.size(), 25u);
    run_tasks(pool, std::span<const AppPool::Record>(tasks));
    pool.pause();
    cudaSetDevice(0);
    cudaMemcpy(got.data(), dc, sizeof(double) * got.size(), cudaMemcpyDeviceToHost);
  }
  EXPECT_EQ(max_relative_error<double>(got, ref), 0.0);
  cudaFree(dc);
  for (int g = 0; g < gpus; ++g) {
    cudaSetDevice(g);
    cudaFree(const_cast<double*>(as[static_cast<std::size_t>(g)]));
    cudaFree(const_cast<double*>(bs[static_cast<std::size_t>(g)]));
  }
  cudaSetDevice(0);
}

}  // namespace
}  // namespace apps::gpu
