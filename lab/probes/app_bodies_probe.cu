// Where the GPU applications' time goes (issue 28): each application's task body alone as a
// plain kernel (one block of the pool's 128 threads, its shared memory; cudaEvent time), the
// same task through the pool (push one, pop it: wall time), and a batch of 132 (one per SM) both
// ways (inputs reset between runs while the pool is paused); then the tiled Cholesky driver at n =
// 1024 and 2048, timed whole, with the pool's default options and with a consumer that spins
// instead of sleeping between steps. Build and run on the GPU machine from the repository root,
// after `scripts/gpu-build.sh /tmp/logs weft_gpu_apps_device_tests`:
//   lab/probes/app_bodies_probe.sh
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "app_pool.hpp"
#include "cholesky.hpp"
#include "kmeans.hpp"
#include "spmv_bs.hpp"

namespace {

using namespace apps::gpu;
using Record = AppPool::Record;
using Clock = std::chrono::steady_clock;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

template <class T>
__global__ void body_kernel(const typename T::Payload* payloads) {
  extern __shared__ unsigned char smem[];
  typename T::Payload p = payloads[blockIdx.x];
  T::run(p, weft::gpu::BlockContext(static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x),
                                    static_cast<int>(blockIdx.x), smem));
}

template <class T>
std::size_t shared_of() {
  if constexpr (requires { T::kSharedBytes; }) {
    return T::kSharedBytes;
  } else {
    return 0;
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Env {
  cudaStream_t side;
  std::function<void()> reset;  // puts the inputs back (on `side`, synchronized)
  bool pause_to_reset = false;
};

// Median kernel time (us) of `payloads.size()` blocks running T's body.
template <class T>
double kernel_us(const std::vector<typename T::Payload>& payloads, Env& env) {
  typename T::Payload* d = nullptr;
  check(cudaMalloc(&d, sizeof(typename T::Payload) * payloads.size()), "malloc payloads");
  check(cudaMemcpy(d, payloads.data(), sizeof(typename T::Payload) * payloads.size(),
                   cudaMemcpyHostToDevice),
        "copy payloads");
  const std::size_t shared = shared_of<T>();
  check(cudaFuncSetAttribute(body_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(shared)),
        "smem attribute");
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<double> t;
  for (int r = 0; r < 21; ++r) {
    env.reset();
    cudaEventRecord(a, env.side);
    body_kernel<T><<<static_cast<unsigned>(payloads.size()), 128, shared, env.side>>>(d);
    cudaEventRecord(b, env.side);
    check(cudaStreamSynchronize(env.side), "kernel");
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    if (r > 0) t.push_back(ms * 1e3);
  }
  cudaFree(d);
  return median(t);
}

// Median wall time (us) from the push of the batch to the pop of its last task.
template <class T>
double pool_us(AppPool& pool, const std::vector<typename T::Payload>& payloads, Env& env) {
  std::vector<Record> records, done(payloads.size());
  for (const auto& p : payloads) records.push_back(Record::make<T>(p));
  std::vector<double> t;
  for (int r = 0; r < 21; ++r) {
    if (env.pause_to_reset) {  // a copy beside the resident kernel: only while it is paused
      pool.pause();
      env.reset();
      pool.resume();
      // Let every block start polling again, so that the time is the task's, not the restart's.
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    const auto t0 = Clock::now();
    if (records.size() == 1) {
      pool.push_record(records[0]);
    } else {
      pool.push_batch(records);
    }
    for (std::size_t got = 0; got < records.size();) got += pool.pop_batch(done);
    const auto t1 = Clock::now();
    for (std::size_t i = 0; i < records.size(); ++i) {
      if (!done[i].ok()) {
        std::fprintf(stderr, "task failed: %s\n", weft::gpu::to_string(done[i].status));
        std::exit(1);
      }
    }
    if (r > 0) t.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  return median(t);
}

template <class T>
void row(const char* name, AppPool& pool, const std::vector<typename T::Payload>& one,
         const std::vector<typename T::Payload>& batch, Env& env) {
  std::fprintf(stderr, "[probe] %s\n", name);
  const double k1 = kernel_us<T>(one, env), kb = batch.empty() ? 0 : kernel_us<T>(batch, env);
  pool.resume();
  const double p1 = pool_us<T>(pool, one, env),
               pb = batch.empty() ? 0 : pool_us<T>(pool, batch, env);
  pool.pause();
  std::printf("| %-18s | %10.1f | %10.1f | %12.1f | %12.1f |\n", name, k1, p1, kb, pb);
}

}  // namespace

int main() {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  constexpr int kSms = 132;
  cudaStream_t side;
  check(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking), "stream");
  Env env{side, [] {}, false};

  // Inputs, made before the pool (allocation synchronizes the device).
  constexpr int n = 2048;
  const std::vector<double> spd = spd_matrix(n);
  double *a = nullptr, *pristine = nullptr;
  const std::size_t abytes = sizeof(double) * spd.size();
  check(cudaMalloc(&a, abytes), "malloc a");
  check(cudaMalloc(&pristine, abytes), "malloc pristine");
  check(cudaMemcpy(pristine, spd.data(), abytes, cudaMemcpyHostToDevice), "copy a");
  auto reset_a = [&] {
    check(cudaMemcpyAsync(a, pristine, abytes, cudaMemcpyDeviceToDevice, side), "reset");
    check(cudaStreamSynchronize(side), "reset sync");
  };
  // GEMM operands: 132 independent 64x64x64 products.
  constexpr int g = 64;
  std::vector<double> hd(static_cast<std::size_t>(kSms) * g * g);
  for (std::size_t i = 0; i < hd.size(); ++i) hd[i] = static_cast<double>(i % 7) - 3.0;
  std::vector<float> hf(hd.begin(), hd.end());
  double *da, *db, *dc;
  float *fa, *fb, *fc;
  for (double** p : {&da, &db, &dc}) check(cudaMalloc(p, sizeof(double) * hd.size()), "malloc");
  for (float** p : {&fa, &fb, &fc}) check(cudaMalloc(p, sizeof(float) * hf.size()), "malloc");
  for (double* p : {da, db})
    cudaMemcpy(p, hd.data(), sizeof(double) * hd.size(), cudaMemcpyHostToDevice);
  for (float* p : {fa, fb})
    cudaMemcpy(p, hf.data(), sizeof(float) * hf.size(), cudaMemcpyHostToDevice);
  // K-means: 132 x 64 points of d = 1024, 128 centroids.
  constexpr int kd = 1024, kk = 128, kpts = kSms * 64;
  float *kp, *kc, *kn;
  int* kl;
  check(cudaMalloc(&kp, sizeof(float) * kpts * kd), "malloc");
  check(cudaMalloc(&kc, sizeof(float) * kk * kd), "malloc");
  check(cudaMalloc(&kn, sizeof(float) * kk), "malloc");
  check(cudaMalloc(&kl, sizeof(int) * kpts), "malloc");
  cudaMemset(kp, 0, sizeof(float) * kpts * kd);
  cudaMemset(kc, 0, sizeof(float) * kk * kd);
  cudaMemset(kn, 0, sizeof(float) * kk);
  // SpMV: the benchmark's skewed matrix, 1 << 18 rows; Black-Scholes: 132 x 2048 options.
  const CsrMatrix m = CsrMatrix::skewed(1 << 18, 1 << 18, 4096, 17);
  std::int64_t* rs;
  int* cols;
  float *vals, *x, *y;
  check(cudaMalloc(&rs, sizeof(std::int64_t) * m.row_start.size()), "malloc");
  check(cudaMalloc(&cols, sizeof(int) * m.col.size()), "malloc");
  check(cudaMalloc(&vals, sizeof(float) * m.value.size()), "malloc");
  check(cudaMalloc(&x, sizeof(float) * m.cols), "malloc");
  check(cudaMalloc(&y, sizeof(float) * m.rows), "malloc");
  cudaMemcpy(rs, m.row_start.data(), sizeof(std::int64_t) * m.row_start.size(),
             cudaMemcpyHostToDevice);
  cudaMemcpy(cols, m.col.data(), sizeof(int) * m.col.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(vals, m.value.data(), sizeof(float) * m.value.size(), cudaMemcpyHostToDevice);
  cudaMemset(x, 0, sizeof(float) * m.cols);
  constexpr int opts = kSms * 2048;
  float *spot, *strike, *years, *call, *put;
  for (float** p : {&spot, &strike, &years, &call, &put})
    check(cudaMalloc(p, sizeof(float) * opts), "malloc");
  const std::vector<float> ones(opts, 1.0f);
  for (float* p : {spot, strike, years})
    cudaMemcpy(p, ones.data(), sizeof(float) * opts, cudaMemcpyHostToDevice);
  check(cudaDeviceSynchronize(), "inputs");

  // PROBE_BLOCKS_PER_SM=1: one pool block per SM, so that a task has its SM to itself as the
  // kernel's one block has.
  auto probe_options = [] {
    auto o = device_pool_options();
    if (const char* b = std::getenv("PROBE_BLOCKS_PER_SM")) o.blocks_per_sm = std::atoi(b);
    return o;
  };
  std::optional<AppPool> holder(std::in_place, probe_options());
  AppPool& first = *holder;
  std::printf("%s\n\n", first.describe().c_str());
  AppPool* current = &first;
  AppPool& pool = first;
  pool.pause();

  std::printf(
      "| body | kernel, 1 block (us) | pool, 1 task (us) | kernel, %d blocks | pool, %d tasks "
      "|\n|---|---:|---:|---:|---:|\n",
      kSms, kSms);
  {
    std::vector<DgemmTile::Payload> one, batch;
    std::vector<SgemmTile::Payload> fone, fbatch;
    for (int i = 0; i < kSms; ++i) {
      const std::size_t o = static_cast<std::size_t>(i) * g * g;
      batch.push_back({da + o, db + o, dc + o, g, g, g, g, g, g, 0, 0, 1.0, 0.0});
      fbatch.push_back({fa + o, fb + o, fc + o, g, g, g, g, g, g, 0, 0, 1.0f, 0.0f});
    }
    one.push_back(batch[0]);
    fone.push_back(fbatch[0]);
    row<DgemmTile>("dgemm 64^3", pool, one, batch, env);
    row<SgemmTile>("sgemm 64^3", pool, fone, fbatch, env);
  }
  env.reset = reset_a;
  env.pause_to_reset = true;
  {
    std::vector<PotrfTile::Payload> one{{a, n, 0, 0}}, batch;
    for (int k = 0; k < kSms && k < n / 64; ++k) batch.push_back({a, n, k, 0});
    row<PotrfTile>("potrf 64", pool, one, batch, env);
    std::vector<TrsmTile::Payload> tone{{a, n, 1, 0}}, tbatch;
    for (int i = 1; i <= kSms && i < n / 64; ++i) tbatch.push_back({a, n, i, 0});
    row<TrsmTile>("trsm 64", pool, tone, tbatch, env);
    std::vector<UpdateTile::Payload> sone{{a, n, 1, 1, 0}}, gone{{a, n, 2, 1, 0}}, gbatch;
    for (int i = 1; i < n / 64 && gbatch.size() < kSms; ++i)
      for (int j = 1; j < i && gbatch.size() < kSms; ++j) gbatch.push_back({a, n, i, j, 0});
    row<UpdateTile>("syrk 64", pool, sone, {}, env);
    row<UpdateTile>("gemm-update 64", pool, gone, gbatch, env);
  }
  env.reset = [] {};
  env.pause_to_reset = false;
  {
    std::vector<KmeansAssign::Payload> batch;
    for (int i = 0; i < kSms; ++i) batch.push_back({kp, kc, kn, kl, kd, kk, i * 64, 64});
    row<KmeansAssign>("kmeans assign 64pt", pool, {batch[0]}, batch, env);
    // SpmvRows and BlackScholes left AppTasks for a pool of their own (SpmvBsPool): the rows
    // that timed them in the shared pool are gone with them.
    (void)rs, (void)cols, (void)vals, (void)x, (void)y, (void)spot, (void)strike, (void)years;
    (void)call, (void)put;
  }

  // The Cholesky driver whole.
  std::printf("\n| cholesky | pool options | median of 5 (us) | min (us) |\n|---|---|---:|---:|\n");
  auto factor = [&](AppPool& p, int size, const char* what) {
    std::vector<double> t;
    for (int r = 0; r < 6; ++r) {
      p.pause();
      check(cudaMemcpy(a, spd_matrix(size).data(), sizeof(double) * size * size,
                       cudaMemcpyHostToDevice),
            "reset");
      p.resume();
      const auto t0 = Clock::now();
      cholesky_on_pool(p, a, size, size);
      if (r > 0) t.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    }
    std::printf("| %d | %s | %.0f | %.0f |\n", size, what, median(t),
                *std::min_element(t.begin(), t.end()));
  };
  pool.resume();
  factor(pool, 1024, "default");
  factor(pool, 2048, "default");
  factor(pool, 1024, "default");
  pool.pause();
  {
    auto o = probe_options();
    o.consumer_spin = std::chrono::microseconds(1'000'000);
    o.scheduler_idle_spin = std::chrono::microseconds(1'000'000);
    o.warm_idle = std::chrono::microseconds(1'000'000);
    holder.reset();
    holder.emplace(o);
    current = &*holder;
    factor(*current, 1024, "spinning consumer, lanes, blocks");
    factor(*current, 2048, "spinning consumer, lanes, blocks");
  }
  // Which of the pool's rules cost the dependent steps: the critical path ahead of queued
  // updates (priority order), no task queued behind another in a ring (depth 1), both, and
  // both with everything spinning.
  auto variant = [&](const char* what, auto&& change) {
    auto o = probe_options();
    change(o);
    holder.reset();
    holder.emplace(o);
    current = &*holder;
    factor(*current, 1024, what);
    factor(*current, 2048, what);
  };
  using weft::gpu::PoolOptions;
  variant("priority order",
          [](PoolOptions& o) { o.input_order = weft::gpu::QueueOrder::priority; });
  variant("ring depth 1", [](PoolOptions& o) { o.ring_depth = 1; });
  variant("priority, ring depth 1", [](PoolOptions& o) {
    o.input_order = weft::gpu::QueueOrder::priority;
    o.ring_depth = 1;
  });
  variant("priority, ring 1, spinning", [](PoolOptions& o) {
    o.input_order = weft::gpu::QueueOrder::priority;
    o.ring_depth = 1;
    o.consumer_spin = std::chrono::microseconds(1'000'000);
    o.scheduler_idle_spin = std::chrono::microseconds(1'000'000);
    o.warm_idle = std::chrono::microseconds(1'000'000);
  });
  const auto s = current->stats();
  std::printf(
      "\nstats of the last pool: pushed %llu, host_polls %llu, scheduler_sleeps %llu, mailbox "
      "%llu\n",
      (unsigned long long)s.pushed, (unsigned long long)s.host_polls,
      (unsigned long long)s.scheduler_sleeps, (unsigned long long)s.mailbox_tasks);
  return 0;
}
