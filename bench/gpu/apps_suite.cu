// The GPU applications suite. Each contender's value is the median of `reps` runs of the whole
// job, from the first call to the results being ready in device memory (the pool: push of the
// tasks to the last pop; cuBLAS: the first call to the stream's synchronize), in microseconds.
// The pool is paused while a peer runs (it would otherwise hold the SMs).
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "app_pool.hpp"
#include "apps_benchmarks.hpp"
#include "apps_suite.hpp"
#include "batched_gemm.hpp"
#include "weft/gpu/detail/cuda_check.cuh"

namespace weft::bench::gpu {

namespace {

using apps::gpu::AppPool;
using apps::gpu::GemmBatch;

void check_cublas(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) {
    throw std::runtime_error(std::string("cuBLAS: ") + what + " failed (status " +
                             std::to_string(static_cast<int>(s)) + ")");
  }
}

// Device buffers of one batch, its CPU reference, and the checks.
template <class T>
struct GemmBuffers {
  const GemmBatch& batch;
  T* a = nullptr;
  T* b = nullptr;
  T* c = nullptr;
  std::vector<T> ref;
  std::vector<const T*> a_ptrs, b_ptrs;
  std::vector<T*> c_ptrs;
  const T** d_a_ptrs = nullptr;
  const T** d_b_ptrs = nullptr;
  T** d_c_ptrs = nullptr;

  explicit GemmBuffers(const GemmBatch& gb) : batch(gb) {
    std::vector<T> ha, hb;
    apps::gpu::fill_inputs(batch, ha, hb);
    ref.resize(batch.c_size);
    apps::gpu::reference_gemm(batch, ha.data(), hb.data(), ref.data());
    WEFT_CUDA_CHECK(cudaMalloc(&a, sizeof(T) * batch.a_size));
    WEFT_CUDA_CHECK(cudaMalloc(&b, sizeof(T) * batch.b_size));
    WEFT_CUDA_CHECK(cudaMalloc(&c, sizeof(T) * batch.c_size));
    WEFT_CUDA_CHECK(cudaMemcpy(a, ha.data(), sizeof(T) * ha.size(), cudaMemcpyHostToDevice));
    WEFT_CUDA_CHECK(cudaMemcpy(b, hb.data(), sizeof(T) * hb.size(), cudaMemcpyHostToDevice));
    const std::size_t n = batch.shapes.size();
    for (std::size_t i = 0; i < n; ++i) {
      a_ptrs.push_back(a + batch.a_at[i]);
      b_ptrs.push_back(b + batch.b_at[i]);
      c_ptrs.push_back(c + batch.c_at[i]);
    }
    WEFT_CUDA_CHECK(cudaMalloc(&d_a_ptrs, sizeof(T*) * n));
    WEFT_CUDA_CHECK(cudaMalloc(&d_b_ptrs, sizeof(T*) * n));
    WEFT_CUDA_CHECK(cudaMalloc(&d_c_ptrs, sizeof(T*) * n));
    WEFT_CUDA_CHECK(cudaMemcpy(d_a_ptrs, a_ptrs.data(), sizeof(T*) * n, cudaMemcpyHostToDevice));
    WEFT_CUDA_CHECK(cudaMemcpy(d_b_ptrs, b_ptrs.data(), sizeof(T*) * n, cudaMemcpyHostToDevice));
    WEFT_CUDA_CHECK(cudaMemcpy(d_c_ptrs, c_ptrs.data(), sizeof(T*) * n, cudaMemcpyHostToDevice));
  }
  ~GemmBuffers() {
    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
    cudaFree(d_a_ptrs);
    cudaFree(d_b_ptrs);
    cudaFree(d_c_ptrs);
  }
  GemmBuffers(const GemmBuffers&) = delete;
  GemmBuffers& operator=(const GemmBuffers&) = delete;

