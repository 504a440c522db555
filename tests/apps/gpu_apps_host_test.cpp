// The GPU applications on the host backend (CI's CPU path): each verified against its CPU
// reference at small sizes. tests/apps/gpu_apps_device_test.cu runs them on a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

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

weft::gpu::PoolOptions host_options() {
  weft::gpu::PoolOptions o;
  o.host_blocks = 4;
  return o;
}

// The message of the std::invalid_argument that `call` throws, or "no exception".
template <class Call>
std::string refusal(Call&& call) {
  try {
    call();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "no exception";
}
#define EXPECT_REFUSED(call, words)                                        \
  EXPECT_NE(refusal([&] { (void)(call); }).find(words), std::string::npos) \
      << refusal([&] { (void)(call); })

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

// Tile tasks with c_through_shared write exactly the C of the same tasks without it, at tile
// edges (sizes 1..150), with beta != 0 (C's old values read through the tile) and lower_only.
template <class T>
void expect_gathered_c_equals_direct(AppPool& pool) {
  const GemmBatch batch = GemmBatch::variable(12, 1, 150, 9);
  std::vector<T> a, b;
  fill_inputs(batch, a, b);
  const std::vector<T> before = test::varied_c_before<T>(batch);
  std::vector<T> direct = before, gathered = before;
  const auto run = [&](std::vector<T>& c, bool through_shared) {
    const auto tasks = test::varied_tile_tasks(batch, a.data(), b.data(), c.data(), through_shared);
    run_tasks(pool, std::span<const AppPool::Record>(tasks));
  };
  run(direct, false);
  run(gathered, true);
  EXPECT_NE(direct, before);  // the tasks wrote C
  EXPECT_EQ(gathered, direct);
}

TEST(BatchedGemm, CThroughSharedMemoryWritesTheSameC) {
  AppPool pool(host_options());
  expect_gathered_c_equals_direct<double>(pool);
  expect_gathered_c_equals_direct<float>(pool);
}

TEST(BatchedGemm, BadSizesAreRefusedNamingThem) {
  EXPECT_REFUSED(GemmBatch::uniform(0, 64, 64, 64), "got count 0");
  EXPECT_REFUSED(GemmBatch::uniform(1, GemmBatch::kMaxSide + 1, 64, 64),
                 "m " + std::to_string(GemmBatch::kMaxSide + 1));
  EXPECT_REFUSED(GemmBatch::uniform(1, 64, GemmBatch::kMaxSide + 1, 64),
                 "n " + std::to_string(GemmBatch::kMaxSide + 1));
  EXPECT_REFUSED(GemmBatch::uniform(1, 64, 64, GemmBatch::kMaxSide + 1),
                 "k " + std::to_string(GemmBatch::kMaxSide + 1));
  EXPECT_REFUSED(GemmBatch::variable(10, 20, 10, 1), "lo 20, hi 10");
  EXPECT_REFUSED(GemmBatch::variable(10, 1, GemmBatch::kMaxSide + 1, 1), "hi ");
}

// A batch assembled by hand is checked before any task is made: offsets for every shape,
// sizes in range, every matrix inside its buffer; and no buffer may be null.
TEST(BatchedGemm, AnInconsistentBatchOrANullBufferIsRefusedNamingIt) {
  const GemmBatch good = GemmBatch::uniform(3, 8, 8, 8);
  std::vector<double> a, b, c(good.c_size);
  fill_inputs(good, a, b);
  auto tasks = [&](const GemmBatch& x, const double* pa, const double* pb, double* pc) {
    return gemm_tasks<double, kAppCapacity>(x, pa, pb, pc);
  };
  for (auto offsets : {&GemmBatch::a_at, &GemmBatch::b_at, &GemmBatch::c_at}) {
    GemmBatch fewer = good;
    (fewer.*offsets).pop_back();
    EXPECT_REFUSED(tasks(fewer, a.data(), b.data(), c.data()), "3 shapes but offsets for");
  }
  GemmBatch empty_k = good;
  empty_k.shapes[1].k = 0;
  EXPECT_REFUSED(tasks(empty_k, a.data(), b.data(), c.data()), "product 1 (8 x 8 x 0)");
  GemmBatch short_c = good;
  short_c.c_size -= 1;
  EXPECT_REFUSED(tasks(short_c, a.data(), b.data(), c.data()), "product 2 (8 x 8 x 8): its C");
  GemmBatch far_b = good;
  far_b.b_at[0] = far_b.b_size + 1;
  EXPECT_REFUSED(tasks(far_b, a.data(), b.data(), c.data()), "product 0 (8 x 8 x 8): its B");
  GemmBatch late_a = good;
  late_a.a_at[1] = late_a.a_size - 63;  // 64 elements from there: one past the end
  EXPECT_REFUSED(tasks(late_a, a.data(), b.data(), c.data()), "product 1 (8 x 8 x 8): its A");
  EXPECT_REFUSED(tasks(good, a.data(), nullptr, c.data()), "buffer b is null");
  EXPECT_REFUSED(reference_gemm(short_c, a.data(), b.data(), c.data()), "reference_gemm");
  EXPECT_EQ(tasks(good, a.data(), b.data(), c.data()).size(), good.tiles());
}

// A task that fails (here: of a type the pool does not run, first in a one-block pool, ahead of
// tiles that take a while) is reported only once every task is back: none is left in the
// queue, where a later call would take it for one of its own.
TEST(BatchedGemm, AFailedTaskIsReportedOnceEveryTaskIsBack) {
  using DoubleOnly = weft::gpu::Pool<weft::gpu::TaskTypes<DgemmTile>, kAppCapacity>;
  weft::gpu::PoolOptions o;
  o.host_blocks = 1;
  DoubleOnly pool(o);
  const GemmBatch batch = GemmBatch::uniform(8, 128, 128, 128);
  std::vector<double> a, b, c(batch.c_size);
  fill_inputs(batch, a, b);
  std::vector<float> fa(a.begin(), a.end()), fb(b.begin(), b.end()), fc(c.size());
  auto records = gemm_tasks<float, kAppCapacity>(batch, fa.data(), fb.data(), fc.data());
  records.resize(1);  // one SgemmTile task: an unknown type to this pool
  const auto tiles = gemm_tasks<double, kAppCapacity>(batch, a.data(), b.data(), c.data());
  records.insert(records.end(), tiles.begin(), tiles.end());
  try {
    run_tasks(pool, std::span<const DoubleOnly::Record>(records));
    ADD_FAILURE() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown"), std::string::npos) << e.what();
  }
  EXPECT_EQ(pool.unfinished(0), 0u) << "a task was left in the output queue";
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
  // As the pool's edges: one per dependency, each into a task that counts it.
  std::vector<int> into(g.tasks().size(), 0);
  for (const weft::gpu::Edge& e : g.edges()) {
    ASSERT_LT(e.from, g.tasks().size());
    ASSERT_LT(e.to, g.tasks().size());
    ++into[e.to];
  }
  EXPECT_EQ(into, g.dependencies());
}

// Every task's inputs, from the algorithm's definition: POTRF(k) waits for the SYRK that last
// wrote tile (k, k); TRSM(i, k) for POTRF(k) and the GEMM that last wrote (i, k); SYRK(i, i,
// k) for TRSM(i, k) and the SYRK before it on (i, i); GEMM(i, j, k) for TRSM(i, k), TRSM(j, k)
// and the GEMM before it on (i, j). Checked for every task of graphs of 1 to 12 tiles (or
// blocks) a side, and nothing else waited for.
TEST(CholeskyGraph, EachTaskWaitsForExactlyWhatTheAlgorithmSays) {
  using Kind = CholeskyGraph::Kind;
  for (const int block : {1, 2}) {
    for (int t = 1; t <= 12; ++t) {
      const CholeskyGraph g(t * block * CholeskyTile::kTile, block);
      ASSERT_EQ(g.tasks().size(), static_cast<std::size_t>(t * (t + 1) * (t + 2) / 6));
      std::map<std::tuple<Kind, int, int, int>, int> index;
      for (std::size_t x = 0; x < g.tasks().size(); ++x) {
        const CholeskyGraph::Task& task = g.tasks()[x];
        ASSERT_TRUE(index.emplace(std::tuple{task.kind, task.i, task.j, task.k}, int(x)).second);
      }
      auto at = [&](Kind kind, int i, int j, int k) { return index.at({kind, i, j, k}); };
      std::vector<std::set<int>> inputs(g.tasks().size());
      for (std::size_t x = 0; x < g.tasks().size(); ++x) {
        for (const int s : g.successors()[x]) inputs[static_cast<std::size_t>(s)].insert(int(x));
      }
      for (std::size_t x = 0; x < g.tasks().size(); ++x) {
        const auto [kind, i, j, k] = g.tasks()[x];
        std::set<int> want;
        switch (kind) {
          case Kind::potrf:
            if (k > 0) want = {at(Kind::syrk, k, k, k - 1)};
            break;
          case Kind::trsm:
            want = {at(Kind::potrf, k, k, k)};
            if (k > 0) want.insert(at(Kind::gemm, i, k, k - 1));
            break;
          case Kind::syrk:
            want = {at(Kind::trsm, i, k, k)};
            if (k > 0) want.insert(at(Kind::syrk, i, i, k - 1));
            break;
          case Kind::gemm:
            want = {at(Kind::trsm, i, k, k), at(Kind::trsm, j, k, k)};
            if (k > 0) want.insert(at(Kind::gemm, i, j, k - 1));
            break;
        }
        ASSERT_EQ(inputs[x], want) << "task " << x << " of " << t << " a side, block " << block;
        ASSERT_EQ(g.dependencies()[x], static_cast<int>(want.size()));
      }
    }
  }
}

// Factors the SPD matrix of order n with `factor` (a driver: pool, matrix, n) in a FIFO pool and
// in a priority pool (where the critical path overtakes queued updates): the factor reproduces
// the matrix, the upper triangle is left as it was, every task was taken back.
template <class Driver>
void expect_the_factor_reproduces_the_matrix(int n, Driver factor) {
  for (const auto order : {weft::gpu::QueueOrder::fifo, weft::gpu::QueueOrder::priority}) {
    weft::gpu::PoolOptions o = host_options();
    o.input_order = order;
    AppPool pool(o);
    const std::vector<double> a = spd_matrix(n);
    std::vector<double> f = a;
    factor(pool, f.data(), n);
    EXPECT_LT(cholesky_residual(a, f, n), 1e-14);
    std::size_t upper_changed = 0;
    for (std::size_t c = 0; c < static_cast<std::size_t>(n); ++c) {
      for (std::size_t r = 0; r < c; ++r) upper_changed += f[r + c * n] != a[r + c * n] ? 1 : 0;
    }
    EXPECT_EQ(upper_changed, 0u);  // the strict upper triangle is left as it was
    EXPECT_EQ(pool.unfinished(0), 0u);
  }
}

// What `factor` reports for a matrix of order n whose pivots at `columns` (column 70: in the
// second diagonal tile) are negative; "no error" if it reports nothing.
template <class Driver>
std::string bad_pivot_report(int n, Driver factor, std::vector<int> columns = {70}) {
  AppPool pool(host_options());
  std::vector<double> a = spd_matrix(n);
  for (const int c : columns) a[c + c * static_cast<std::size_t>(n)] = -1.0;
  try {
    factor(pool, a.data(), n);
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(pool.unfinished(0), 0u);  // every task was taken back
    return e.what();
  }
  return "no error";
}

constexpr auto kHostTracked = [](AppPool& pool, double* a, int n) {
  cholesky_on_pool(pool, a, n, n);
};
constexpr auto kAsAGraph = [](AppPool& pool, double* a, int n) {
  cholesky_graph_on_pool(pool, a, n, n);
};

TEST(Cholesky, TheFactorReproducesTheMatrix) {
  expect_the_factor_reproduces_the_matrix(5 * CholeskyTile::kTile, kHostTracked);
}

// Blocks of 2 x 2 and 3 x 3 tiles, one task each, both drivers: the same factor, and a bad
// pivot (column 70: block 0's second diagonal tile) named as with tiles.
constexpr auto in_blocks = [](int block, bool as_graph) {
  return [block, as_graph](AppPool& pool, double* a, int n) {
    CholeskyPlan<AppPool> plan(pool, n, block);
    as_graph ? plan.factor_as_graph(a, n) : plan.factor_host_tracked(a, n);
  };
};

TEST(CholeskyInBlocks, TheFactorReproducesTheMatrix) {
  for (const bool as_graph : {false, true}) {
    expect_the_factor_reproduces_the_matrix(3 * 2 * CholeskyTile::kTile, in_blocks(2, as_graph));
    expect_the_factor_reproduces_the_matrix(3 * 3 * CholeskyTile::kTile, in_blocks(3, as_graph));
  }
}

// A bad pivot in each tile of the first two blocks and in the third block, by both drivers:
// the report names its column (the block's offset and the tile's within it).
TEST(CholeskyInBlocks, AMatrixThatIsNotPositiveDefiniteIsReportedWithItsColumn) {
  constexpr int kTile = CholeskyTile::kTile;
  for (const int block : {2, 3}) {
    const int side = block * kTile;
    for (const int column : {6, kTile + 6, side + 6, side + kTile + 6, 2 * side + 1}) {
      for (const bool as_graph : {false, true}) {
        const std::string why = bad_pivot_report(3 * side, in_blocks(block, as_graph), {column});
        EXPECT_NE(why.find("(column " + std::to_string(column) + ")"), std::string::npos)
            << why << " (block " << block << (as_graph ? ", as a graph)" : ")");
      }
    }
  }
}

// Two bad pivots in one block, in different tiles: the first is the one reported.
TEST(CholeskyInBlocks, OfTwoBadPivotsInOneBlockTheFirstIsReported) {
  constexpr int kTile = CholeskyTile::kTile;
  for (const bool as_graph : {false, true}) {
    const std::string why =
        bad_pivot_report(2 * 2 * kTile, in_blocks(2, as_graph), {2 * kTile + 6, 3 * kTile + 6});
    EXPECT_NE(why.find("(column " + std::to_string(2 * kTile + 6) + ")"), std::string::npos) << why;
  }
}

TEST(CholeskyInBlocks, TheGraphCountsBlocksAndRefusesSizesThatAreNotWholeBlocks) {
  const CholeskyGraph g(4 * 2 * CholeskyTile::kTile, 2);  // 4 blocks a side: 20 tasks
  EXPECT_EQ(g.tiles(), 4);
  EXPECT_EQ(g.block(), 2);
  EXPECT_EQ(g.tasks().size(), 20u);
  EXPECT_THROW(CholeskyGraph(3 * CholeskyTile::kTile, 2), std::invalid_argument);
  EXPECT_THROW(CholeskyGraph(8 * CholeskyTile::kTile, 0), std::invalid_argument);
  EXPECT_THROW(CholeskyGraph(8 * CholeskyTile::kTile, CholeskyBlock::kMaxTiles + 1),
               std::invalid_argument);
  // 2344 tiles a side would be 2,149,224,040 tasks, past an int: refused before anything is
  // built (2343 would be accepted, at 2,146,474,220, but take too long to build here).
  EXPECT_REFUSED(CholeskyGraph(2344 * CholeskyTile::kTile), "2344 tiles a side; at most 2343");
  EXPECT_REFUSED(spd_matrix(-5), "(got -5)");
}

// A plan made without a block side goes tile by tile below n = 4096 and in blocks of 2 x 2
// tiles from there, where n is a whole number of such blocks.
TEST(CholeskyInBlocks, APlanWithoutABlockSideTakesTilesForSmallNAndBlocksOfTwoForLarge) {
  constexpr int kTile = CholeskyTile::kTile;
  EXPECT_EQ(cholesky_block_for(2048), 1);
  EXPECT_EQ(cholesky_block_for(4096 - 2 * kTile), 1);
  EXPECT_EQ(cholesky_block_for(4096), 2);
  EXPECT_EQ(cholesky_block_for(8192), 2);
  EXPECT_EQ(cholesky_block_for(4096 + kTile), 1);  // 65 tiles: not whole blocks of 2
  AppPool pool(host_options());
  EXPECT_EQ(CholeskyPlan<AppPool>(pool, 4096).graph().block(), 2);
  EXPECT_EQ(CholeskyPlan<AppPool>(pool, 4096 + kTile).graph().block(), 1);
  EXPECT_EQ(CholeskyPlan<AppPool>(pool, 2 * kTile).graph().block(), 1);
}

// CholeskyPool runs the records CholeskyPlan makes for UpdateBlock through UpdateBlockWide
// (same id, same payload): on the host backend its fallback, the same factor by both drivers
// in tiles and in blocks of 2 and 3.
TEST(CholeskyPool, FactorsInTilesAndBlocksOnTheHostBackend) {
  constexpr int kTile = CholeskyTile::kTile;
  weft::gpu::PoolOptions o = host_options();
  o.graph_capacity = 1024;
  CholeskyPool pool(o);
  for (const auto& [n, block] :
       std::vector<std::pair<int, int>>{{5 * kTile, 1}, {3 * 2 * kTile, 2}, {3 * 3 * kTile, 3}}) {
    for (const bool as_graph : {false, true}) {
      const std::vector<double> a = spd_matrix(n);
      std::vector<double> f = a;
      CholeskyPlan<CholeskyPool> plan(pool, n, block);
      as_graph ? plan.factor_as_graph(f.data(), n) : plan.factor_host_tracked(f.data(), n);
      EXPECT_LT(cholesky_residual(a, f, n), 1e-14)
          << "n = " << n << ", block " << block << (as_graph ? ", as a graph" : "");
      EXPECT_EQ(pool.unfinished(0), 0u);
    }
  }
}

// The 128 x 128 path is for blocks of 2 tiles on at least 256 task threads, with every 16-byte
// copy aligned; anything else runs UpdateBlock.
TEST(CholeskyPool, TheWideUpdateTakesOnlyBlocksOfTwoOnEnoughThreadsAndAlignedData) {
  alignas(16) static double matrix[4];
  const weft::gpu::BlockContext wide(0, 256, 0, nullptr), narrow(0, 128, 0, nullptr);
  const UpdateBlock::Payload two{matrix, 8192, 1, 0, 0, 2};
  EXPECT_TRUE(UpdateBlockWide::fits(two, wide));
  EXPECT_TRUE(UpdateBlockWide::fits(two, weft::gpu::BlockContext(0, 288, 0, nullptr)));
  EXPECT_FALSE(UpdateBlockWide::fits(two, narrow));
  UpdateBlock::Payload p = two;
  p.nb = 3;
  EXPECT_FALSE(UpdateBlockWide::fits(p, wide));
  p = two;
  p.lda = 8193;  // odd: a column's start is not 16-byte aligned
  EXPECT_FALSE(UpdateBlockWide::fits(p, wide));
  p = two;
  p.a = matrix + 1;
  EXPECT_FALSE(UpdateBlockWide::fits(p, wide));
  static_assert(UpdateBlockWide::kId == UpdateBlock::kId);
  // CholeskyPool's four-part POTRF and TRSM bodies run the records made for the others.
  static_assert(PotrfTileT<4>::kId == PotrfTile::kId &&
                std::is_same_v<PotrfTileT<4>::Payload, PotrfTile::Payload>);
  static_assert(TrsmTileT<4>::kId == TrsmTile::kId &&
                std::is_same_v<TrsmTileT<4>::Payload, TrsmTile::Payload>);
  static_assert(PotrfBlockT<4>::kId == PotrfBlock::kId &&
                std::is_same_v<PotrfBlockT<4>::Payload, PotrfBlock::Payload>);
  static_assert(TrsmBlockT<4>::kId == TrsmBlock::kId &&
                std::is_same_v<TrsmBlockT<4>::Payload, TrsmBlock::Payload>);
  static_assert(std::is_same_v<UpdateBlockWide::Payload, UpdateBlock::Payload>);
}

TEST(CholeskyPool, ItsOptionsAskForBlocksOf256TaskThreadsAndAGraphTable) {
  const weft::gpu::PoolOptions o = cholesky_pool_options({0}, 4096);
  EXPECT_EQ(o.backend, weft::gpu::Backend::device);
  EXPECT_EQ(o.threads_per_block, 256);
  EXPECT_EQ(o.graph_capacity, 4096u);
  EXPECT_EQ(o.devices, std::vector<int>{0});
  EXPECT_EQ(cholesky_pool_options().graph_capacity, std::size_t{1} << 16);
}

// The lookahead: every POTRF, and of step k the TRSM of row k + 1 and the updates of column
// k + 1 (4 tiles: 4 POTRF + 3 TRSM + 3 SYRK + 3 GEMM of the 20 tasks).
TEST(CholeskyGraph, TheCriticalPathIsPotrfAndTheNextPanelsTasks) {
  const CholeskyGraph g(4 * CholeskyTile::kTile);
  std::size_t urgent = 0;
  for (const auto& t : g.tasks()) {
    urgent += on_critical_path(t) ? 1 : 0;
    if (t.kind == CholeskyGraph::Kind::gemm && t.j != t.k + 1) {
      EXPECT_FALSE(on_critical_path(t));
    }
  }
  EXPECT_EQ(urgent, 13u);
  const std::vector<int> priorities = g.priorities();
  ASSERT_EQ(priorities.size(), g.tasks().size());
  for (std::size_t t = 0; t < priorities.size(); ++t) {
    EXPECT_EQ(priorities[t], on_critical_path(g.tasks()[t]) ? 1 : 0) << "task " << t;
  }
}

TEST(Cholesky, AMatrixThatIsNotPositiveDefiniteIsReportedWithItsColumn) {
  const std::string why = bad_pivot_report(2 * CholeskyTile::kTile, kHostTracked);
  EXPECT_NE(why.find("column 70"), std::string::npos) << why;
}

// The same factorization pushed as one task graph: the blocks resolve the dependencies.
TEST(CholeskyAsAGraph, TheFactorReproducesTheMatrix) {
  expect_the_factor_reproduces_the_matrix(6 * CholeskyTile::kTile, kAsAGraph);  // 56 tasks
}

TEST(CholeskyAsAGraph, AMatrixThatIsNotPositiveDefiniteIsReportedWithItsColumn) {
  const std::string why = bad_pivot_report(3 * CholeskyTile::kTile, kAsAGraph);
  EXPECT_NE(why.find("column 70"), std::string::npos) << why;
}

TEST(CholeskyAsAGraph, AGraphLargerThanThePoolTakesIsRefusedNamingBoth) {
  weft::gpu::PoolOptions o = host_options();
  o.graph_capacity = 19;
  AppPool pool(o);
  const int n = 4 * CholeskyTile::kTile;  // 20 tasks
  std::vector<double> a = spd_matrix(n);
  try {
    cholesky_graph_on_pool(pool, a.data(), n, n);
    ADD_FAILURE() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("20 tasks"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("(19)"), std::string::npos) << e.what();
  }
  EXPECT_EQ(a, spd_matrix(n));  // nothing ran
}

// One plan, many matrices: each factored right, as a graph (the shape prepared once) and
// host-tracked, in turn; a bad matrix before each is reported by either driver, which takes
// back every task it pushed, so the next matrix still factors right on the same plan.
TEST(CholeskyPlan, FactorsManyMatricesOfOneSizeBothWaysAfterBadOnes) {
  AppPool pool(host_options());
  const int n = 8 * CholeskyTile::kTile;  // 120 tasks: many in flight when the pivot fails
  CholeskyPlan<AppPool> plan(pool, n);
  ASSERT_TRUE(plan.as_graph());
  for (int m = 0; m < 6; ++m) {
    const bool as_graph = m % 2 == 0;
    auto factor = [&](double* x) { as_graph ? plan.factor(x, n) : plan.factor_host_tracked(x, n); };
    std::vector<double> bad = spd_matrix(n);
    bad[70 + 70 * static_cast<std::size_t>(n)] = -1.0;
    EXPECT_THROW(factor(bad.data()), std::runtime_error) << "matrix " << m;
    EXPECT_EQ(pool.unfinished(0), 0u) << "a bad matrix's task was left behind";
    std::vector<double> a = spd_matrix(n);
    for (std::size_t i = 0; i < a.size(); ++i) a[i] *= 1.0 + 0.25 * m;  // still SPD, new values
    std::vector<double> f = a;
    factor(f.data());
    EXPECT_LT(cholesky_residual(a, f, n), 1e-14) << "matrix " << m;
    EXPECT_EQ(pool.unfinished(0), 0u);
  }
}

// A plan keeps its tasks' records from one matrix to the next only while the matrix's address
// and leading dimension stay the same: the same buffer refilled, a wider leading dimension at
// the same address, and another buffer each factor right, by both drivers.
TEST(CholeskyPlan, RefactorsTheSameBufferAndFollowsANewAddressOrLeadingDimension) {
  AppPool pool(host_options());
  const int n = 4 * CholeskyTile::kTile, wide = n + CholeskyTile::kTile;
  CholeskyPlan<AppPool> plan(pool, n, 2);
  std::vector<double> buffer(static_cast<std::size_t>(wide) * n), other(buffer.size());
  // Matrix m (scaled spd_matrix) into `into` with leading dimension lda; returns it dense.
  auto fill = [&](std::vector<double>& into, int lda, int m) {
    std::vector<double> a = spd_matrix(n);
    for (double& v : a) v *= 1.0 + 0.5 * m;
    for (int c = 0; c < n; ++c)
      for (int r = 0; r < n; ++r)
        into[r + static_cast<std::size_t>(c) * lda] = a[r + static_cast<std::size_t>(c) * n];
    return a;
  };
  auto residual = [&](const std::vector<double>& a, const std::vector<double>& from, int lda) {
    std::vector<double> f(a.size());
    for (int c = 0; c < n; ++c)
      for (int r = 0; r < n; ++r)
        f[r + static_cast<std::size_t>(c) * n] = from[r + static_cast<std::size_t>(c) * lda];
    return cholesky_residual(a, f, n);
  };
  struct Run {
    std::vector<double>* buffer;
    int lda;
  };
  const std::vector<Run> runs{{&buffer, n},   {&buffer, n},    {&buffer, wide},
                              {&other, wide}, {&buffer, wide}, {&buffer, n}};
  for (const bool as_graph : {true, false}) {
    for (std::size_t m = 0; m < runs.size(); ++m) {
      const std::vector<double> a = fill(*runs[m].buffer, runs[m].lda, static_cast<int>(m));
      double* x = runs[m].buffer->data();
      as_graph ? plan.factor(x, runs[m].lda) : plan.factor_host_tracked(x, runs[m].lda);
      EXPECT_LT(residual(a, *runs[m].buffer, runs[m].lda), 1e-14)
          << (as_graph ? "as a graph" : "host-tracked") << ", run " << m;
    }
  }
}

// A null matrix or a leading dimension short of n is refused, naming it, before any task is
// pushed; the plan then factors a good matrix.
TEST(CholeskyPlan, ANullMatrixOrAShortLeadingDimensionIsRefusedNamingIt) {
  AppPool pool(host_options());
  const int n = 2 * CholeskyTile::kTile;
  CholeskyPlan<AppPool> plan(pool, n, 2);
  EXPECT_EQ(plan.order(), n);
  std::vector<double> a = spd_matrix(n);
  for (const bool as_graph : {false, true}) {
    auto factor = [&](double* x, int lda) {
      as_graph ? plan.factor_as_graph(x, lda) : plan.factor_host_tracked(x, lda);
    };
    EXPECT_NE(refusal([&] { factor(nullptr, n); }).find("the matrix is null"), std::string::npos);
    const std::string short_lda = refusal([&] { factor(a.data(), n - 1); });
    EXPECT_NE(short_lda.find("lda " + std::to_string(n - 1) +
                             " is less than the plan's order n = " + std::to_string(n)),
              std::string::npos)
        << short_lda;
    EXPECT_EQ(pool.unfinished(0), 0u);
  }
  std::vector<double> f = a;
  plan.factor(f.data(), n);
  EXPECT_LT(cholesky_residual(a, f, n), 1e-14);
}

// SpMV and Black-Scholes tasks, one kind after the other and mixed: the same results as the
// CPU's (the same float arithmetic in the same order: exact for SpMV, to rounding of the
// library functions for Black-Scholes).
TEST(SpmvBlackScholes, SerialAndMixedOrdersGiveTheReferenceResults) {
  const CsrMatrix m = CsrMatrix::skewed(3000, 2000, 400, 5);
  std::vector<float> x(static_cast<std::size_t>(m.cols));
  for (std::size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<float>(static_cast<int>(i % 9) - 4) / 8.0f;
  std::vector<float> y_ref, call_ref, put_ref;
  reference_spmv(m, x, y_ref);
  const Options o = Options::random(5000, 9);
  reference_black_scholes(o, 0.02f, 0.30f, call_ref, put_ref);
  for (bool mixed : {false, true}) {
    SpmvBsPool pool(host_options());
    std::vector<float> y(y_ref.size(), -1.0f), call(call_ref.size(), -1.0f),
        put(put_ref.size(), -1.0f);
    const SpmvBsArrays arrays{m.row_start.data(),
                              m.col.data(),
                              m.value.data(),
                              x.data(),
                              y.data(),
                              m.rows,
                              o.spot.data(),
                              o.strike.data(),
                              o.years.data(),
                              call.data(),
                              put.data(),
                              static_cast<int>(o.spot.size()),
                              0.02f,
                              0.30f};
    const auto tasks = spmv_bs_tasks<kSpmvBsCapacity>(arrays, 256, 512, mixed);
    EXPECT_EQ(tasks.size(), 12u + 10u);
    if (mixed) {  // both kinds spread through the order, not one kind's run after the other's
      std::size_t spmv_in_first_half = 0;
      for (std::size_t i = 0; i < tasks.size() / 2; ++i)
        spmv_in_first_half += tasks[i].type == SpmvRows::kId ? 1 : 0;
      EXPECT_GT(spmv_in_first_half, 0u);
      EXPECT_LT(spmv_in_first_half, 12u);
    } else {
      EXPECT_EQ(tasks[0].type, SpmvRows::kId);
      EXPECT_EQ(tasks.back().type, BlackScholes::kId);
    }
    run_tasks(pool, std::span<const SpmvBsPool::Record>(tasks));
    EXPECT_EQ(y, y_ref) << (mixed ? "mixed" : "serial");
    EXPECT_LE(max_relative_error<float>(call, call_ref), 1e-6);
    EXPECT_LE(max_relative_error<float>(put, put_ref), 1e-6);
  }
}

// Counts per task below 1 (which would never end the loop over the rows), negative sizes and
// a null array of a kind with work are refused, naming them; a kind with no work needs none.
TEST(SpmvBlackScholes, BadTaskSizesAndNullArraysAreRefusedNamingThem) {
  std::vector<std::int64_t> row_start{0, 1};
  std::vector<int> cols{0};
  std::vector<float> values{1.0f}, x{1.0f}, y(1), spot{1.0f}, strike{1.0f}, years{1.0f}, call(1),
      put(1);
  const SpmvBsArrays good{
      row_start.data(), cols.data(),  values.data(), x.data(),   y.data(), 1,     spot.data(),
      strike.data(),    years.data(), call.data(),   put.data(), 1,        0.02f, 0.30f};
  auto tasks = [](const SpmvBsArrays& a, int rows, int options) {
    return spmv_bs_tasks<kSpmvBsCapacity>(a, rows, options, false);
  };
  EXPECT_REFUSED(tasks(good, 0, 512), "(got 0 and 512)");
  EXPECT_REFUSED(tasks(good, 256, -1), "(got 256 and -1)");
  SpmvBsArrays negative = good;
  negative.rows = -3;
  EXPECT_REFUSED(tasks(negative, 256, 512), "(got -3 and 1)");
  SpmvBsArrays no_x = good;
  no_x.x = nullptr;
  EXPECT_REFUSED(tasks(no_x, 256, 512), "the SpMV array x is null");
  SpmvBsArrays no_put = good;
  no_put.put = nullptr;
  EXPECT_REFUSED(tasks(no_put, 256, 512), "the Black-Scholes array put is null");
  no_put.options = 0;  // no Black-Scholes work: its arrays are not read
  EXPECT_EQ(tasks(no_put, 256, 512).size(), 1u);
  EXPECT_EQ(tasks(good, 256, 512).size(), 2u);
}

// The heaps keep, for each point, the T least candidates in Neighbour's order (distance, then
// index) whatever the order of the offers: many equal distances, so that ties are decided by
// the index, offered in three shuffled orders against the sorted list's first T.
TEST(NeighbourHeaps, KeepTheTLeastCandidatesInAnyOrderTiesToTheLowerIndex) {
  constexpr int kPoints = 3, kT = 5, kCandidates = 400;
  std::vector<Neighbour> candidates;
  for (int j = 0; j < kCandidates; ++j) {
    candidates.emplace_back(static_cast<float>((j * 7919) % 13), j);  // 13 distances
  }
  std::vector<Neighbour> want = candidates;
  std::sort(want.begin(), want.end());
  want.resize(kT);
  std::mt19937 rng(7);
  NeighbourHeaps heaps(kPoints, kT);
  for (int p = 0; p < kPoints; ++p) {
    std::shuffle(candidates.begin(), candidates.end(), rng);
    for (const Neighbour& c : candidates) heaps.offer(p, c);
  }
  const auto got = heaps.sorted();
  for (int p = 0; p < kPoints; ++p) EXPECT_EQ(got[static_cast<std::size_t>(p)], want) << p;
}

// Negative distances (rounding can make -2 x.y + |x|^2 + |y|^2 fall below zero) keep their
// order, and -0.0 counts as 0.0: equal distances, decided by the index.
TEST(NeighbourHeaps, OrderNegativeDistancesAndCountMinusZeroAsZero) {
  NeighbourHeaps heaps(1, 4);
  for (const Neighbour& c : std::vector<Neighbour>{
           {1.0f, 0}, {-0.0f, 9}, {-2.5f, 3}, {0.0f, 5}, {-1.0f, 7}, {-0.5f, 8}}) {
    heaps.offer(0, c);
  }
  const std::vector<Neighbour> got = heaps.sorted()[0];
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0], (Neighbour{-2.5f, 3}));
  EXPECT_EQ(got[1], (Neighbour{-1.0f, 7}));
  EXPECT_EQ(got[2], (Neighbour{-0.5f, 8}));
  EXPECT_EQ(got[3], (Neighbour{0.0f, 5}));  // 0.0 with index 5 before -0.0 with index 9
}

