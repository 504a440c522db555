// The GPU pool suite: per-task cost of empty tasks through the pool (batched and one by one),
// push->pop latency on an idle pool, and the same empty tasks as kernel launches (launch +
// synchronize, back-to-back launches, 16 streams round robin, CUDA graph replay).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "pool_suite.hpp"
#include "weft/gpu/device.cuh"
#include "weft/gpu/pool.hpp"

namespace weft::bench::gpu {

namespace {

#define BENCH_CUDA(call)                                                            \
  do {                                                                              \
    const cudaError_t e_ = (call);                                                  \
    if (e_ != cudaSuccess) {                                                        \
      throw std::runtime_error(std::string(#call) + ": " + cudaGetErrorString(e_)); \
    }                                                                               \
  } while (0)

struct Empty {
  static constexpr std::uint32_t kId = 1;
  struct Payload {
    std::uint64_t seq;  // echoed back: the check that every task came back once
  };
  WEFT_HD static void run(Payload&, const weft::gpu::BlockContext&) {}
};
using Types = weft::gpu::TaskTypes<Empty>;
constexpr std::size_t kCap = 8;
using EmptyPool = weft::gpu::Pool<Types, kCap>;

__global__ void empty_kernel() {}

weft::gpu::PoolOptions device_options() {
  weft::gpu::PoolOptions o;
  o.backend = weft::gpu::Backend::device;
  o.program = weft::gpu::device_program<Types, kCap>();
  return o;
}

// Checks that the popped sequence numbers are exactly 0..n-1.
bool all_once(std::vector<std::uint64_t>& seqs, std::uint64_t n) {
  if (seqs.size() != n) return false;
  std::sort(seqs.begin(), seqs.end());
  for (std::uint64_t i = 0; i < n; ++i) {
    if (seqs[i] != i) return false;
  }
  return true;
}

Outcome pool_batched(EmptyPool& pool, std::uint64_t n) {
  std::vector<std::uint64_t> seqs;
  seqs.reserve(n);
  const double t = time_seconds([&] {
    std::thread pusher([&] {
      std::vector<EmptyPool::Record> batch;
      batch.reserve(4096);
      for (std::uint64_t i = 0; i < n;) {
        batch.clear();
        for (; i < n && batch.size() < 4096; ++i) {
          batch.push_back(EmptyPool::Record::make<Empty>({i}));
        }
        pool.push_batch(batch, 0);
      }
    });
    std::vector<EmptyPool::Record> got(4096);
    while (seqs.size() < n) {
      const std::size_t k = pool.pop_batch(got, 0);
      for (std::size_t j = 0; j < k; ++j) seqs.push_back(got[j].as<Empty>().seq);
    }
    pusher.join();
  });
  return Outcome{t / static_cast<double>(n) * 1e9, all_once(seqs, n)};
}

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
  const std::uint64_t n_batched = o.quick ? 100'000 : 1'000'000;
  const std::uint64_t n_single = o.quick ? 40'000 : 200'000;
  const int n_launch = o.quick ? 2'000 : 20'000;

  // The pool's resident kernel occupies every SM: a kernel launched beside it would wait for
  // it forever. So the pool lives only during weft's own runs (made and destroyed outside the
  // timed region), and the launch peers run on an otherwise idle GPU.
  auto make_pool = [] { return std::make_unique<EmptyPool>(device_options()); };
  int gpus = 0;
  BENCH_CUDA(cudaGetDeviceCount(&gpus));
  cudaDeviceProp prop{};
  BENCH_CUDA(cudaGetDeviceProperties(&prop, 0));
  suite.set_gpu(prop.name, gpus);
  {
    auto pool = make_pool();
    std::fprintf(stderr, "[bench] gpu-pool: %s, %zu slots\n", pool->describe().c_str(),
                 pool->num_slots());
  }

  // Per-task cost, in microseconds, of the same empty tasks as launches.
  cudaStream_t stream;
  BENCH_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::vector<cudaStream_t> streams(16);
  for (auto& s : streams) BENCH_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaGraph_t graph;
  cudaGraphExec_t graph_exec;
  constexpr int kGraphNodes = 1000;
  BENCH_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < kGraphNodes; ++i) empty_kernel<<<1, 32, 0, stream>>>();
  BENCH_CUDA(cudaStreamEndCapture(stream, &graph));
  BENCH_CUDA(cudaGraphInstantiate(&graph_exec, graph, 0));

  auto launch_sync = [&] {
    const double t = time_seconds([&] {
      for (int i = 0; i < n_launch / 10; ++i) {
        empty_kernel<<<1, 32, 0, stream>>>();
        BENCH_CUDA(cudaStreamSynchronize(stream));
      }
    });
    return Outcome{t / (n_launch / 10) * 1e6, cudaGetLastError() == cudaSuccess};
  };
  auto launch_async = [&] {
    const double t = time_seconds([&] {
      for (int i = 0; i < n_launch; ++i) empty_kernel<<<1, 32, 0, stream>>>();
      BENCH_CUDA(cudaStreamSynchronize(stream));
    });
    return Outcome{t / n_launch * 1e6, cudaGetLastError() == cudaSuccess};
  };
  auto streams16 = [&] {
    const double t = time_seconds([&] {
      for (int i = 0; i < n_launch; ++i) empty_kernel<<<1, 32, 0, streams[i % 16]>>>();
      for (auto& s : streams) BENCH_CUDA(cudaStreamSynchronize(s));
    });
    return Outcome{t / n_launch * 1e6, cudaGetLastError() == cudaSuccess};
  };
  auto graph_replay = [&] {
    const int replays = std::max(1, n_launch / kGraphNodes);
    const double t = time_seconds([&] {
      for (int r = 0; r < replays; ++r) BENCH_CUDA(cudaGraphLaunch(graph_exec, stream));
      BENCH_CUDA(cudaStreamSynchronize(stream));
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

  // Latency of one task on an idle pool (blocks backed off, scheduler asleep).
  std::vector<double> lat;
  bool lat_ok = true;
  for (int i = 0; i < (o.quick ? 200 : 2000); ++i) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    const double t0 = now_seconds();
    pool.push<Empty>({static_cast<std::uint64_t>(i)}, 0);
    const auto r = pool.pop(0);
    lat.push_back((now_seconds() - t0) * 1e6);
    lat_ok = lat_ok && r.ok() && r.as<Empty>().seq == static_cast<std::uint64_t>(i);
  }
  std::vector<double> sorted = lat;
  std::sort(sorted.begin(), sorted.end());
  const double p50 = sorted[sorted.size() / 2];
  const double p99 = sorted[sorted.size() * 99 / 100];
  suite.add_metric(Metric{"latency_p50_us", "us", Better::lower, {p50}});
  suite.add_metric(Metric{"latency_p99_us", "us", Better::lower, {p99}});
  std::fprintf(stderr, "[bench] latency push->pop on an idle pool: p50 %.2f us, p99 %.2f us%s\n",
               p50, p99, lat_ok ? "" : " (UNVERIFIED)");

  cudaGraphExecDestroy(graph_exec);
  cudaGraphDestroy(graph);
  for (auto& s : streams) cudaStreamDestroy(s);
  cudaStreamDestroy(stream);
  return suite;
}

}  // namespace weft::bench::gpu
