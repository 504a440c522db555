// gpu-apps: tiled Cholesky against cuSOLVER and LAPACKE, and the SpMV + Black-Scholes mix
// against kernels, concurrent kernels and cuSPARSE.
#include <cublas_v2.h>
#include <cusolverDn.h>
#include <cusparse.h>
#include <lapacke.h>

#include <cstdio>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>

#include "apps_benchmarks.hpp"
#include "batched_gemm.hpp"
#include "cholesky.hpp"
#include "cholesky_pool.hpp"
#include "spmv_bs.hpp"
#include "weft/gpu/detail/cuda_check.cuh"

namespace weft::bench::gpu {

namespace {

using apps::gpu::AppPool;
using apps::gpu::CholeskyPool;

void check(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(std::string("gpu-apps: ") + what + " failed");
}

}  // namespace

namespace {

// The same tiled algorithm (CholeskyGraph's tasks, in its order) as library calls on streams:
// each task on stream (its tile's column) mod the stream count, after an event of each task it
// depends on. POTRF is cuSOLVER's on the tile, TRSM, SYRK and GEMM are cuBLAS's.
class TiledOnStreams {
 public:
  TiledOnStreams(int n, int streams) : graph_(n), streams_(static_cast<std::size_t>(streams)) {
    check(cublasCreate(&blas_) == CUBLAS_STATUS_SUCCESS, "cublasCreate");
    check(cusolverDnCreate(&solver_) == CUSOLVER_STATUS_SUCCESS, "cusolverDnCreate");
    for (auto& s : streams_) WEFT_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    events_.resize(graph_.tasks().size());
    for (auto& e : events_) WEFT_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    int lwork = 0;
    constexpr int nb = apps::gpu::CholeskyTile::kTile;
    double* probe = nullptr;  // a tile's shape in a matrix of leading dimension n
    WEFT_CUDA_CHECK(cudaMalloc(&probe, sizeof(double) * static_cast<std::size_t>(n) * nb));
    check(cusolverDnDpotrf_bufferSize(solver_, CUBLAS_FILL_MODE_LOWER, nb, probe, n, &lwork) ==
              CUSOLVER_STATUS_SUCCESS,
          "cusolverDnDpotrf_bufferSize");
    WEFT_CUDA_CHECK(cudaFree(probe));
    // One workspace and info word per stream: POTRFs on different streams may overlap.
    work_.resize(streams_.size());
    info_.resize(streams_.size());
    for (std::size_t s = 0; s < streams_.size(); ++s) {
      WEFT_CUDA_CHECK(cudaMalloc(&work_[s], sizeof(double) * static_cast<std::size_t>(lwork + 1)));
      WEFT_CUDA_CHECK(cudaMalloc(&info_[s], sizeof(int)));
    }
    lwork_ = lwork;
    // Predecessors of every task, from the successor lists.
    preds_.resize(graph_.tasks().size());
    for (std::size_t t = 0; t < graph_.tasks().size(); ++t) {
      for (const int s : graph_.successors()[t])
        preds_[static_cast<std::size_t>(s)].push_back(static_cast<int>(t));
    }
  }
  ~TiledOnStreams() {
    for (auto& e : events_) cudaEventDestroy(e);
    for (auto& s : streams_) cudaStreamDestroy(s);
    for (auto* w : work_) cudaFree(w);
    for (auto* i : info_) cudaFree(i);
    cublasDestroy(blas_);
    cusolverDnDestroy(solver_);
  }
  TiledOnStreams(const TiledOnStreams&) = delete;
  TiledOnStreams& operator=(const TiledOnStreams&) = delete;

