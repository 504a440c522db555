// pool_vs_launch_same_body alone (bench/gpu/pool_suite.cu's measurement, a few seconds instead
// of the whole gpu-pool suite), so that it can be built against several commits' pools and
// bisected in one device call (lab/scripts/same-body-bisect.sh). As many 64x64 DGEMMs as the
// GPU has SMs, through the pool (push_batch, pop until all are back) and as one launch +
// synchronize of the same body; medians of `reps` runs after two warm-up runs, for the default
// pool and for one block per SM. Also the plain kernel with its B tile `offset` bytes into
// dynamic shared memory, as the pool's task space lies after its payload slots (offsets 0, 256,
// 288 and 320: whether the tile's alignment moves the body).
// Where the tree has task graphs, then a pool with a graph table (the kernel with the graph
// code): the batch through its rings, and as one graph without edges.
// Built with -DPROBE_OUT_OF_LINE the body is called, not inlined into the resident kernel.
//   same_body_probe [reps]     (default 20)
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <vector>

#include "cuda_check.cuh"
#include "weft/gpu/device.cuh"
#include "weft/gpu/pool.hpp"

namespace {

struct Dgemm64 {
  static constexpr std::uint32_t kId = 1;
  static constexpr int kN = 64;
  static constexpr std::size_t kSharedBytes = kN * kN * sizeof(double);
#if defined(PROBE_OUT_OF_LINE)
  static constexpr bool kOutOfLine = true;  // the body called, not inlined
#endif
  struct Payload {
    const double* a;
    const double* b;
    double* c;
    unsigned long long* stamp;  // start ns, end ns, SM: thread 0 writes them
  };
  WEFT_HD static void run(Payload& p, const weft::gpu::BlockContext& ctx) {
#if defined(__CUDA_ARCH__)
    unsigned long long t0 = 0;
    if (ctx.thread() == 0) asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
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
    ctx.sync();
#if defined(__CUDA_ARCH__)
    if (ctx.thread() == 0) {
      unsigned long long t1 = 0;
      unsigned sm = 0;
      asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
      asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
      p.stamp[0] = t0;
      p.stamp[1] = t1;
      p.stamp[2] = sm;
    }
#endif
  }
};
using GemmTypes = weft::gpu::TaskTypes<Dgemm64>;
using GemmPool = weft::gpu::Pool<GemmTypes, 32>;
constexpr int kThreads = 128;

__global__ void dgemm64_kernel(const double* a, const double* b, double* c,
                               unsigned long long* stamps, int offset) {
  extern __shared__ __align__(16) unsigned char shared[];
  const std::size_t m = static_cast<std::size_t>(blockIdx.x) * Dgemm64::kN * Dgemm64::kN;
  Dgemm64::Payload p{a + m, b + m, c + m, stamps + 3 * blockIdx.x};
  Dgemm64::run(p,
               weft::gpu::BlockContext(static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x),
                                       static_cast<int>(blockIdx.x), shared + offset));
}

// The last run's stamps: the median and longest body, the spread of the starts, the SMs used.
void print_stamps(const char* what, const unsigned long long* dev, int batch) {
  std::vector<unsigned long long> s(3 * static_cast<std::size_t>(batch));
  CHECK(cudaMemcpy(s.data(), dev, s.size() * sizeof(s[0]), cudaMemcpyDeviceToHost));
  std::vector<double> body;
  unsigned long long first = ~0ull, last_start = 0, last_end = 0;
  std::vector<int> per_sm(1024, 0);
  for (int m = 0; m < batch; ++m) {
    body.push_back(static_cast<double>(s[3 * m + 1] - s[3 * m]) / 1e3);
    first = std::min(first, s[3 * m]);
    last_start = std::max(last_start, s[3 * m]);
    last_end = std::max(last_end, s[3 * m + 1]);
    ++per_sm[s[3 * m + 2] % 1024];
  }
  std::sort(body.begin(), body.end());
  int sms = 0, stacked = 0;
  for (const int k : per_sm) {
    sms += k > 0;
    stacked = std::max(stacked, k);
  }
  std::printf(
      "  %s: body median %.2f max %.2f us; starts spread %.2f us; span %.2f us; %d SMs, "
      "at most %d a SM\n",
      what, body[body.size() / 2], body.back(), static_cast<double>(last_start - first) / 1e3,
      static_cast<double>(last_end - first) / 1e3, sms, stacked);
}