  void clear_c() { WEFT_CUDA_CHECK(cudaMemset(c, 0xFF, sizeof(T) * batch.c_size)); }  // NaNs
  [[nodiscard]] bool matches() const {
    std::vector<T> got(batch.c_size);
    WEFT_CUDA_CHECK(cudaMemcpy(got.data(), c, sizeof(T) * got.size(), cudaMemcpyDeviceToHost));
    const double tol = std::is_same_v<T, double> ? 1e-12 : 1e-5;
    return apps::gpu::max_relative_error<T>(got, ref) <= tol;
  }
};

// cublas<t>gemm and friends, by element type.
template <class T>
struct Blas;
template <>
struct Blas<double> {
  static constexpr auto gemm = cublasDgemm;
  static constexpr auto strided = cublasDgemmStridedBatched;
  static constexpr auto batched = cublasDgemmBatched;
  static constexpr auto grouped = cublasDgemmGroupedBatched;
};
template <>
struct Blas<float> {
  static constexpr auto gemm = cublasSgemm;
  static constexpr auto strided = cublasSgemmStridedBatched;
  static constexpr auto batched = cublasSgemmBatched;
  static constexpr auto grouped = cublasSgemmGroupedBatched;
};

struct Cublas {
  cublasHandle_t handle = nullptr;
  std::vector<cudaStream_t> streams;  // 32, non-blocking
  void* workspace = nullptr;
  Cublas() {
    check_cublas(cublasCreate(&handle), "cublasCreate");
    streams.resize(32);
    for (auto& s : streams) WEFT_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    // A workspace of its own: cuBLAS then allocates nothing while a graph is captured.
    constexpr std::size_t kWorkspace = std::size_t{32} << 20;
    WEFT_CUDA_CHECK(cudaMalloc(&workspace, kWorkspace));
    check_cublas(cublasSetWorkspace(handle, workspace, kWorkspace), "cublasSetWorkspace");
  }
  ~Cublas() {
    cublasDestroy(handle);
    for (auto& s : streams) cudaStreamDestroy(s);
    cudaFree(workspace);
  }
  Cublas(const Cublas&) = delete;
  Cublas& operator=(const Cublas&) = delete;
  cudaStream_t main() const { return streams[0]; }
};

// Every per-matrix gemm of the batch, on `streams` streams round robin.
template <class T>
void per_matrix_gemms(Cublas& cb, GemmBuffers<T>& g, int streams) {
  const T one = 1, zero = 0;
  for (std::size_t i = 0; i < g.batch.shapes.size(); ++i) {
    const auto s = g.batch.shapes[i];
    check_cublas(cublasSetStream(cb.handle, cb.streams[i % static_cast<std::size_t>(streams)]),
                 "cublasSetStream");
    check_cublas(Blas<T>::gemm(cb.handle, CUBLAS_OP_N, CUBLAS_OP_N, s.m, s.n, s.k, &one,
                               g.a_ptrs[i], s.m, g.b_ptrs[i], s.k, &zero, g.c_ptrs[i], s.m),
                 "gemm");
  }
}

template <class T>
void sync_streams(Cublas& cb, int streams) {
  for (int s = 0; s < streams; ++s) WEFT_CUDA_CHECK(cudaStreamSynchronize(cb.streams[s]));
}

// The peers of one batched GEMM benchmark; `uniform`: strided and batched apply.
template <class T>
std::vector<Contender> gemm_peers(Cublas& cb, GemmBuffers<T>& g, AppPool& pool, bool uniform,
                                  int reps) {
  std::vector<Contender> peers;
  const T one = 1, zero = 0;
  const auto n = static_cast<int>(g.batch.shapes.size());
  auto peer = [&](std::string name, std::function<void()> run_once) {
    peers.push_back({std::move(name), [&g, &pool, run_once, reps] {
                       pool.pause();
                       g.clear_c();
                       const double t = median_us(reps, run_once);
                       return Outcome{t, g.matches()};
                     }});
  };
  if (uniform) {
    const auto s = g.batch.shapes[0];
    peer("strided_batched", [&cb, &g, s, n, one, zero] {
      check_cublas(cublasSetStream(cb.handle, cb.main()), "cublasSetStream");
      check_cublas(Blas<T>::strided(cb.handle, CUBLAS_OP_N, CUBLAS_OP_N, s.m, s.n, s.k, &one, g.a,
                                    s.m, static_cast<long long>(s.m) * s.k, g.b, s.k,
                                    static_cast<long long>(s.k) * s.n, &zero, g.c, s.m,
                                    static_cast<long long>(s.m) * s.n, n),
                   "gemmStridedBatched");
      WEFT_CUDA_CHECK(cudaStreamSynchronize(cb.main()));
    });
    peer("batched", [&cb, &g, s, n, one, zero] {
      check_cublas(cublasSetStream(cb.handle, cb.main()), "cublasSetStream");
      check_cublas(Blas<T>::batched(cb.handle, CUBLAS_OP_N, CUBLAS_OP_N, s.m, s.n, s.k, &one,
                                    g.d_a_ptrs, s.m, g.d_b_ptrs, s.k, &zero, g.d_c_ptrs, s.m, n),
                   "gemmBatched");
      WEFT_CUDA_CHECK(cudaStreamSynchronize(cb.main()));
    });
  } else {
    peer("grouped_batched", [&cb, &g, n, one, zero] {
      // One group per matrix (sizes differ), group size 1.
      static thread_local std::vector<cublasOperation_t> ops;
      static thread_local std::vector<int> m, nn, k, one_each;
      static thread_local std::vector<T> alpha, beta;
      ops.assign(n, CUBLAS_OP_N);
      m.clear();
      nn.clear();
      k.clear();
      for (const auto& s : g.batch.shapes) {
        m.push_back(s.m);
        nn.push_back(s.n);
        k.push_back(s.k);
      }
      one_each.assign(n, 1);
      alpha.assign(n, one);
      beta.assign(n, zero);
      check_cublas(cublasSetStream(cb.handle, cb.main()), "cublasSetStream");
      check_cublas(
          Blas<T>::grouped(cb.handle, ops.data(), ops.data(), m.data(), nn.data(), k.data(),
                           alpha.data(), g.d_a_ptrs, m.data(), g.d_b_ptrs, k.data(), beta.data(),
                           g.d_c_ptrs, m.data(), n, one_each.data()),
          "gemmGroupedBatched");
      WEFT_CUDA_CHECK(cudaStreamSynchronize(cb.main()));
    });
  }
  // Per-matrix gemm calls on 1, 4, 16 or 32 streams: the best count's median.
  peers.push_back({"streams_best", [&cb, &g, &pool, reps] {
                     pool.pause();
                     g.clear_c();
                     double best = 0;
                     for (int streams : {1, 4, 16, 32}) {
                       const double t = median_us(reps, [&] {
                         per_matrix_gemms(cb, g, streams);
                         sync_streams<T>(cb, streams);
                       });
                       if (best == 0 || t < best) best = t;
                     }
                     return Outcome{best, g.matches()};
                   }});
  // The per-matrix calls captured once into a CUDA graph, replayed.
  peers.push_back({"graph", [&cb, &g, &pool, reps] {
                     pool.pause();
                     g.clear_c();
                     cudaGraph_t graph;
                     cudaGraphExec_t exec;
                     WEFT_CUDA_CHECK(
                         cudaStreamBeginCapture(cb.main(), cudaStreamCaptureModeThreadLocal));
                     per_matrix_gemms(cb, g, 1);
                     WEFT_CUDA_CHECK(cudaStreamEndCapture(cb.main(), &graph));
                     WEFT_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
                     const double t = median_us(reps, [&] {
                       WEFT_CUDA_CHECK(cudaGraphLaunch(exec, cb.main()));
                       WEFT_CUDA_CHECK(cudaStreamSynchronize(cb.main()));
                     });
                     cudaGraphExecDestroy(exec);
                     cudaGraphDestroy(graph);
                     return Outcome{t, g.matches()};
                   }});
  return peers;
}

template <class T>
void batched_gemm_benchmark(Suite& suite, const std::string& name, const GemmBatch& batch,
                            bool uniform, AppPool& pool, Cublas& cb, int reps) {
  GemmBuffers<T> g(batch);
  const auto tasks = apps::gpu::gemm_tasks<T, apps::gpu::kAppCapacity>(batch, g.a, g.b, g.c);
  std::vector<Contender> contenders;
  contenders.push_back({"weft", [&] {
                          pool.pause();  // the memset below needs the SMs
                          g.clear_c();
                          pool.resume();
                          const double t = median_us(reps, [&] {
                            apps::gpu::run_tasks(pool, std::span<const AppPool::Record>(tasks));
                          });
                          pool.pause();
                          return Outcome{t, g.matches()};
                        }});
  for (auto& p : gemm_peers(cb, g, pool, uniform, reps)) contenders.push_back(std::move(p));
  suite.compare(name, "us", Better::lower, std::move(contenders));
  std::fprintf(stderr, "[bench] %s: %zu matrices, %zu tile tasks, %.3g GFLOP\n", name.c_str(),
               batch.shapes.size(), tasks.size(), batch.flops() * 1e-9);
}

}  // namespace