  void factor(double* a, int lda) {
    constexpr int nb = apps::gpu::CholeskyTile::kTile;
    const double one = 1.0, minus_one = -1.0;
    auto tile = [&](int r, int c) { return apps::gpu::CholeskyTile::at(a, lda, r, c); };
    const auto& tasks = graph_.tasks();
    for (std::size_t t = 0; t < tasks.size(); ++t) {
      const auto& x = tasks[t];
      const std::size_t si = static_cast<std::size_t>(x.j) % streams_.size();
      cudaStream_t s = streams_[si];
      for (const int p : preds_[t])
        WEFT_CUDA_CHECK(cudaStreamWaitEvent(s, events_[static_cast<std::size_t>(p)], 0));
      check(cublasSetStream(blas_, s) == CUBLAS_STATUS_SUCCESS, "cublasSetStream");
      using Kind = apps::gpu::CholeskyGraph::Kind;
      switch (x.kind) {
        case Kind::potrf:
          check(cusolverDnSetStream(solver_, s) == CUSOLVER_STATUS_SUCCESS, "cusolverDnSetStream");
          check(cusolverDnDpotrf(solver_, CUBLAS_FILL_MODE_LOWER, nb, tile(x.k, x.k), lda,
                                 work_[si], lwork_, info_[si]) == CUSOLVER_STATUS_SUCCESS,
                "cusolverDnDpotrf");
          break;
        case Kind::trsm:  // A_ik = A_ik L_kk^-T
          check(cublasDtrsm(blas_, CUBLAS_SIDE_RIGHT, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_T,
                            CUBLAS_DIAG_NON_UNIT, nb, nb, &one, tile(x.k, x.k), lda, tile(x.i, x.k),
                            lda) == CUBLAS_STATUS_SUCCESS,
                "cublasDtrsm");
          break;
        case Kind::syrk:  // A_ii -= A_ik A_ik^T
          check(
              cublasDsyrk(blas_, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, nb, nb, &minus_one,
                          tile(x.i, x.k), lda, &one, tile(x.i, x.i), lda) == CUBLAS_STATUS_SUCCESS,
              "cublasDsyrk");
          break;
        case Kind::gemm:  // A_ij -= A_ik A_jk^T
          check(cublasDgemm(blas_, CUBLAS_OP_N, CUBLAS_OP_T, nb, nb, nb, &minus_one, tile(x.i, x.k),
                            lda, tile(x.j, x.k), lda, &one, tile(x.i, x.j),
                            lda) == CUBLAS_STATUS_SUCCESS,
                "cublasDgemm");
          break;
      }
      WEFT_CUDA_CHECK(cudaEventRecord(events_[t], s));
    }
    for (auto& s : streams_) WEFT_CUDA_CHECK(cudaStreamSynchronize(s));
  }