template <class F>
double median_us(int reps, F&& f) {
  std::vector<double> t;
  for (int r = 0; r < reps + 2; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    const auto t1 = std::chrono::steady_clock::now();
    if (r >= 2) t.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// The probe's pool on GPU 0: 128 task threads a block, `blocks_per_sm` (0: as many as fit),
// and a graph table of `graph_capacity` tasks (0: none, the kernel without the graph code).
GemmPool make_pool(int blocks_per_sm, std::size_t graph_capacity) {
  weft::gpu::PoolOptions o;
  o.backend = weft::gpu::Backend::device;
  o.program = weft::gpu::device_program<GemmTypes, 32>();
  o.devices = {0};
  o.threads_per_block = kThreads;
  o.blocks_per_sm = blocks_per_sm;
#if __has_include("weft/gpu/graph_shape.hpp")
  o.graph_capacity = graph_capacity;
#else
  (void)graph_capacity;
#endif
  return GemmPool(o);
}

// Pops `batch` results; clears `ok` when one did not end well.
void pop_all(GemmPool& pool, int batch, bool& ok) {
  std::vector<GemmPool::Record> got(static_cast<std::size_t>(batch));
  for (int done = 0; done < batch;) {
    const std::size_t k = pool.pop_batch(got, 0);
    for (std::size_t j = 0; j < k; ++j) ok = ok && got[j].ok();
    done += static_cast<int>(k);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 20;
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  const int batch = prop.multiProcessorCount;
  constexpr int kElems = Dgemm64::kN * Dgemm64::kN;
  const std::size_t bytes = sizeof(double) * kElems * static_cast<std::size_t>(batch);
  std::vector<double> h(kElems * static_cast<std::size_t>(batch));
  for (std::size_t i = 0; i < h.size(); ++i) h[i] = static_cast<double>(i % 17) * 0.25 - 2.0;
  double *a = nullptr, *b = nullptr, *c = nullptr;
  unsigned long long* stamps = nullptr;
  CHECK(cudaMalloc(&stamps, 3 * sizeof(unsigned long long) * static_cast<std::size_t>(batch)));
  CHECK(cudaMalloc(&a, bytes));
  CHECK(cudaMalloc(&b, bytes));
  CHECK(cudaMalloc(&c, bytes));
  CHECK(cudaMemcpy(a, h.data(), bytes, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(b, h.data(), bytes, cudaMemcpyHostToDevice));
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  CHECK(cudaFuncSetAttribute(dgemm64_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(Dgemm64::kSharedBytes) + 512));
  std::printf("launch_us");
  for (const int offset : {0, 256, 288, 320}) {
    const double us = median_us(reps, [&] {
      dgemm64_kernel<<<batch, kThreads, Dgemm64::kSharedBytes + offset, stream>>>(a, b, c, stamps,
                                                                                  offset);
      CHECK(cudaStreamSynchronize(stream));
    });
    std::printf(" off%d=%.2f", offset, us);
  }
  std::printf("\n");
  print_stamps("kernel", stamps, batch);
  std::vector<GemmPool::Record> records;
  for (int m = 0; m < batch; ++m) {
    const std::size_t at = static_cast<std::size_t>(m) * kElems;
    records.push_back(GemmPool::Record::make<Dgemm64>({a + at, b + at, c + at, stamps + 3 * m}));
  }
  for (const int blocks_per_sm : {0, 1}) {
    GemmPool pool = make_pool(blocks_per_sm, 0);
    bool ok = true;
    const double us = median_us(reps, [&] {
      pool.push_batch(records, 0);
      pop_all(pool, batch, ok);
    });
    std::printf("pool_us blocks_per_sm=%d %.2f%s  (%s)\n", blocks_per_sm, us, ok ? "" : " FAILED",
                pool.describe().c_str());
    print_stamps("pool", stamps, batch);
  }
#if __has_include("weft/gpu/graph_shape.hpp")
  // A pool with a graph table runs the kernel with the graph code: the same batch through its
  // rings, then as one graph without edges (each task taken from the blocks' ready queue).
  {
    // One more task than the batch: room for the fan-out task where the tree gives a wide
    // graph one (docs/decisions/017-gpu-device-dependencies.md).
    GemmPool pool = make_pool(0, static_cast<std::size_t>(batch) + 1);
    bool ok = true;
    const double ring_us = median_us(reps, [&] {
      pool.push_batch(records, 0);
      pop_all(pool, batch, ok);
    });
    std::printf("graph_pool ring_us %.2f%s  (%s)\n", ring_us, ok ? "" : " FAILED",
                pool.describe().c_str());
    print_stamps("graph pool, ring", stamps, batch);
    const double graph_us = median_us(reps, [&] {
      pool.push_graph(std::span<const GemmPool::Record>(records), {}, 0);
      pop_all(pool, batch, ok);
    });
    std::printf("graph_pool graph_us %.2f%s\n", graph_us, ok ? "" : " FAILED");
    print_stamps("graph pool, graph", stamps, batch);
  }
#endif
  return 0;
}