Suite run_gpu_apps_suite(const GpuAppsSuiteOptions& o) {
  SuiteOptions so;
  so.samples = o.samples;
  so.warmups = 1;
  Suite suite("gpu-apps", so);
  int gpus = 0;
  WEFT_CUDA_CHECK(cudaGetDeviceCount(&gpus));
  cudaDeviceProp prop{};
  WEFT_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  suite.set_gpu(prop.name, gpus);
  const int reps = o.quick ? 10 : 50;
  auto selected = [&o](const char* app) {
    return o.only.empty() || std::find(o.only.begin(), o.only.end(), app) != o.only.end();
  };
  {
    Cublas cb;  // before the pool: its allocations synchronize the device
    const GemmBatch fixed = GemmBatch::uniform(128, 64, 64, 64);
    const GemmBatch variable = GemmBatch::variable(o.quick ? 200 : 1000, 16, 256, 2026);
    AppPool pool(apps::gpu::device_pool_options({0}));
    std::fprintf(stderr, "[bench] gpu-apps: pool %s\n", pool.describe().c_str());
    pool.pause();
    if (selected("batched_gemm")) {
      batched_gemm_benchmark<double>(suite, "batched_dgemm_128x64", fixed, true, pool, cb, reps);
      batched_gemm_benchmark<float>(suite, "batched_sgemm_128x64", fixed, true, pool, cb, reps);
      batched_gemm_benchmark<double>(suite, "vbatched_dgemm", variable, false, pool, cb, reps);
    }
    pool.pause();  // the buffers' frees synchronize the device
    if (selected("cholesky")) {
      // Pools of their own, whose blocks run task graphs as large as n = 8192's (128 tiles,
      // 357,760 tile tasks; in blocks of 2, 45,760); the other applications' pool runs none.
      constexpr std::size_t kGraphCapacity = std::size_t{1} << 19;
      weft::gpu::PoolOptions options = apps::gpu::device_pool_options({0});
      options.graph_capacity = kGraphCapacity;
      AppPool graph_pool(options);
      graph_pool.pause();
      apps::gpu::CholeskyPool wide_pool(apps::gpu::cholesky_pool_options({0}, kGraphCapacity));
      wide_pool.pause();
      std::fprintf(stderr, "[bench] gpu-apps: Cholesky's wide pool %s\n",
                   wide_pool.describe().c_str());
      cholesky_benchmarks(
          suite, graph_pool, wide_pool,
          o.quick ? std::vector<int>{1024, 2048} : std::vector<int>{1024, 2048, 4096, 8192},
          o.quick ? 2 : 5);
    }
    if (selected("spmv_bs")) spmv_bs_benchmark(suite, o.quick, reps);  // its own pool
    if (selected("tnn")) tnn_benchmarks(suite, pool, o.quick, o.quick ? 2 : 3);
    if (selected("kmeans")) kmeans_benchmarks(suite, pool, o.quick, o.quick ? 2 : 3);
    pool.pause();
  }
  if (selected("multi_gpu_gemm")) {
    multi_gpu_gemm_benchmarks(suite, o.quick, o.quick ? 2 : 3);  // two GPUs or more
  }
  return suite;
}

}  // namespace weft::bench::gpu