// A point's bound is what offer() compares with before its heap: no bound until it keeps T,
// then the farthest kept distance; a candidate at the bound's distance and a lower index
// still gets in.
TEST(NeighbourHeaps, TheBoundIsTheFarthestKeptOnceFull) {
  NeighbourHeaps heaps(2, 2);
  heaps.offer(0, {3.0f, 10});
  EXPECT_EQ(heaps.bound(0), std::numeric_limits<float>::infinity());
  heaps.offer(0, {5.0f, 11});
  EXPECT_EQ(heaps.bound(0), 5.0f);
  heaps.offer(0, {5.0f, 4});   // the same distance, a lower index: replaces (5, 11)
  heaps.offer(0, {5.0f, 12});  // a higher index: turned away
  heaps.offer(0, {9.0f, 0});   // farther: turned away
  EXPECT_EQ(heaps.sorted()[0], (std::vector<Neighbour>{{3.0f, 10}, {5.0f, 4}}));
  EXPECT_EQ(heaps.bound(1), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(heaps.sorted()[1].empty());
  EXPECT_THROW(NeighbourHeaps(0, 2), std::invalid_argument);
  EXPECT_THROW(NeighbourHeaps(2, 0), std::invalid_argument);
  EXPECT_THROW(heaps.offer(2, {1.0f, 0}), std::out_of_range);
  EXPECT_THROW(heaps.offer(-1, {1.0f, 0}), std::out_of_range);
  EXPECT_THROW((void)heaps.bound(2), std::out_of_range);
  const float two[] = {1.0f, 1.0f};
  EXPECT_THROW(heaps.offer_to_run(1, 0, two), std::out_of_range);  // points 1 and 2
  EXPECT_THROW(heaps.offer(1, {1.0f, -3}), std::invalid_argument);
}

// The T nearest of every point, from tiles fed to the heaps as they finish, with fewer buffer
// slots than tiles (slots are reused): the brute force's answer, ties to the lower index.
TEST(Tnn, HeapsFedTileByTileFindTheBruteForceNeighbours) {
  AppPool pool(host_options());
  const PointSet points = PointSet::random(300, 24, 3);  // 5 tiles a side: 15 tile tasks
  std::vector<float> buffers(4 * 64 * 64);
  const auto got = tnn_on_pool(pool, points, points.col_major.data(), points.row_major.data(),
                               buffers.data(), 4, 16);
  const auto want = reference_tnn(points, 16);
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << "point " << i;
}

// T out of [1, n), a point set that is not whole, null arrays, slots out of range and a call
// from a heap worker (which would wait for itself) are refused, naming them, by every entry
// point that takes them.
TEST(Tnn, BadSizesNullArraysAndCallsFromAHeapWorkerAreRefusedNamingThem) {
  AppPool pool(host_options());
  const PointSet points = PointSet::random(100, 8, 3);
  std::vector<float> buffers(4 * 64 * 64);
  auto on_pool = [&](const PointSet& p, const float* rows, std::size_t slots, int t,
                     weft::cpu::Executor* workers = nullptr) {
    return tnn_on_pool(pool, p, p.col_major.data(), rows, buffers.data(), slots, t, workers);
  };
  EXPECT_REFUSED(on_pool(points, points.row_major.data(), 4, 100), "T must be in [1, n) (got 100)");
  EXPECT_REFUSED(reference_tnn(points, 0), "reference_tnn: T must be in [1, n) (got 0)");
  PointSet short_norms = points;
  short_norms.norms.pop_back();
  EXPECT_REFUSED(on_pool(short_norms, points.row_major.data(), 4, 5), "99 norms");
  PointSet short_rows = points;
  short_rows.row_major.pop_back();
  EXPECT_REFUSED(reference_tnn(short_rows, 5), "800 / 799 coordinates");
  PointSet no_d = points;
  no_d.d = 0;
  EXPECT_REFUSED(reference_tnn(no_d, 5), "(got n 100, d 0)");
  EXPECT_REFUSED(on_pool(points, nullptr, 4, 5), "row_major is null");
  EXPECT_REFUSED(on_pool(points, points.row_major.data(), 0, 5), "(got 0)");
  EXPECT_REFUSED(on_pool(points, points.row_major.data(), kMaxTnnSlots + 1, 5),
                 "(got " + std::to_string(kMaxTnnSlots + 1) + ")");
  weft::cpu::ExecutorOptions options;
  options.workers = 1;
  weft::cpu::Executor workers(options);
  EXPECT_REFUSED(tnn_from_gram(workers, points, nullptr, 5), "gram is null");
  auto from_a_worker =
      workers.submit([&] { (void)on_pool(points, points.row_major.data(), 1, 5, &workers); });
  try {
    from_a_worker.get();
    ADD_FAILURE() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("called from a worker of heap_workers"), std::string::npos)
        << e.what();
  }
}

