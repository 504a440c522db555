// The GPU pool suite: per-task cost of empty tasks through the pool (batched and one by one),
// push->pop latency on an idle pool, and the same empty tasks as kernel launches (launch +
// synchronize, back-to-back launches, 16 streams round robin, CUDA graph replay).
#include <cuda_runtime.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "pool_suite.hpp"
#include "weft/gpu/detail/cuda_check.cuh"
#include "weft/gpu/device.cuh"
#include "weft/gpu/pool.hpp"

namespace weft::bench::gpu {

namespace {

struct Empty {
  static constexpr std::uint32_t kId = 1;
  struct Payload {
    std::uint64_t seq;  // echoed back: the check that every task came back once
  };
  WEFT_HD static void run(Payload&, const weft::gpu::BlockContext&) {}
};
// Compute-bound body of a given length: every thread runs FMAs until the GPU clock says the
// time is up; thread 0 reports how long the body took (the busy-fraction numerator).
struct Work {
  static constexpr std::uint32_t kId = 2;
  struct Payload {
    unsigned long long ns;       // how long to work
    unsigned long long body_ns;  // measured by the block
  };
  WEFT_HD static void run(Payload& p, const weft::gpu::BlockContext& b) {
#if defined(__CUDA_ARCH__)
    const unsigned long long t0 = weft::gpu::detail::global_ns();
    float x = 1.0f + static_cast<float>(b.thread()) * 1e-7f, y = 0.999f;
    unsigned long long t = t0;
    while (t - t0 < p.ns) {
      for (int i = 0; i < 64; ++i) x = fmaf(x, y, 1e-7f);
      t = weft::gpu::detail::global_ns();
    }
    if (x == 12345.0f) p.ns = 0;  // keeps the FMAs; never true
    b.sync();
    if (b.thread() == 0) p.body_ns = weft::gpu::detail::global_ns() - t0;
#else
    (void)p;
    (void)b;
#endif
  }
};
// A fixed amount of arithmetic (not a fixed time): 4 independent FMA chains of `iters` steps
// per thread; thread 0 reports its first chain (checked against the same chain on the host).
// The multi-GPU efficiency's task: a faster GPU finishes more of them.
struct Fma {
  static constexpr std::uint32_t kId = 3;
  struct Payload {
    unsigned iters;
    float result;
  };
  WEFT_HD static float chain(unsigned iters, float x) {
    for (unsigned i = 0; i < iters; ++i) x = fmaf(x, 0.9999f, 0.0001f);
    return x;
  }
  WEFT_HD static void run(Payload& p, const weft::gpu::BlockContext& b) {
    float x0 = 1.0f, x1 = 1.0f + static_cast<float>(b.thread()) * 1e-3f, x2 = 0.5f, x3 = 0.25f;
    for (unsigned i = 0; i < p.iters; ++i) {
      x0 = fmaf(x0, 0.9999f, 0.0001f);
      x1 = fmaf(x1, 0.9999f, 0.0001f);
      x2 = fmaf(x2, 0.9999f, 0.0001f);
      x3 = fmaf(x3, 0.9999f, 0.0001f);
    }
    if (b.thread() == 0) p.result = x0 + (x1 + x2 + x3 == -1.0f ? 1.0f : 0.0f);
  }
};
using Types = weft::gpu::TaskTypes<Empty, Work, Fma>;
constexpr std::size_t kCap = 16;
using EmptyPool = weft::gpu::Pool<Types, kCap>;

__global__ void empty_kernel() {}

// pool_vs_launch_same_body's task: one 64x64x64 DGEMM, C = A B (column-major), B staged in
// shared memory; the same body runs as a pool task and as a plain kernel's block. Thread 0
// stamps the body's start and end (global ns): the pool's excess over the launch is then
// split into the body's own time, which a change of the resident kernel's code can move, and
// the rest.
struct Dgemm64 {
  static constexpr std::uint32_t kId = 1;
  static constexpr int kN = 64;
  static constexpr std::size_t kSharedBytes = kN * kN * sizeof(double);
  struct Payload {
    const double* a;
    const double* b;
    double* c;
    unsigned long long* span;  // the body's start and end
  };
  WEFT_HD static void run(Payload& p, const weft::gpu::BlockContext& ctx) {
#if defined(__CUDA_ARCH__)
    const unsigned long long start = weft::gpu::detail::global_ns();
#endif
    auto* bs = static_cast<double*>(ctx.shared());
    for (int i = ctx.thread(); i < kN * kN; i += ctx.threads()) bs[i] = p.b[i];
    ctx.sync();
    for (int i = ctx.thread(); i < kN * kN; i += ctx.threads()) {
      const int row = i % kN, col = i / kN;
      double acc = 0;
      for (int k = 0; k < kN; ++k) acc += p.a[row + kN * k] * bs[k + kN * col];
      p.c[i] = acc;
    }
    ctx.sync();  // the next task may overwrite bs
#if defined(__CUDA_ARCH__)
    if (ctx.thread() == 0) {
      p.span[0] = start;
      p.span[1] = weft::gpu::detail::global_ns();
    }
#endif
  }
};
using GemmTypes = weft::gpu::TaskTypes<Dgemm64>;
using GemmPool = weft::gpu::Pool<GemmTypes, 32>;
constexpr int kGemmThreads = 128;

// The same body, one matrix per block (a BlockContext over the whole block: its named barrier
// then spans every thread).
__global__ void dgemm64_kernel(const double* a, const double* b, double* c,
                               unsigned long long* spans) {
  extern __shared__ double shared[];
  const std::size_t m = static_cast<std::size_t>(blockIdx.x) * Dgemm64::kN * Dgemm64::kN;
  Dgemm64::Payload p{a + m, b + m, c + m, spans + 2 * blockIdx.x};
  Dgemm64::run(p,
               weft::gpu::BlockContext(static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x),
                                       static_cast<int>(blockIdx.x), shared));
}

weft::gpu::PoolOptions device_options(int blocks_per_sm = 0, std::size_t lanes = 0,
                                      std::size_t ring_depth = 0) {
  weft::gpu::PoolOptions o;
  o.backend = weft::gpu::Backend::device;
  o.program = weft::gpu::device_program<Types, kCap>();
  o.blocks_per_sm = blocks_per_sm;
  o.scheduler_lanes = lanes;
  o.ring_depth = ring_depth;
  return o;
}

// A payload of B bytes (B >= 16), for the payload-size sweep (the body touches nothing).
template <std::size_t B>
struct Bytes {
  static constexpr std::uint32_t kId = 1;
  struct Payload {
    std::uint64_t seq;
    unsigned char rest[B - 8];
  };
  WEFT_HD static void run(Payload&, const weft::gpu::BlockContext&) {}
};

// Checks that the popped sequence numbers are exactly 0..n-1.
bool all_once(std::vector<std::uint64_t>& seqs, std::uint64_t n) {
  if (seqs.size() != n) return false;
  std::sort(seqs.begin(), seqs.end());
  for (std::uint64_t i = 0; i < n; ++i) {
    if (seqs[i] != i) return false;
  }
  return true;
}

// Pushes `records` in batches of 4096 from one thread while this one pops them in batches and
// hands each to `on_record`; returns the wall time in seconds.
template <class P, class OnRecord>
double push_and_pop_all(P& pool, const std::vector<typename P::Record>& records,
                        OnRecord on_record) {
  using Record = typename P::Record;
  const std::uint64_t n = records.size();
  return time_seconds([&] {
    std::thread pusher([&] {
      for (std::uint64_t i = 0; i < n; i += 4096) {
        const std::size_t len = static_cast<std::size_t>(std::min<std::uint64_t>(4096, n - i));
        pool.push_batch(std::span<const Record>(records.data() + i, len), 0);
      }
    });
    std::vector<Record> got(4096);
    for (std::uint64_t done = 0; done < n;) {
      const std::size_t k = pool.pop_batch(got, 0);
      for (std::size_t j = 0; j < k; ++j) on_record(got[j]);
      done += k;
    }
    pusher.join();
  });
}

// n empty tasks of type T pushed in batches of 4096 by one thread and popped in batches by
// another; ns per task. The records are made outside the timing.
template <class T, class P>
Outcome pool_batched(P& pool, std::uint64_t n) {
  using Record = typename P::Record;
  std::vector<Record> records(n);
  for (std::uint64_t i = 0; i < n; ++i) {
    typename T::Payload p{};
    p.seq = i;
    records[i] = Record::template make<T>(p);
  }
  std::vector<std::uint64_t> seqs;
  seqs.reserve(n);
  const double t = push_and_pop_all(
      pool, records, [&](const Record& r) { seqs.push_back(r.template as<T>().seq); });
  return Outcome{t / static_cast<double>(n) * 1e9, all_once(seqs, n)};
}
Outcome pool_batched(EmptyPool& pool, std::uint64_t n) { return pool_batched<Empty>(pool, n); }

template <std::size_t B>
double payload_sweep_point(std::uint64_t n, bool& ok) {
  using T = Bytes<B>;
  using P = weft::gpu::Pool<weft::gpu::TaskTypes<T>, B>;
  weft::gpu::PoolOptions o;
  o.backend = weft::gpu::Backend::device;
  o.program = weft::gpu::device_program<weft::gpu::TaskTypes<T>, B>();
  P pool(o);
  (void)pool_batched<T>(pool, n / 10);  // warm-up
  const Outcome r = pool_batched<T>(pool, n);
  ok = ok && r.verified;
  return r.value;
}

// Busy fraction: blocks x k tasks whose bodies work `ns` each; the share of the blocks' wall
// time spent inside bodies (sum of measured body times / (blocks x wall time)).
Outcome busy_fraction(EmptyPool& pool, unsigned long long ns, std::uint64_t per_block) {
  using Record = EmptyPool::Record;
  const std::uint64_t n = pool.num_blocks() * per_block;
  std::vector<Record> records(n, Record::make<Work>({ns, 0}));
  double body = 0;
  bool ok = true;
  const double t = push_and_pop_all(pool, records, [&](const Record& r) {
    const auto p = r.as<Work>();
    ok = ok && r.ok() && p.body_ns >= ns;
    body += static_cast<double>(p.body_ns) * 1e-9;
  });
  return Outcome{body / (static_cast<double>(pool.num_blocks()) * t), ok};
}

// User + system CPU time of the whole process so far (every thread's), in seconds.
double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

// Push->pop latency of one task after `gap` of quiet, in microseconds: p50 and p99.
std::pair<double, double> latency(EmptyPool& pool, int n, std::chrono::microseconds gap, bool& ok) {
  std::vector<double> lat;
  for (int i = 0; i < n; ++i) {
    std::this_thread::sleep_for(gap);
    const double t0 = now_seconds();
    pool.push<Empty>({static_cast<std::uint64_t>(i)}, 0);
    const auto r = pool.pop(0);
    lat.push_back((now_seconds() - t0) * 1e6);
    ok = ok && r.ok() && r.as<Empty>().seq == static_cast<std::uint64_t>(i);
  }
  std::sort(lat.begin(), lat.end());
  return {lat[lat.size() / 2], lat[lat.size() * 99 / 100]};
}

// Pinned host -> device copy bandwidth (bytes/s): the yardstick of the idle-traffic metric.
double pinned_bandwidth() {
  constexpr std::size_t kBytes = std::size_t{256} << 20;
  void* h = nullptr;
  void* d = nullptr;
  WEFT_CUDA_CHECK(cudaHostAlloc(&h, kBytes, cudaHostAllocDefault));
  WEFT_CUDA_CHECK(cudaMalloc(&d, kBytes));
  std::memset(h, 1, kBytes);
  std::vector<double> t;
  for (int i = 0; i < 6; ++i) {
    t.push_back(
        time_seconds([&] { WEFT_CUDA_CHECK(cudaMemcpy(d, h, kBytes, cudaMemcpyHostToDevice)); }));
  }
  cudaFree(d);
  cudaFreeHost(h);
  std::sort(t.begin(), t.end());
  return static_cast<double>(kBytes) / t[t.size() / 2];
}

// Bytes on the link per read of host memory by a block: a read request and its completion
// (TLP headers, framing and a 4-16 byte payload come to ~50 bytes; counted as 64).
constexpr double kBytesPerHostRead = 64.0;

Outcome pool_single(EmptyPool& pool, std::uint64_t n) {
  constexpr int kThreads = 4;
  std::vector<std::vector<std::uint64_t>> seqs(kThreads);
  const std::uint64_t per = n / kThreads;
  const double t = time_seconds([&] {
    std::vector<std::thread> threads;
    for (int k = 0; k < kThreads; ++k) {
      threads.emplace_back([&, k] {
        for (std::uint64_t i = 0; i < per; ++i) pool.push<Empty>({k * per + i}, 0);
      });
      threads.emplace_back([&, k] {
        for (std::uint64_t i = 0; i < per; ++i) seqs[k].push_back(pool.pop(0).as<Empty>().seq);
      });
    }
    for (auto& th : threads) th.join();
  });
  std::vector<std::uint64_t> all;
  for (auto& s : seqs) all.insert(all.end(), s.begin(), s.end());
  return Outcome{t / static_cast<double>(per * kThreads) * 1e9, all_once(all, per * kThreads)};
}

// Tasks per second of n Fma tasks on a pool over `devices` (batched push and pop).
Outcome fma_throughput(const std::vector<int>& devices, std::uint64_t n, unsigned iters) {
  weft::gpu::PoolOptions o = device_options();
  o.devices = devices;
  EmptyPool pool(o);
  using Record = EmptyPool::Record;
  std::vector<Record> records(n, Record::make<Fma>({iters, 0.0f}));
  const float expect = Fma::chain(iters, 1.0f);
  bool ok = true;
  (void)push_and_pop_all(pool, std::vector<Record>(records.begin(), records.begin() + n / 10),
                         [](const Record&) {});  // warm-up
  const double t = push_and_pop_all(
      pool, records, [&](const Record& r) { ok = ok && r.ok() && r.as<Fma>().result == expect; });
  return Outcome{static_cast<double>(n) / t, ok};
}

// pool_vs_launch_same_body: as many 64x64 DGEMMs as GPU 0 has SMs, through the pool (one
// push_batch, pop until all are back) against one launch + synchronize of the same body as a
// plain kernel with the same threads per block and shared memory. Each contender's value is
// the median of `reps` runs, in microseconds; the pool is paused while the kernel runs.
void pool_vs_launch(Suite& suite, int reps, int blocks_per_sm, const std::string& suffix) {
  cudaDeviceProp prop{};
  WEFT_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  const int batch = prop.multiProcessorCount;
  constexpr int kElems = Dgemm64::kN * Dgemm64::kN;
  const std::size_t bytes = sizeof(double) * kElems * static_cast<std::size_t>(batch);
  std::vector<double> ha(kElems * static_cast<std::size_t>(batch));
  std::vector<double> hb(ha.size());
  for (std::size_t i = 0; i < ha.size(); ++i) {
    ha[i] = static_cast<double>(i % 17) * 0.25 - 2.0;
    hb[i] = static_cast<double>(i % 13) * 0.5 - 3.0;
  }
  double *a = nullptr, *b = nullptr, *c_pool = nullptr, *c_kernel = nullptr;
  unsigned long long *spans_pool = nullptr, *spans_kernel = nullptr;  // each body's start, end
  WEFT_CUDA_CHECK(cudaSetDevice(0));
  WEFT_CUDA_CHECK(cudaMalloc(&a, bytes));
  WEFT_CUDA_CHECK(cudaMalloc(&b, bytes));
  WEFT_CUDA_CHECK(cudaMalloc(&c_pool, bytes));
  WEFT_CUDA_CHECK(cudaMalloc(&c_kernel, bytes));
  const std::size_t span_bytes = 2 * sizeof(unsigned long long) * static_cast<std::size_t>(batch);
  WEFT_CUDA_CHECK(cudaMalloc(&spans_pool, span_bytes));
  WEFT_CUDA_CHECK(cudaMalloc(&spans_kernel, span_bytes));
  WEFT_CUDA_CHECK(cudaMemcpy(a, ha.data(), bytes, cudaMemcpyHostToDevice));
  WEFT_CUDA_CHECK(cudaMemcpy(b, hb.data(), bytes, cudaMemcpyHostToDevice));
  // The reference: every product on the host, in the body's order of summation.
  std::vector<double> ref(ha.size());
  for (int m = 0; m < batch; ++m) {
    const double* am = ha.data() + static_cast<std::size_t>(m) * kElems;
    const double* bm = hb.data() + static_cast<std::size_t>(m) * kElems;
    for (int i = 0; i < kElems; ++i) {
      const int row = i % Dgemm64::kN, col = i / Dgemm64::kN;
      double acc = 0;
      for (int k = 0; k < Dgemm64::kN; ++k)
        acc += am[row + Dgemm64::kN * k] * bm[k + Dgemm64::kN * col];
      ref[static_cast<std::size_t>(m) * kElems + i] = acc;
    }
  }
  auto matches = [&](const double* c) {
    std::vector<double> got(ref.size());
    WEFT_CUDA_CHECK(cudaMemcpy(got.data(), c, bytes, cudaMemcpyDeviceToHost));
    for (std::size_t i = 0; i < ref.size(); ++i) {
      if (std::abs(got[i] - ref[i]) > 1e-9 * (1.0 + std::abs(ref[i]))) return false;
    }
    return true;
  };

  weft::gpu::PoolOptions o;
  o.backend = weft::gpu::Backend::device;
  o.program = weft::gpu::device_program<GemmTypes, 32>();
  o.devices = {0};
  o.threads_per_block = kGemmThreads;
  o.blocks_per_sm = blocks_per_sm;
  GemmPool pool(o);
  std::fprintf(stderr, "[bench] pool_vs_launch_same_body: %d DGEMMs 64x64; pool %s\n", batch,
               pool.describe().c_str());
  std::vector<GemmPool::Record> records;
  for (int m = 0; m < batch; ++m) {
    const std::size_t at = static_cast<std::size_t>(m) * kElems;
    records.push_back(GemmPool::Record::make<Dgemm64>(
        {a + at, b + at, c_pool + at, spans_pool + 2 * static_cast<std::size_t>(m)}));
  }
  std::vector<GemmPool::Record> got(static_cast<std::size_t>(batch));
  auto weft_run = [&] {
    WEFT_CUDA_CHECK(cudaMemset(c_pool, 0, bytes));  // before resume(): a kernel needs SMs
    pool.resume();
    std::vector<double> t;
    bool ok = true;
    for (int r = 0; r < reps + 2; ++r) {  // the first two warm the pool up
      const double dt = time_seconds([&] {
        pool.push_batch(records, 0);
        for (int done = 0; done < batch;) {
          const std::size_t k = pool.pop_batch(got, 0);
          for (std::size_t j = 0; j < k; ++j) ok = ok && got[j].ok();
          done += static_cast<int>(k);
        }
      });
      if (r >= 2) t.push_back(dt * 1e6);
    }
    pool.pause();  // the kernel's turn may come next
    return Outcome{median(t), ok && matches(c_pool)};
  };
  cudaStream_t stream;
  WEFT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  auto launch_run = [&] {
    pool.pause();
    WEFT_CUDA_CHECK(cudaMemset(c_kernel, 0, bytes));
    std::vector<double> t;
    for (int r = 0; r < reps + 2; ++r) {
      const double dt = time_seconds([&] {
        dgemm64_kernel<<<batch, kGemmThreads, Dgemm64::kSharedBytes, stream>>>(a, b, c_kernel,
                                                                               spans_kernel);
        WEFT_CUDA_CHECK(cudaStreamSynchronize(stream));
      });
      if (r >= 2) t.push_back(dt * 1e6);
    }
    return Outcome{median(t), cudaGetLastError() == cudaSuccess && matches(c_kernel)};
  };
  suite.compare("same_body_batch_per_sm" + suffix, "us", Better::lower,
                {{"weft", weft_run}, {"launch_sync", launch_run}});
  const Comparison& cmp = suite.comparisons().back();
  suite.add_metric(
      Metric{"pool_vs_launch_same_body" + suffix, "ratio", Better::lower, {cmp.ratio()}});
  std::fprintf(
      stderr, "[bench] pool_vs_launch_same_body%s: pool %.2f us, launch+sync %.2f us: %.3f%s\n",
      suffix.c_str(), cmp.weft, cmp.peer_value, cmp.ratio(), cmp.verified ? "" : " (UNVERIFIED)");
  // The median body of each contender's last run (the pool's blocks keep their tiles in L1
  // between runs, a launch starts cold, so the pool's may be the shorter).
  auto median_body_us = [&](const unsigned long long* spans) {
    std::vector<unsigned long long> s(2 * static_cast<std::size_t>(batch));
    WEFT_CUDA_CHECK(cudaMemcpy(s.data(), spans, span_bytes, cudaMemcpyDeviceToHost));
    std::vector<double> body;
    for (std::size_t m = 0; m < s.size(); m += 2)
      body.push_back(static_cast<double>(s[m + 1] - s[m]) / 1e3);
    return median(body);
  };
  const double pool_body = median_body_us(spans_pool), kernel_body = median_body_us(spans_kernel);
  suite.add_metric(Metric{"same_body_body_us_pool" + suffix, "us", Better::lower, {pool_body}});
  suite.add_metric(Metric{"same_body_body_us_launch" + suffix, "us", Better::lower, {kernel_body}});
  std::fprintf(stderr, "[bench] same body%s, its median time alone: pool %.2f us, launch %.2f us\n",
               suffix.c_str(), pool_body, kernel_body);
  pool.pause();  // (both contenders leave it paused) the frees below synchronize the device
  cudaStreamDestroy(stream);
  cudaFree(a);
  cudaFree(b);
  cudaFree(c_pool);
  cudaFree(c_kernel);
  cudaFree(spans_pool);
  cudaFree(spans_kernel);
}

}  // namespace

