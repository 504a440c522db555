// Where the tiled Cholesky's time goes as one task graph on the pool (issue 28; decision 039
// left open why n = 8192 in blocks of 2 x 2 tiles takes ~37 ms where its bodies' estimate was
// 15-20). Each task runs the apps' own body (PotrfTile .. UpdateBlock) inside a type that
// stamps its start, end (%globaltimer on the GPU, the steady clock on the host backend) and SM.
// From one traced factorization it prints:
//   - the host's time (push_graph to the last pop) and the GPU's span (first start, last end);
//   - per kind: tasks, median body, the bodies' sum, and the utilization (the bodies' sum over
//     span x blocks);
//   - the critical chain, traced back from the last task to end through the dependency that
//     ended last: its tasks, the sum of its bodies by kind, and the sum of its waits (a task's
//     start less its last input's end), split into waits while other tasks started (queued:
//     blocks came free and took others first) and waits while none did (dispatch: the path
//     from an input's end to the task's start);
//   - every task's wait: median and 90th percentile;
//   - how many bodies ran at once, averaged over ten slices of the span.
// Beside it, the untimed CholeskyPlan on the apps' own pool (AppPool), for how far the probe's
// kernel is from the real one.
//   cholesky_trace REPS N:BLOCK[:empty][:big] ... [--host]  |  cholesky_trace --fit
// :empty runs the same graph with the bodies left out (stamps only): the graph's own cost.
// :big runs it on a pool of 256 task threads a block whose update blocks of 2 x 2 tiles are one
// 128 x 128 product (UpdateBlockWide; decisions 040, 043); --fit prints what the CUDA occupancy
// calculator says of that pool's kernels.
// --host runs both pools on the host backend (the logic, not the speed; small N). Build on the
// GPU machine after scripts/gpu-build.sh ... weft_gpu_apps:
//   nvcc -std=c++20 -O3 -gencode=arch=compute_90,code=sm_90 -maxrregcount=168 -Iinclude
//     -Iapps/gpu -Ilab/probes lab/probes/cholesky_trace_probe.cu build-gpu/apps/libweft_gpu_apps.a
//     build-gpu/src/libweft.a -lopenblas -lhwloc -o /tmp/cholesky_trace
//   /tmp/cholesky_trace 3 1024:1 2048:1 4096:2 8192:2 8192:1 2048:1:empty 8192:1:empty \
//     8192:2:empty
// Here (no GPU): the same with build/ for build-gpu/ and -L/usr/local/cuda/lib64 -lcudart, then
//   /tmp/cholesky_trace 2 256:1 512:2 512:1:empty --host
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include <weft/gpu/device.cuh>

#include "app_pool.hpp"
#include "big_update_block.cuh"
#include "cholesky.hpp"