// n points of d small integer coordinates (sums of them are exact in any order).
std::vector<float> kmeans_points(int n, int d) {
  std::vector<float> points(static_cast<std::size_t>(n) * d);
  for (std::size_t i = 0; i < points.size(); ++i) {
    points[i] = static_cast<float>(static_cast<int>((i * 2654435761u) % 17) - 8);
  }
  return points;
}

// kmeans_on_pool's upload on the host backend: the blocks read host memory.
void host_upload(const float* from, float* to, std::size_t count) {
  std::copy(from, from + count, to);
}

TEST(Kmeans, PoolIterationsGiveTheReferencesLabelsAndCentroids) {
  AppPool pool(host_options());
  constexpr int n = 1000, d = 16, k = 8;
  const std::vector<float> points = kmeans_points(n, d);
  std::vector<float> centroids(static_cast<std::size_t>(k) * d), norms(k);
  std::vector<int> labels(n, -1);
  const KmeansResult got = kmeans_on_pool(pool, points, d, k, 5, points.data(), centroids.data(),
                                          norms.data(), labels.data(), host_upload);
  const KmeansResult want = reference_kmeans(points, d, k, 5);
  EXPECT_EQ(got.labels, want.labels);
  EXPECT_EQ(got.centroids, want.centroids);
}