 private:
  apps::gpu::CholeskyGraph graph_;
  std::vector<cudaStream_t> streams_;
  std::vector<cudaEvent_t> events_;
  std::vector<std::vector<int>> preds_;
  std::vector<double*> work_;
  std::vector<int*> info_;
  int lwork_ = 0;
  cublasHandle_t blas_ = nullptr;
  cusolverDnHandle_t solver_ = nullptr;
};

}  // namespace

void cholesky_benchmarks(Suite& suite, AppPool& pool, CholeskyPool& wide_pool,
                         const std::vector<int>& sizes, int reps) {
  cusolverDnHandle_t solver = nullptr;
  check(cusolverDnCreate(&solver) == CUSOLVER_STATUS_SUCCESS, "cusolverDnCreate");
  cudaStream_t stream;
  WEFT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  check(cusolverDnSetStream(solver, stream) == CUSOLVER_STATUS_SUCCESS, "cusolverDnSetStream");
  for (const int n : sizes) {
    const std::vector<double> a = apps::gpu::spd_matrix(n);
    double* d_a = device_copy(a);
    double* d_work = nullptr;
    int* d_info = nullptr;
    int lwork = 0;
    check(cusolverDnDpotrf_bufferSize(solver, CUBLAS_FILL_MODE_LOWER, n, d_a, n, &lwork) ==
              CUSOLVER_STATUS_SUCCESS,
          "cusolverDnDpotrf_bufferSize");
    WEFT_CUDA_CHECK(cudaMalloc(&d_work, sizeof(double) * static_cast<std::size_t>(lwork)));
    WEFT_CUDA_CHECK(cudaMalloc(&d_info, sizeof(int)));
    const std::size_t bytes = sizeof(double) * a.size();
    auto reset = [&] { WEFT_CUDA_CHECK(cudaMemcpy(d_a, a.data(), bytes, cudaMemcpyHostToDevice)); };
    auto verified = [&] {
      return apps::gpu::cholesky_residual(a, host_copy(d_a, a.size()), n) < 1e-13;
    };
    // Each timed run factors a fresh copy: the copy is outside the time, so one run per copy.
    // Every pool is paused between runs: `on` (a pool, or nullptr) is resumed for the runs.
    auto timed = [&](auto* on, auto&& factor, int runs) {
      std::vector<double> t;
      for (int r = 0; r < runs + 1; ++r) {
        reset();
        if (on != nullptr) on->resume();
        const double dt = time_seconds(factor);
        if (on != nullptr) on->pause();
        if (r > 0) t.push_back(dt * 1e6);
      }
      return median(t);
    };
    AppPool* no_pool = nullptr;
    // The plan's run on `on` (its pool), sampled as every contender is.
    auto plan_time = [&](auto& plan, auto& on) {
      return timed(
          &on, [&] { plan.factor(d_a, n); }, reps);
    };
    // Prepared once for the size, as cuSOLVER's workspace is: the task graph and its shape
    // (prepared by the first, untimed, run) are reused by every run. Tiles and blocks of 2
    // tiles both run on the pool of 256 task threads (cholesky_pool.hpp).
    apps::gpu::CholeskyPlan<CholeskyPool> chosen(wide_pool, n);
    const int block = chosen.graph().block();
    std::vector<Contender> c;
    c.push_back({"weft", [&] { return Outcome{plan_time(chosen, wide_pool), verified()}; }});
    c.push_back({"cusolver", [&] {
                   const double t = timed(
                       no_pool,
                       [&] {
                         check(cusolverDnDpotrf(solver, CUBLAS_FILL_MODE_LOWER, n, d_a, n, d_work,
                                                lwork, d_info) == CUSOLVER_STATUS_SUCCESS,
                               "cusolverDnDpotrf");
                         WEFT_CUDA_CHECK(cudaStreamSynchronize(stream));
                       },
                       reps);
                   return Outcome{t, verified()};
                 }});
    TiledOnStreams tiled(n, 8);  // made while the pool is paused (it allocates)
    c.push_back({"cublas_streams", [&] {
                   // Its host issues one call per tile task (tens of thousands past n = 2048):
                   // there, one run per sample, so that a full run fits one device call.
                   const double t = timed(
                       no_pool, [&] { tiled.factor(d_a, n); }, n > 2048 ? 1 : reps);
                   return Outcome{t, verified()};
                 }});
    c.push_back({"lapacke_cpu", [&] {
                   std::vector<double> h = a;
                   std::vector<double> t;
                   for (int r = 0; r < std::max(1, reps / 10) + 1; ++r) {
                     h = a;
                     const double dt = time_seconds([&] {
                       check(LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', n, h.data(), n) == 0,
                             "LAPACKE_dpotrf");
                     });
                     if (r > 0) t.push_back(dt * 1e6);
                   }
                   return Outcome{median(t), apps::gpu::cholesky_residual(a, h, n) < 1e-13};
                 }});
    suite.compare("cholesky_" + std::to_string(n), "us", Better::lower, std::move(c));
    // weft's other driver, for the record: the host tracks the tasks.
    auto host_tracked = [&](auto& plan, auto& on) {
      if (!plan.as_graph()) return;
      const double t = timed(
          &on, [&] { plan.factor_host_tracked(d_a, n); }, reps);
      std::fprintf(stderr, "[bench] cholesky_%d: host-tracked %.1f us%s\n", n, t,
                   verified() ? "" : " (UNVERIFIED)");
      suite.add_metric(
          Metric{"cholesky_" + std::to_string(n) + "_host_tracked", "us", Better::lower, {t}});
    };
    host_tracked(chosen, wide_pool);
    // What weft did not choose, for the record of its choices (cholesky_block_for, the pool):
    // the other block size on the same pool, and the chosen one on the applications' pool.
    const std::string size = "cholesky_" + std::to_string(n);
    auto record = [&](const std::string& name, auto& plan, auto& on) {
      suite.measure(name, "us", Better::lower, [&] {
        return Outcome{plan_time(plan, on), verified()};
      });
    };
    auto block_name = [](int b) {
      return b == 1 ? std::string("_tiles") : "_blocks_" + std::to_string(b);
    };
    apps::gpu::CholeskyPlan<AppPool> narrow(pool, n, block);
    record(size + block_name(block) + "_app_pool", narrow, pool);
    const int other = block == 1 ? 2 : 1;
    if (n % (other * apps::gpu::CholeskyTile::kTile) == 0) {
      apps::gpu::CholeskyPlan<CholeskyPool> other_plan(wide_pool, n, other);
      record(size + block_name(other), other_plan, wide_pool);
    }
    cudaFree(d_a);
    cudaFree(d_work);
    cudaFree(d_info);
  }
  cusolverDnDestroy(solver);
  cudaStreamDestroy(stream);
}

namespace {

constexpr int kRowsPerTask = 512, kOptionsPerTask = 2048, kThreads = 128;

// The pool's bodies as plain kernels: one task's share per block.
__global__ void spmv_kernel(apps::gpu::SpmvRows::Payload p, int rows) {
  p.first = static_cast<int>(blockIdx.x) * kRowsPerTask;
  p.count = min(kRowsPerTask, rows - p.first);
  apps::gpu::SpmvRows::run(
      p, weft::gpu::BlockContext(static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x),
                                 static_cast<int>(blockIdx.x), nullptr));
}
__global__ void bs_kernel(apps::gpu::BlackScholes::Payload p, int options) {
  p.first = static_cast<int>(blockIdx.x) * kOptionsPerTask;
  p.count = min(kOptionsPerTask, options - p.first);
  apps::gpu::BlackScholes::run(
      p, weft::gpu::BlockContext(static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x),
                                 static_cast<int>(blockIdx.x), nullptr));
}

}  // namespace