namespace {

using apps::gpu::CholeskyGraph;

void ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

long long host_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

WEFT_HD inline unsigned long long now_ns() {
#if defined(__CUDA_ARCH__)
  unsigned long long t = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
#else
  return static_cast<unsigned long long>(host_ns());
#endif
}

WEFT_HD inline unsigned sm_id() {
#if defined(__CUDA_ARCH__)
  unsigned sm = 0;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
  return sm;
#else
  return 0;
#endif
}

// The body of `Body`, stamped: stamp[0] start, stamp[1] end, stamp[2] SM (thread 0 writes them,
// after the block's barrier that ends the body).
template <class Body, std::uint32_t Id>
struct Timed {
  static constexpr std::uint32_t kId = Id;
  static constexpr bool kOutOfLine = true;
  static constexpr std::size_t kSharedBytes = Body::kSharedBytes;
  struct Payload {
    typename Body::Payload body;
    unsigned long long* stamp;
    bool empty;  // stamps only: the graph's own cost per task
  };
  WEFT_HD static void run(Payload& p, const weft::gpu::BlockContext& ctx) {
    const unsigned long long t0 = ctx.thread() == 0 ? now_ns() : 0;
    if (!p.empty) Body::run(p.body, ctx);
    ctx.sync();
    if (ctx.thread() == 0) {
      volatile unsigned long long* s = p.stamp;
      s[0] = t0;
      s[1] = now_ns();
      s[2] = sm_id();
    }
  }
};

using TPotrfTile = Timed<apps::gpu::PotrfTile, 921>;
using TTrsmTile = Timed<apps::gpu::TrsmTile, 922>;
using TUpdateTile = Timed<apps::gpu::UpdateTile, 923>;
using TPotrfBlock = Timed<apps::gpu::PotrfBlock, 924>;
using TTrsmBlock = Timed<apps::gpu::TrsmBlock, 925>;
using TUpdateBlock = Timed<apps::gpu::UpdateBlock, 926>;
using Types =
    weft::gpu::TaskTypes<TPotrfTile, TTrsmTile, TUpdateTile, TPotrfBlock, TTrsmBlock, TUpdateBlock>;
constexpr std::size_t kCapacity = apps::gpu::kAppCapacity;
using ProbePool = weft::gpu::Pool<Types, kCapacity>;
using TUpdateBlockBig = Timed<lab::UpdateBlockBig, 926>;
// CholeskyPool's POTRF and TRSM bodies (a window of 4 parts on 256 task threads), under the ids
// of the records timed_records makes.
using BigTypes =
    weft::gpu::TaskTypes<Timed<apps::gpu::PotrfTileT<4>, 921>, Timed<apps::gpu::TrsmTileT<4>, 922>,
                         TUpdateTile, Timed<apps::gpu::PotrfBlockT<4>, 924>,
                         Timed<apps::gpu::TrsmBlockT<4>, 925>, TUpdateBlockBig>;
using BigPool = weft::gpu::Pool<BigTypes, kCapacity>;
constexpr std::size_t kGraphCapacity = std::size_t{1} << 19;

template <class Record, class TUpdate>
std::vector<Record> timed_records(const CholeskyGraph& g, double* a, int lda,
                                  unsigned long long* stamps, bool empty) {
  std::vector<Record> r;
  r.reserve(g.tasks().size());
  const int nb = g.block();
  for (std::size_t t = 0; t < g.tasks().size(); ++t) {
    const CholeskyGraph::Task& x = g.tasks()[t];
    unsigned long long* s = stamps + 3 * t;
    const bool blocks = nb > 1;
    switch (x.kind) {
      case CholeskyGraph::Kind::potrf:
        r.push_back(blocks ? Record::template make<TPotrfBlock>({{a, lda, x.k, nb, 0}, s, empty}, t)
                           : Record::template make<TPotrfTile>({{a, lda, x.k, 0}, s, empty}, t));
        break;
      case CholeskyGraph::Kind::trsm:
        r.push_back(blocks
                        ? Record::template make<TTrsmBlock>({{a, lda, x.i, x.k, nb}, s, empty}, t)
                        : Record::template make<TTrsmTile>({{a, lda, x.i, x.k}, s, empty}, t));
        break;
      default:
        r.push_back(
            blocks ? Record::template make<TUpdate>({{a, lda, x.i, x.j, x.k, nb}, s, empty}, t)
                   : Record::template make<TUpdateTile>({{a, lda, x.i, x.j, x.k}, s, empty}, t));
    }
  }
  return r;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  // Nearest rank: the smallest value with at least q of the values at or below it.
  const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

const char* kind_name(CholeskyGraph::Kind k) {
  constexpr std::array<const char*, 4> names = {"potrf", "trsm", "syrk", "gemm"};
  return names[static_cast<std::size_t>(k)];
}

// One traced factorization, analysed. Times in ns from the stamps (start, end per task).
struct Trace {
  const CholeskyGraph& g;
  std::vector<long long> start, end;
  std::size_t blocks;

  // How many bodies started in [from, to).
  std::vector<long long> starts_sorted, ends_sorted;
  std::size_t starts_in(long long from, long long to) const {
    const auto a = std::lower_bound(starts_sorted.begin(), starts_sorted.end(), from);
    const auto b = std::lower_bound(starts_sorted.begin(), starts_sorted.end(), to);
    return static_cast<std::size_t>(b - a);
  }

  void print(double host_us) {
    const std::size_t n = g.tasks().size();
    starts_sorted = start;
    ends_sorted = end;
    std::sort(starts_sorted.begin(), starts_sorted.end());
    std::sort(ends_sorted.begin(), ends_sorted.end());
    const long long t0 = starts_sorted.front(), t1 = ends_sorted.back();
    long long tick = 0;  // the smallest nonzero gap between starts: the clock's resolution, at most
    for (std::size_t i = 1; i < n; ++i) {
      const long long gap = starts_sorted[i] - starts_sorted[i - 1];
      if (gap > 0 && (tick == 0 || gap < tick)) tick = gap;
    }
    const double span_us = static_cast<double>(t1 - t0) / 1e3;
    std::vector<std::vector<int>> preds(n);
    for (std::size_t t = 0; t < n; ++t) {
      for (const int s : g.successors()[t]) preds[static_cast<std::size_t>(s)].push_back(int(t));
    }
    // Per kind.
    std::array<std::vector<double>, 4> body_us;
    double body_sum_us = 0;
    for (std::size_t t = 0; t < n; ++t) {
      const double b = static_cast<double>(end[t] - start[t]) / 1e3;
      body_us[static_cast<std::size_t>(g.tasks()[t].kind)].push_back(b);
      body_sum_us += b;
    }
    std::printf(
        "  host %.0f us, GPU span %.0f us (%zu tasks, %zu blocks); utilization %.2f; smallest gap "
        "between starts %lld ns\n",
        host_us, span_us, n, blocks, body_sum_us / (span_us * static_cast<double>(blocks)), tick);
    for (std::size_t k = 0; k < 4; ++k) {
      const auto& v = body_us[k];
      if (v.empty()) continue;
      double sum = 0;
      for (double x : v) sum += x;
      std::printf("    %-5s %7zu tasks, body median %8.1f us (p90 %8.1f), sum %9.1f ms\n",
                  kind_name(static_cast<CholeskyGraph::Kind>(k)), v.size(), median(v),
                  percentile(v, 0.9), sum / 1e3);
    }
    // Waits: a task's start less its last input's end (roots: less the first start).
    std::vector<double> waits;
    std::vector<long long> ready(n, t0);
    for (std::size_t t = 0; t < n; ++t) {
      for (const int p : preds[t]) ready[t] = std::max(ready[t], end[static_cast<std::size_t>(p)]);
      if (!preds[t].empty()) waits.push_back(static_cast<double>(start[t] - ready[t]) / 1e3);
    }
    std::printf("    waits (start - last input's end): median %.2f us, p90 %.2f, max %.2f\n",
                median(waits), percentile(waits, 0.9),
                waits.empty() ? 0.0 : *std::max_element(waits.begin(), waits.end()));
    // The critical chain, back from the last task to end.
    std::size_t t =
        static_cast<std::size_t>(std::max_element(end.begin(), end.end()) - end.begin());
    std::array<double, 4> chain_body{};
    std::array<std::size_t, 4> chain_count{};
    double queued = 0, dispatch = 0;
    std::size_t steps = 0;
    for (;;) {
      ++steps;
      const auto k = static_cast<std::size_t>(g.tasks()[t].kind);
      chain_body[k] += static_cast<double>(end[t] - start[t]) / 1e3;
      ++chain_count[k];
      const double w = static_cast<double>(start[t] - ready[t]) / 1e3;
      // Other tasks starting while t waited: blocks came free and took them first (t queued
      // behind them). None: nothing started, and t waited on the path from its input's end to
      // its own start (dispatch).
      (starts_in(ready[t], start[t]) > 0 ? queued : dispatch) += w;
      if (preds[t].empty()) break;
      std::size_t last = static_cast<std::size_t>(preds[t].front());
      for (const int p : preds[t]) {
        if (end[static_cast<std::size_t>(p)] > end[last]) last = static_cast<std::size_t>(p);
      }
      t = last;
    }
    const double chain_bodies = chain_body[0] + chain_body[1] + chain_body[2] + chain_body[3];
    std::printf(
        "    critical chain: %zu tasks, bodies %.0f us (potrf %zu: %.0f, trsm %zu: %.0f, syrk %zu: "
        "%.0f, gemm %zu: %.0f), waits %.0f us (queued %.0f, dispatch %.0f)\n",
        steps, chain_bodies, chain_count[0], chain_body[0], chain_count[1], chain_body[1],
        chain_count[2], chain_body[2], chain_count[3], chain_body[3], queued + dispatch, queued,
        dispatch);
    // Bodies at once, over ten slices of the span.
    std::printf("    bodies at once by tenths of the span:");
    for (int s = 0; s < 10; ++s) {
      const long long a = t0 + (t1 - t0) * s / 10, b = t0 + (t1 - t0) * (s + 1) / 10;
      double busy = 0;
      for (std::size_t i = 0; i < n; ++i) {
        const long long lo = std::max(a, start[i]), hi = std::min(b, end[i]);
        if (hi > lo) busy += static_cast<double>(hi - lo);
      }
      std::printf(" %.0f", busy / static_cast<double>(std::max(1LL, b - a)));
    }
    std::printf("\n");
  }
};

// The matrix where the pool's blocks reach it: device memory, or the host's on --host.
struct Matrix {
  bool host;
  std::vector<double> original, host_copy;
  double* device = nullptr;
  Matrix(int n, bool on_host) : host(on_host), original(apps::gpu::spd_matrix(n)) {
    if (!host) ok(cudaMalloc(&device, sizeof(double) * original.size()), "cudaMalloc");
  }
  ~Matrix() {
    if (device != nullptr) cudaFree(device);
  }
  // A fresh copy of the original (the pool paused around it on the GPU: cudaMemcpy waits for the
  // device, whose resident kernel never ends).
  template <class Pool>
  double* reset(Pool& pool) {
    if (host) {
      host_copy = original;
      return host_copy.data();
    }
    pool.pause();
    ok(cudaMemcpy(device, original.data(), sizeof(double) * original.size(),
                  cudaMemcpyHostToDevice),
       "cudaMemcpy");
    pool.resume();
    return device;
  }
  template <class Pool>
  double residual(Pool& pool, int n) {
    std::vector<double> f = host_copy;
    if (!host) {
      pool.pause();
      f.resize(original.size());
      ok(cudaMemcpy(f.data(), device, sizeof(double) * f.size(), cudaMemcpyDeviceToHost),
         "cudaMemcpy");
      pool.resume();
    }
    return apps::gpu::cholesky_residual(original, f, n);
  }
};

template <class Pool>
Pool make_pool(weft::gpu::DeviceProgram program, bool host, int threads = 128) {
  weft::gpu::PoolOptions o;
  if (!host) {
    o.backend = weft::gpu::Backend::device;
    o.program = program;
    o.devices = {0};
    o.threads_per_block = threads;
  }
  o.graph_capacity = kGraphCapacity;
  return Pool(o);
}

template <class PoolT, class TypesT, class TUpdate>
void run(int n, int block, bool empty, int reps, bool host, int threads) {
  using Record = typename PoolT::Record;
  const CholeskyGraph g(n, block);
  std::printf("n = %d, blocks of %d tile(s): %zu tasks%s, %d task threads a block\n", n, block,
              g.tasks().size(), empty ? ", empty bodies" : "", threads);
  // The stamps: mapped host memory the GPU's blocks write, or plain memory on --host.
  std::vector<unsigned long long> host_stamps;
  unsigned long long* stamps = nullptr;
  const std::size_t stamp_count = 3 * g.tasks().size();
  if (host) {
    host_stamps.resize(stamp_count);
    stamps = host_stamps.data();
  } else {
    ok(cudaHostAlloc(reinterpret_cast<void**>(&stamps), sizeof(unsigned long long) * stamp_count,
                     cudaHostAllocMapped),
       "cudaHostAlloc");
  }
  {
    // The matrix before the pool: cudaMalloc and cudaFree wait for every kernel, the pool's
    // resident one included (docs/gpu.md), so the pool ends first.
    Matrix m(n, host);
    PoolT pool = make_pool<PoolT>(
        host ? weft::gpu::DeviceProgram{} : weft::gpu::device_program<TypesT, kCapacity>(), host,
        threads);
    const weft::gpu::GraphShape shape =
        pool.prepare_graph(g.tasks().size(), g.edges(), g.priorities());
    std::vector<Record> done(g.tasks().size());
    std::vector<double> host_us;
    bool all_ok = true;
    for (int r = 0; r < reps + 1; ++r) {
      double* a = m.reset(pool);
      if (r == reps) std::fill(stamps, stamps + stamp_count, 0ULL);  // the traced rep's alone
      // The records are built inside the time, as CholeskyPlan::factor builds its own.
      const long long h0 = host_ns();
      const std::vector<Record> records = timed_records<Record, TUpdate>(g, a, n, stamps, empty);
      pool.push_graph(shape, records);
      for (std::size_t got = 0; got < done.size();) {
        const std::size_t k = pool.pop_batch(std::span<Record>(done).subspan(got));
        for (std::size_t j = got; j < got + k; ++j) all_ok = all_ok && done[j].ok();
        got += k;
      }
      if (r > 0) host_us.push_back(static_cast<double>(host_ns() - h0) / 1e3);
    }
    const double res = empty ? 0.0 : m.residual(pool, n);
    std::printf("  traced pool: %s; host time median %.0f us over %d; residual %.1e%s\n",
                pool.describe().c_str(), median(host_us), reps, res,
                all_ok && res < 1e-13 ? "" : " (FAILED)");
    Trace tr{g, std::vector<long long>(g.tasks().size()), std::vector<long long>(g.tasks().size()),
             pool.num_blocks()};
    for (std::size_t t = 0; t < g.tasks().size(); ++t) {
      tr.start[t] = static_cast<long long>(stamps[3 * t]);
      tr.end[t] = static_cast<long long>(stamps[3 * t + 1]);
    }
    // Every task stamped its start (the end stamp follows the body), unless one failed.
    bool stamped = true;
    for (std::size_t t = 0; t < g.tasks().size(); ++t) stamped = stamped && tr.end[t] != 0;
    if (all_ok && (empty || res < 1e-13) && stamped) {
      tr.print(host_us.back());
    } else {
      std::printf("  not analysed: a task failed or left its stamps unwritten\n");
    }
    pool.pause();
  }
  if (!empty && threads == 128) {  // the apps' own pool and plan, untimed inside
    Matrix m(n, host);
    apps::gpu::AppPool pool = make_pool<apps::gpu::AppPool>(
        host ? weft::gpu::DeviceProgram{} : apps::gpu::app_program(), host);
    apps::gpu::CholeskyPlan<apps::gpu::AppPool> plan(pool, n, block);
    std::vector<double> us;
    for (int r = 0; r < reps + 1; ++r) {
      double* a = m.reset(pool);
      const long long h0 = host_ns();
      plan.factor(a, n);
      if (r > 0) us.push_back(static_cast<double>(host_ns() - h0) / 1e3);
    }
    std::printf("  CholeskyPlan on AppPool: median %.0f us; residual %.1e\n", median(us),
                m.residual(pool, n));
    pool.pause();
  }
  if (!host) cudaFreeHost(stamps);
}

}  // namespace

// --fit: what the CUDA occupancy calculator says of the big pool's kernels (why a pool of 256
// task threads would not fit).
template <bool Graphs>
void print_fit() {
  const auto kernel = &weft::gpu::detail::resident_kernel<BigTypes, kCapacity, Graphs>;
  cudaFuncAttributes at{};
  ok(cudaFuncGetAttributes(&at, kernel), "attributes");
  const weft::gpu::DeviceProgram program = weft::gpu::device_program<BigTypes, kCapacity>();
  const std::size_t shared = program.shared_bytes(8, Graphs);
  std::printf(
      "graphs %d: %d registers, %zu static shared, %zu local, max threads %d; dynamic %zu\n",
      Graphs ? 1 : 0, at.numRegs, at.sharedSizeBytes, at.localSizeBytes, at.maxThreadsPerBlock,
      shared);
  for (int threads : {128, 192, 224, 256}) {
    int fit = -1;
    const int e = program.max_blocks_per_sm(threads, shared, Graphs, &fit);
    std::printf("  %d task threads: %d block(s) a SM (status %d)\n", threads, fit, e);
  }
}

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each line out as printed: a timeout keeps them
  if (argc == 2 && std::string(argv[1]) == "--fit") {
    print_fit<false>();
    print_fit<true>();
    return 0;
  }
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s REPS N:BLOCK[:empty] ... [--host]\n", argv[0]);
    return 2;
  }
  const int reps = std::max(1, std::atoi(argv[1]));
  bool host = false;
  struct Size {
    int n, block;
    bool empty, big;
  };
  std::vector<Size> sizes;
  for (int i = 2; i < argc; ++i) {
    const std::string s = argv[i];
    if (s == "--host") {
      host = true;
      continue;
    }
    // N[:BLOCK[:empty]]
    const auto colon = s.find(':');
    const int block = colon == std::string::npos ? 1 : std::atoi(s.substr(colon + 1).c_str());
    sizes.push_back({std::atoi(s.substr(0, colon).c_str()), block,
                     s.find(":empty") != std::string::npos, s.find(":big") != std::string::npos});
  }
  for (const Size& z : sizes) {
    if (z.big) {
      run<BigPool, BigTypes, TUpdateBlockBig>(z.n, z.block, z.empty, reps, host, 256);
    } else {
      run<ProbePool, Types, TUpdateBlock>(z.n, z.block, z.empty, reps, host, 128);
    }
  }
  return 0;
}