// Sizes out of range, null buffers, an empty upload, and labels outside [0, k) are refused,
// naming them, by every entry point that takes them.
TEST(Kmeans, BadSizesNullBuffersAndStrayLabelsAreRefusedNamingThem) {
  AppPool pool(host_options());
  constexpr int n = 100, d = 4, k = 3;
  const std::vector<float> points = kmeans_points(n, d);
  std::vector<float> centroids(static_cast<std::size_t>(k) * d), norms(k);
  std::vector<int> labels(n, 0);
  auto on_pool = [&](int kk, int iterations, int* l,
                     const std::function<void(const float*, float*, std::size_t)>& up) {
    return kmeans_on_pool(pool, points, d, kk, iterations, points.data(), centroids.data(),
                          norms.data(), l, up);
  };
  EXPECT_REFUSED(on_pool(200, 1, labels.data(), host_upload), "(got d 4, k 200, iterations 1)");
  EXPECT_REFUSED(on_pool(k, 0, labels.data(), host_upload), "iterations 0");
  EXPECT_REFUSED(on_pool(k, 1, nullptr, host_upload), "labels_for_blocks is null");
  EXPECT_REFUSED(on_pool(k, 1, labels.data(), nullptr), "upload is empty");
  EXPECT_REFUSED(reference_kmeans(points, 0, k, 1), "(got d 0");
  EXPECT_REFUSED(reference_kmeans(std::span(points).first(n * d - 1), d, k, 1),
                 "are not whole points of d = 4");
  EXPECT_REFUSED(reference_kmeans(std::span(points).first(2 * d), d, k, 1), "at least k = 3");
  std::vector<float> c(points.begin(), points.begin() + k * d);
  std::vector<int> stray(n, 1);
  stray[42] = k;
  EXPECT_REFUSED(update_centroids(points, d, stray, k, c), "label 3 of point 42 is not in [0, 3)");
  stray[42] = -1;
  EXPECT_REFUSED(update_centroids(points, d, stray, k, c), "label -1 of point 42");
  std::vector<int> too_many(n + 1, 0);
  EXPECT_REFUSED(update_centroids(points, d, too_many, k, c), "101 labels for 100 points");
  std::vector<float> short_c(k * d - 1);
  EXPECT_REFUSED(update_centroids(points, d, labels, k, short_c), "fewer than k x d = 12");
}