void spmv_bs_benchmark(Suite& suite, bool quick, int reps) {
  using namespace apps::gpu;
  const int rows = quick ? 1 << 18 : 1 << 20, options = quick ? 1 << 20 : 4 << 20;
  const CsrMatrix m = CsrMatrix::skewed(rows, rows, 4096, 17);
  std::vector<float> x(static_cast<std::size_t>(m.cols));
  for (std::size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<float>(static_cast<int>(i % 9) - 4) / 8.0f;
  std::vector<float> y_ref, call_ref, put_ref;
  reference_spmv(m, x, y_ref);
  const Options o = Options::random(options, 23);
  reference_black_scholes(o, 0.02f, 0.30f, call_ref, put_ref);
  auto* rs = device_copy(m.row_start);
  auto* cols = device_copy(m.col);
  auto* vals = device_copy(m.value);
  auto* dx = device_copy(x);
  auto* dy = device_copy(std::vector<float>(y_ref.size()));
  auto* spot = device_copy(o.spot);
  auto* strike = device_copy(o.strike);
  auto* years = device_copy(o.years);
  auto* call = device_copy(std::vector<float>(call_ref.size()));
  auto* put = device_copy(std::vector<float>(put_ref.size()));
  std::vector<int> rs32(m.row_start.begin(), m.row_start.end());
  auto* rs32_d = device_copy(rs32);
  const SpmvBsArrays arrays{rs,     cols,  vals, dx,  dy,      m.rows, spot,
                            strike, years, call, put, options, 0.02f,  0.30f};
  auto clear = [&] {
    WEFT_CUDA_CHECK(cudaMemset(dy, 0xFF, sizeof(float) * y_ref.size()));
    WEFT_CUDA_CHECK(cudaMemset(call, 0xFF, sizeof(float) * call_ref.size()));
    WEFT_CUDA_CHECK(cudaMemset(put, 0xFF, sizeof(float) * put_ref.size()));
  };
  auto verified = [&] {
    return max_relative_error<float>(host_copy(dy, y_ref.size()), y_ref) <= 1e-4 &&
           max_relative_error<float>(host_copy(call, call_ref.size()), call_ref) <= 1e-3 &&
           max_relative_error<float>(host_copy(put, put_ref.size()), put_ref) <= 1e-3;
  };
  const auto mixed = spmv_bs_tasks<kSpmvBsCapacity>(arrays, kRowsPerTask, kOptionsPerTask, true);
  const auto serial_tasks =
      spmv_bs_tasks<kSpmvBsCapacity>(arrays, kRowsPerTask, kOptionsPerTask, false);
  cudaStream_t s1, s2;
  WEFT_CUDA_CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  WEFT_CUDA_CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  const SpmvRows::Payload sp{rs, cols, vals, dx, dy, 0, 0};
  const BlackScholes::Payload bp{spot, strike, years, call, put, 0.02f, 0.30f, 0, 0};
  const int spmv_blocks = (rows + kRowsPerTask - 1) / kRowsPerTask;
  const int bs_blocks = (options + kOptionsPerTask - 1) / kOptionsPerTask;
  cusparseHandle_t sparse = nullptr;
  check(cusparseCreate(&sparse) == CUSPARSE_STATUS_SUCCESS, "cusparseCreate");
  check(cusparseSetStream(sparse, s1) == CUSPARSE_STATUS_SUCCESS, "cusparseSetStream");
  cusparseSpMatDescr_t mat;
  cusparseDnVecDescr_t vx, vy;
  check(cusparseCreateCsr(&mat, rows, rows, static_cast<std::int64_t>(m.col.size()), rs32_d, cols,
                          vals, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO,
                          CUDA_R_32F) == CUSPARSE_STATUS_SUCCESS,
        "cusparseCreateCsr");
  check(cusparseCreateDnVec(&vx, rows, dx, CUDA_R_32F) == CUSPARSE_STATUS_SUCCESS, "DnVec x");
  check(cusparseCreateDnVec(&vy, rows, dy, CUDA_R_32F) == CUSPARSE_STATUS_SUCCESS, "DnVec y");
  const float one = 1.0f, zero = 0.0f;
  std::size_t buffer_size = 0;
  check(cusparseSpMV_bufferSize(sparse, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, mat, vx, &zero, vy,
                                CUDA_R_32F, CUSPARSE_SPMV_ALG_DEFAULT,
                                &buffer_size) == CUSPARSE_STATUS_SUCCESS,
        "cusparseSpMV_bufferSize");
  void* sparse_buffer = nullptr;
  WEFT_CUDA_CHECK(cudaMalloc(&sparse_buffer, buffer_size + 1));

  // The job's own pool, once every allocation above is made (they synchronize the device);
  // paused while the peers run and while clear() writes the outputs.
  std::optional<SpmvBsPool> own_pool(std::in_place, spmv_bs_pool_options({0}));
  SpmvBsPool& pool = *own_pool;
  pool.pause();
  auto pool_run = [&](const std::vector<SpmvBsPool::Record>& tasks) {
    return [&, tasks_ptr = &tasks] {
      pool.pause();
      clear();
      pool.resume();
      const double t = median_us(
          reps, [&] { run_tasks(pool, std::span<const SpmvBsPool::Record>(*tasks_ptr)); });
      pool.pause();
      return Outcome{t, verified()};
    };
  };
  auto kernels = [&](cudaStream_t for_bs, bool sparse_spmv) {
    return [&, for_bs, sparse_spmv] {
      pool.pause();
      clear();
      const double t = median_us(reps, [&] {
        if (sparse_spmv) {
          check(cusparseSpMV(sparse, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, mat, vx, &zero, vy,
                             CUDA_R_32F, CUSPARSE_SPMV_ALG_DEFAULT,
                             sparse_buffer) == CUSPARSE_STATUS_SUCCESS,
                "cusparseSpMV");
        } else {
          spmv_kernel<<<spmv_blocks, kThreads, 0, s1>>>(sp, rows);
        }
        bs_kernel<<<bs_blocks, kThreads, 0, for_bs>>>(bp, options);
        WEFT_CUDA_CHECK(cudaStreamSynchronize(s1));
        WEFT_CUDA_CHECK(cudaStreamSynchronize(s2));
      });
      return Outcome{t, cudaGetLastError() == cudaSuccess && verified()};
    };
  };
  suite.compare("spmv_bs_mixed", "us", Better::lower,
                {{"weft", pool_run(mixed)},
                 {"serial", kernels(s1, false)},
                 {"cke", kernels(s2, false)},
                 {"pool_serial", pool_run(serial_tasks)},
                 {"cusparse", kernels(s1, true)}});
  std::fprintf(stderr, "[bench] spmv_bs_mixed: %d rows (%zu entries), %d options, %zu tasks; %s\n",
               rows, m.col.size(), options, mixed.size(), pool.describe().c_str());
  own_pool.reset();  // before the frees below
  cusparseDestroySpMat(mat);
  cusparseDestroyDnVec(vx);
  cusparseDestroyDnVec(vy);
  cusparseDestroy(sparse);
  cudaFree(sparse_buffer);
  cudaStreamDestroy(s1);
  cudaStreamDestroy(s2);
  for (void* p : {static_cast<void*>(rs), static_cast<void*>(cols), static_cast<void*>(vals),
                  static_cast<void*>(dx), static_cast<void*>(dy), static_cast<void*>(spot),
                  static_cast<void*>(strike), static_cast<void*>(years), static_cast<void*>(call),
                  static_cast<void*>(put), static_cast<void*>(rs32_d)}) {
    cudaFree(p);
  }
}

}  // namespace weft::bench::gpu