bool gpu_available(std::string& why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    why = cudaGetErrorString(e);
    return false;
  }
  if (n == 0) {
    why = "no GPU found";
    return false;
  }
  return true;
}

Suite run_gpu_pool_suite(const GpuPoolSuiteOptions& o) {
  SuiteOptions so;
  so.samples = o.samples;
  so.warmups = 1;
  Suite suite("gpu-pool", so);
  suite.record_host_handoff("start");  // which kind of machine instance this run had
  const std::uint64_t n_batched = o.quick ? 100'000 : 1'000'000;
  const std::uint64_t n_single = o.quick ? 40'000 : 200'000;
  const int n_launch = o.quick ? 2'000 : 20'000;

  // The pool's resident kernel occupies every SM: a kernel launched beside it would wait for
  // it forever. So the pool lives only during weft's own runs (made and destroyed outside the
  // timed region), and the launch peers run on an otherwise idle GPU.
  auto make_pool = [] { return std::make_unique<EmptyPool>(device_options()); };
  int gpus = 0;
  WEFT_CUDA_CHECK(cudaGetDeviceCount(&gpus));
  cudaDeviceProp prop{};
  WEFT_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  suite.set_gpu(prop.name, gpus);
  // Before any pool exists: cudaFree synchronizes the device, which waits for a resident
  // kernel until its pool is destroyed.
  const double bw = pinned_bandwidth();
  {
    auto pool = make_pool();
    std::fprintf(stderr, "[bench] gpu-pool: %s, %zu lanes\n", pool->describe().c_str(),
                 pool->num_lanes());
  }

  // The pool as it comes (the metric), and with one block per SM (its blocks' shared memory
  // then leaves the SM more L1 cache).
  pool_vs_launch(suite, o.quick ? 20 : 100, 0, "");
  pool_vs_launch(suite, o.quick ? 20 : 100, 1, "_1_block_per_sm");

  // Per-task cost, in microseconds, of the same empty tasks as launches.
  cudaStream_t stream;
  WEFT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::vector<cudaStream_t> streams(16);
  for (auto& s : streams) WEFT_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaGraph_t graph;
  cudaGraphExec_t graph_exec;
  constexpr int kGraphNodes = 1000;
  WEFT_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < kGraphNodes; ++i) empty_kernel<<<1, 32, 0, stream>>>();
  WEFT_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  WEFT_CUDA_CHECK(cudaGraphInstantiate(&graph_exec, graph, 0));

  auto launch_sync = [&] {
    const double t = time_seconds([&] {
      for (int i = 0; i < n_launch / 10; ++i) {
        empty_kernel<<<1, 32, 0, stream>>>();
        WEFT_CUDA_CHECK(cudaStreamSynchronize(stream));
      }
    });
    return Outcome{t / (n_launch / 10) * 1e6, cudaGetLastError() == cudaSuccess};
  };
  auto launch_async = [&] {
    const double t = time_seconds([&] {
      for (int i = 0; i < n_launch; ++i) empty_kernel<<<1, 32, 0, stream>>>();
      WEFT_CUDA_CHECK(cudaStreamSynchronize(stream));
    });
    return Outcome{t / n_launch * 1e6, cudaGetLastError() == cudaSuccess};
  };
  auto streams16 = [&] {
    const double t = time_seconds([&] {
      for (int i = 0; i < n_launch; ++i) empty_kernel<<<1, 32, 0, streams[i % 16]>>>();
      for (auto& s : streams) WEFT_CUDA_CHECK(cudaStreamSynchronize(s));
    });
    return Outcome{t / n_launch * 1e6, cudaGetLastError() == cudaSuccess};
  };
  auto graph_replay = [&] {
    const int replays = std::max(1, n_launch / kGraphNodes);
    const double t = time_seconds([&] {
      for (int r = 0; r < replays; ++r) WEFT_CUDA_CHECK(cudaGraphLaunch(graph_exec, stream));
      WEFT_CUDA_CHECK(cudaStreamSynchronize(stream));
    });
    return Outcome{t / (replays * kGraphNodes) * 1e6, true};
  };
  auto weft_batched_us = [&] {
    auto pool = make_pool();
    Outcome r = pool_batched(*pool, n_batched);
    r.value /= 1000.0;  // ns -> us, the unit of the comparisons
    return r;
  };
  for (auto& [name, peer] : std::vector<std::pair<std::string, std::function<Outcome()>>>{
           {"launch_sync", launch_sync},
           {"launch_async", launch_async},
           {"streams16", streams16},
           {"graph_replay", graph_replay}}) {
    suite.compare("empty_task_" + name, "us/task", Better::lower,
                  {{"weft", weft_batched_us}, {name, peer}});
  }

  auto pool_holder = make_pool();
  EmptyPool& pool = *pool_holder;
  suite.measure("empty_task_ns_batched", "ns", Better::lower,
                [&] { return pool_batched(pool, n_batched); });
  suite.measure("empty_task_ns_single", "ns", Better::lower,
                [&] { return pool_single(pool, n_single); });

  // Latency of one task on the default pool, whose lone tasks go through the mailbox (the
  // ring path's figure comes after, as latency_ring_*). Warm: 200 us between tasks (the
  // blocks backed off, the scheduler still within its idle spin). Cold: 20 ms between tasks
  // (every ring block in deep idle, the scheduler asleep on its condition variable; the
  // mailbox's block never sleeps).
  // The process's CPU time over the warm run's wall time: how many cores the pool keeps busy
  // while one thread pushes a task every 200 us (its lanes poll; the thread itself mostly
  // sleeps).
  bool lat_ok = true;
  const double cpu0 = process_cpu_seconds(), wall0 = now_seconds();
  const auto [p50, p99] =
      latency(pool, o.quick ? 200 : 2000, std::chrono::microseconds(200), lat_ok);
  const double trickle_cores = (process_cpu_seconds() - cpu0) / (now_seconds() - wall0);
  const auto [c50, c99] = latency(pool, o.quick ? 20 : 100, std::chrono::milliseconds(20), lat_ok);
  suite.add_metric(Metric{"latency_p50_us", "us", Better::lower, {p50}});
  suite.add_metric(Metric{"latency_p99_us", "us", Better::lower, {p99}});
  suite.add_metric(Metric{"latency_cold_p50_us", "us", Better::lower, {c50}});
  suite.add_metric(Metric{"latency_cold_p99_us", "us", Better::lower, {c99}});
  suite.add_metric(Metric{"latency_cpu_cores", "cores", Better::lower, {trickle_cores}});
  std::fprintf(stderr,
               "[bench] latency push->pop: warm p50 %.2f us p99 %.2f us (%.2f cores busy); cold "
               "p50 %.2f us p99 %.2f us%s\n",
               p50, p99, trickle_cores, c50, c99, lat_ok ? "" : " (UNVERIFIED)");

  // Host-memory traffic of an idle pool: reads of host memory by the blocks over one second,
  // at kBytesPerHostRead each, over the measured pinned bandwidth.
  {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const std::uint64_t r0 = pool.stats().host_polls;
    const double t0 = now_seconds();
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    const double reads_per_s =
        static_cast<double>(pool.stats().host_polls - r0) / (now_seconds() - t0);
    const double frac = reads_per_s * kBytesPerHostRead / bw;
    suite.add_metric(Metric{"idle_poll_pcie_fraction", "fraction", Better::lower, {frac}});
    suite.add_metric(Metric{"idle_host_reads_per_s", "reads/s", Better::lower, {reads_per_s}});
    suite.add_metric(Metric{"pinned_bandwidth_gbs", "GB/s", Better::higher, {bw / 1e9}});
    std::fprintf(stderr,
                 "[bench] idle pool: %.3g host reads/s = %.3g MB/s = %.5f of pinned bandwidth "
                 "(%.1f GB/s)\n",
                 reads_per_s, reads_per_s * kBytesPerHostRead / 1e6, frac, bw / 1e9);
  }
  // ...and of a busy one (the batched empty-task run).
  {
    const std::uint64_t r0 = pool.stats().host_polls;
    const double t0 = now_seconds();
    (void)pool_batched(pool, n_batched);
    const double reads_per_s =
        static_cast<double>(pool.stats().host_polls - r0) / (now_seconds() - t0);
    suite.add_metric(Metric{"busy_poll_pcie_fraction",
                            "fraction",
                            Better::lower,
                            {reads_per_s * kBytesPerHostRead / bw}});
  }

  // Share of block time in task bodies, with 1, 10 and 100 us bodies, on the default pool
  // and on one block per SM.
  for (unsigned long long us : {1ull, 10ull, 100ull}) {
    const std::uint64_t per_block = us >= 100 ? 20 : (us >= 10 ? 100 : 400);
    suite.measure("busy_fraction_" + std::to_string(us) + "us", "fraction", Better::higher, [&] {
      return busy_fraction(pool, us * 1000, o.quick ? per_block / 10 : per_block);
    });
  }
  pool_holder.reset();
  {
    // The same latency through the rings alone (PoolOptions::mailbox off): what a lone task
    // costs while the mailbox is taken, and the pool's figure before the mailbox. A pool of its
    // own, after the default one is gone (two resident kernels do not share the GPU).
    weft::gpu::PoolOptions ro = device_options();
    ro.mailbox = false;
    EmptyPool ring_pool(ro);
    (void)latency(ring_pool, 100, std::chrono::microseconds(200), lat_ok);  // warm-up
    const auto [r50, r99] =
        latency(ring_pool, o.quick ? 200 : 2000, std::chrono::microseconds(200), lat_ok);
    suite.add_metric(Metric{"latency_ring_p50_us", "us", Better::lower, {r50}});
    suite.add_metric(Metric{"latency_ring_p99_us", "us", Better::lower, {r99}});
    std::fprintf(stderr,
                 "[bench] latency push->pop through the rings (no mailbox): p50 %.2f us "
                 "p99 %.2f us\n",
                 r50, r99);
  }
  {
    auto one = std::make_unique<EmptyPool>(device_options(1));
    for (unsigned long long us : {1ull, 10ull, 100ull}) {
      const std::uint64_t per_block = us >= 100 ? 100 : (us >= 10 ? 1000 : 4000);
      suite.measure(
          "busy_fraction_" + std::to_string(us) + "us_1_block_per_sm", "fraction", Better::higher,
          [&] { return busy_fraction(*one, us * 1000, o.quick ? per_block / 10 : per_block); });
    }
  }

  // Busy fraction with 10 us tasks on one block per SM against the ring depth.
  for (std::size_t depth : {1, 4, 16, 32}) {
    auto p = std::make_unique<EmptyPool>(device_options(1, 0, depth));
    suite.measure("busy_fraction_10us_1_block_per_sm_depth_" + std::to_string(depth), "fraction",
                  Better::higher, [&] { return busy_fraction(*p, 10'000, o.quick ? 100 : 1000); });
  }
  // Sweeps: ring depth, scheduler lanes, blocks per SM, payload size (ns per empty task,
  // batched).
  for (std::size_t depth : {1, 2, 4, 8, 16}) {
    auto p = std::make_unique<EmptyPool>(device_options(0, 0, depth));
    suite.measure("empty_task_ns_ring_depth_" + std::to_string(depth), "ns", Better::lower,
                  [&] { return pool_batched(*p, n_batched); });
  }
  for (std::size_t lanes : {1, 2, 4, 6, 8}) {
    // Each lane keeps a core busy, and so do the pusher and the popper.
    if (lanes > 1 && lanes + 2 > std::thread::hardware_concurrency()) break;
    auto p = std::make_unique<EmptyPool>(device_options(0, lanes));
    suite.measure("empty_task_ns_lanes_" + std::to_string(lanes), "ns", Better::lower,
                  [&] { return pool_batched(*p, n_batched); });
    if (lanes >= 4) {
      suite.measure("empty_task_ns_single_lanes_" + std::to_string(lanes), "ns", Better::lower,
                    [&] { return pool_single(*p, n_single); });
    }
  }
  {
    int fit = 0;
    auto probe = std::make_unique<EmptyPool>(device_options());
    // Blocks per SM of the default pool (every GPU alike: the pool spans all of them).
    fit = static_cast<int>(probe->num_blocks() /
                           static_cast<std::size_t>(prop.multiProcessorCount * gpus));
    probe.reset();
    for (int bps = 1; bps <= fit; bps *= 2) {
      auto p = std::make_unique<EmptyPool>(device_options(bps));
      suite.measure("empty_task_ns_blocks_per_sm_" + std::to_string(bps), "ns", Better::lower,
                    [&] { return pool_batched(*p, n_batched); });
    }
  }
  {
    bool ok = true;
    const std::uint64_t n = o.quick ? 100'000 : 500'000;
    const double b16 = payload_sweep_point<16>(n, ok);
    const double b64 = payload_sweep_point<64>(n, ok);
    const double b128 = payload_sweep_point<128>(n, ok);
    const double b256 = payload_sweep_point<256>(n, ok);
    suite.add_metric(Metric{"empty_task_ns_payload_16", "ns", Better::lower, {b16}});
    suite.add_metric(Metric{"empty_task_ns_payload_64", "ns", Better::lower, {b64}});
    suite.add_metric(Metric{"empty_task_ns_payload_128", "ns", Better::lower, {b128}});
    suite.add_metric(Metric{"empty_task_ns_payload_256", "ns", Better::lower, {b256}});
    std::fprintf(
        stderr, "[bench] payload sweep (ns/task): 16 B %.1f, 64 B %.1f, 128 B %.1f, 256 B %.1f%s\n",
        b16, b64, b128, b256, ok ? "" : " (UNVERIFIED)");
  }

  // Multi-GPU efficiency (seed 000 §4.5): throughput of all GPUs together over the sum of
  // each GPU's throughput alone, on the same fixed-work tasks.
  if (gpus >= 2) {
    const std::uint64_t n = o.quick ? 20'000 : 200'000;
    const unsigned iters = 20'000;
    std::vector<int> all;
    double alone_sum = 0;
    bool ok = true;
    for (int d = 0; d < gpus; ++d) {
      all.push_back(d);
      const Outcome r = fma_throughput({d}, n, iters);
      ok = ok && r.verified;
      alone_sum += r.value;
      suite.add_metric(Metric{
          "multi_gpu_tasks_per_s_gpu" + std::to_string(d), "tasks/s", Better::higher, {r.value}});
    }
    const Outcome together = fma_throughput(all, n * static_cast<std::uint64_t>(gpus), iters);
    ok = ok && together.verified;
    suite.add_metric(
        Metric{"multi_gpu_tasks_per_s_all", "tasks/s", Better::higher, {together.value}});
    suite.add_metric(
        Metric{"multi_gpu_efficiency", "fraction", Better::higher, {together.value / alone_sum}});
    std::fprintf(stderr,
                 "[bench] multi-GPU: %d GPUs together %.3g tasks/s, alone (sum) %.3g tasks/s: "
                 "efficiency %.3f%s\n",
                 gpus, together.value, alone_sum, together.value / alone_sum,
                 ok ? "" : " (UNVERIFIED)");
  }

  cudaGraphExecDestroy(graph_exec);
  cudaGraphDestroy(graph);
  for (auto& s : streams) cudaStreamDestroy(s);
  cudaStreamDestroy(stream);
  suite.record_host_handoff("end");
  return suite;
}

}  // namespace weft::bench::gpu