// The same with the centroid sums taken by CPU workers: three parts (one per worker, n >= 3 x
// 2048), each summing popped tasks' points in turn, combined, repeated so that the
// interleavings vary (ThreadSanitizer watches the tickets and the published pops in CI's TSan
// build); and the update by parts, alone, gives the serial update's centroids.
TEST(Kmeans, SumsTakenByCpuWorkersGiveTheReferencesLabelsAndCentroids) {
  AppPool pool(host_options());
  constexpr int n = 7000, d = 19, k = 8;
  const std::vector<float> points = kmeans_points(n, d);
  const KmeansResult want = reference_kmeans(points, d, k, 4);
  weft::cpu::ExecutorOptions options;
  options.workers = 3;
  weft::cpu::Executor workers(options);
  ASSERT_EQ(partial_sums_for(workers, n), 3);
  std::vector<float> centroids(static_cast<std::size_t>(k) * d), norms(k);
  std::vector<int> labels(n, -1);
  for (int round = 0; round < 10; ++round) {
    std::fill(labels.begin(), labels.end(), -1);  // a label read before its task ran: caught
    const KmeansResult got = kmeans_on_pool(pool, points, d, k, 4, points.data(), centroids.data(),
                                            norms.data(), labels.data(), host_upload, &workers);
    ASSERT_EQ(got.labels, want.labels) << "round " << round;
    ASSERT_EQ(got.centroids, want.centroids) << "round " << round;
  }
  std::vector<float> serial(points.begin(), points.begin() + k * d), by_parts = serial;
  update_centroids(points, d, want.labels, k, serial);
  update_centroids(points, d, want.labels, k, by_parts, &workers);
  EXPECT_EQ(by_parts, serial);
  EXPECT_NE(by_parts, std::vector<float>(points.begin(), points.begin() + k * d));
  // From one of the summing workers, the call would wait for itself: refused.
  auto from_a_worker = workers.submit([&] {
    (void)kmeans_on_pool(pool, points, d, k, 1, points.data(), centroids.data(), norms.data(),
                         labels.data(), host_upload, &workers);
  });
  EXPECT_THROW(from_a_worker.get(), std::invalid_argument);
}

// The same with the heaps fed by CPU workers, each pop's tiles in runs of whole tiles, one task
// a run, with one buffer, two, and as many as tiles (all in flight, so that a pop brings
// several and is cut into runs), repeated so that the workers' interleavings vary
// (ThreadSanitizer watches the band locks and the buffer hand-back in CI's TSan build).
TEST(Tnn, HeapsFedByCpuWorkersFindTheBruteForceNeighbours) {
  AppPool pool(host_options());
  weft::cpu::ExecutorOptions options;
  options.workers = 3;
  weft::cpu::Executor workers(options);
  const PointSet points = PointSet::random(300, 24, 5);
  const auto want = reference_tnn(points, 16);
  for (const std::size_t slots : {std::size_t{1}, std::size_t{2}, std::size_t{15}}) {
    std::vector<float> buffers(slots * 64 * 64);
    for (int round = 0; round < 10; ++round) {
      const auto got = tnn_on_pool(pool, points, points.col_major.data(), points.row_major.data(),
                                   buffers.data(), slots, 16, &workers);
      ASSERT_EQ(got, want) << slots << " slots, round " << round;
    }
  }
}

// Two copies of A and B stand for two GPUs: blocks 0-1 read the first, blocks 2-3 the second.
TEST(MultiGpuGemm, TilesOverTwoCopiesOfTheInputsMakeTheProduct) {
  AppPool pool(host_options());  // 4 blocks: "2 GPUs" of 2 blocks each
  constexpr int n = 192;
  const GemmBatch one = GemmBatch::uniform(1, n, n, n);
  std::vector<double> a, b, c(static_cast<std::size_t>(n) * n, -1.0), ref(c.size());
  fill_inputs(one, a, b);
  reference_gemm(one, a.data(), b.data(), ref.data());
  const std::vector<double> a2 = a, b2 = b;
  const std::vector<const double*> as{a.data(), a2.data()}, bs{b.data(), b2.data()};
  const auto tasks = replicated_gemm_tasks<kAppCapacity>(as, bs, c.data(), n, 2);
  EXPECT_EQ(tasks.size(), 9u);
  run_tasks(pool, std::span<const AppPool::Record>(tasks));
  EXPECT_EQ(max_relative_error<double>(c, ref), 0.0);
  EXPECT_THROW((void)replicated_gemm_tasks<kAppCapacity>(as, std::vector<const double*>{b.data()},
                                                         c.data(), n, 2),
               std::invalid_argument);
  const std::vector<const double*> null_b{b.data(), nullptr};
  EXPECT_REFUSED(replicated_gemm_tasks<kAppCapacity>(as, null_b, c.data(), n, 2),
                 "GPU 1's copy of B is null");
  EXPECT_REFUSED(replicated_gemm_tasks<kAppCapacity>(as, bs, nullptr, n, 2), "c is null");
}

// The CPU references check what they are given too: they are what every result is held to.
TEST(References, ShortOrInconsistentInputsAreRefusedNamingThem) {
  const CsrMatrix m = CsrMatrix::skewed(50, 40, 10, 1);
  std::vector<float> x(40, 1.0f), y;
  reference_spmv(m, x, y);
  EXPECT_EQ(y.size(), 50u);
  std::vector<float> short_x(39, 1.0f);
  EXPECT_REFUSED(reference_spmv(m, short_x, y), "x of 40 (got 39)");
  CsrMatrix stray = m;
  stray.col[3] = 40;
  EXPECT_REFUSED(reference_spmv(stray, x, y), "entry 3's column 40 is not in [0, 40)");
  CsrMatrix fewer_starts = m;
  fewer_starts.row_start.pop_back();
  EXPECT_REFUSED(reference_spmv(fewer_starts, x, y), "50 rows need 51 row starts (got 50)");
  CsrMatrix falling = m;
  falling.row_start[5] = falling.row_start[6] + 1;
  EXPECT_REFUSED(reference_spmv(falling, x, y), "row 5 starts at");
  CsrMatrix short_values = m;
  short_values.value.pop_back();
  EXPECT_REFUSED(reference_spmv(short_values, x, y), "past the columns or values given");
  Options o = Options::random(10, 2);
  o.years.pop_back();
  std::vector<float> call, put;
  EXPECT_REFUSED(reference_black_scholes(o, 0.02f, 0.3f, call, put), "and 9 maturities");
  o = Options::random(10, 2);
  o.strike.pop_back();
  EXPECT_REFUSED(reference_black_scholes(o, 0.02f, 0.3f, call, put), "10 spots, 9 strikes");
  const std::vector<double> a = spd_matrix(4);
  EXPECT_REFUSED(cholesky_residual(a, std::vector<double>(15), 4), "(got 16 and 15)");
  EXPECT_REFUSED(cholesky_residual(a, a, 0), "n = 0");
}

}  // namespace
}  // namespace apps::gpu
