// Where the time of one GPU-filling batch goes through the pool (issue 28's batched GEMM: the
// pool's 128 DGEMM tiles take ~38 us where cuBLAS strided batched takes ~21 and one plain
// kernel of the same blocks ~15). A task type that runs the apps' DGEMM tile body and stamps
// its start, end (%globaltimer) and SM into mapped host memory; the host stamps the push and
// the last pop (steady clock). The two clocks are aligned by a one-block kernel answering the
// host's pings through mapped memory (the offset of the ping with the shortest round trip, its
// error at most half that trip), measured before and after, so that each rep splits into:
//   push (the push_batch call), push -> first body start, first -> last start, the bodies,
//   last end -> last pop returned.
// Medians over the reps, per pool configuration (the default; one block an SM; one and two
// scheduler lanes; one slot a ring), and the same blocks as one plain kernel; for each pool the
// last rep's lane rounds that moved a task (SchedulerObserver), timed from the push.
// The resident kernel holds the apps' task types beside the probe's, with the apps' register
// bound, so the body compiles as in AppPool (-DPROBE_ALONE: the probe's type and the apps'
// DGEMM tile only; -DPROBE_OUT_OF_LINE: the probe's body called out of line). `batch_trace
// REPS two` runs the first two pools only. Build on the GPU machine after
// scripts/gpu-build.sh ... weft_gpu_apps:
//   nvcc -std=c++20 -O3 -gencode=arch=compute_90,code=sm_90 -maxrregcount=168 -Iinclude
//     -Iapps/gpu lab/probes/batch_trace_probe.cu build-gpu/apps/libweft_gpu_apps.a
//     build-gpu/src/libweft.a -lhwloc -o /tmp/batch_trace && /tmp/batch_trace 200
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <weft/gpu/device.cuh>

#include "app_pool.hpp"

namespace {

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

struct TimedDgemm {
  static constexpr std::uint32_t kId = 901;
  using Body = apps::gpu::DgemmTile;
  static constexpr std::size_t kSharedBytes = Body::kSharedBytes;
#if defined(PROBE_OUT_OF_LINE)
  static constexpr bool kOutOfLine = true;  // the body called, with registers of its own
#endif
  struct Payload {
    Body::Payload g;
    unsigned long long* stamp;  // start ns, end ns, SM (thread 0 writes them)
  };
  WEFT_HD static void run(Payload& p, const weft::gpu::BlockContext& ctx) {
#if defined(__CUDA_ARCH__)
    unsigned long long t0 = 0;
    if (ctx.thread() == 0) asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
#endif
    Body::run(p.g, ctx);
    ctx.sync();
#if defined(__CUDA_ARCH__)
    if (ctx.thread() == 0) {
      unsigned long long t1 = 0;
      unsigned sm = 0;
      asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
      asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
      volatile unsigned long long* s = p.stamp;
      s[0] = t0;
      s[1] = t1;
      s[2] = sm;
    }
#endif
  }
};

// The same body on a copy of the payload in registers: the pool hands a body its payload in
// the block's shared memory, where every store the body makes to shared memory may alias it
// (so the compiler reloads its fields), where a kernel's copy lives in registers.
struct TimedDgemmLocal {
  static constexpr std::uint32_t kId = 902;
  static constexpr std::size_t kSharedBytes = TimedDgemm::kSharedBytes;
  using Payload = TimedDgemm::Payload;
  WEFT_HD static void run(Payload& p, const weft::gpu::BlockContext& ctx) {
    Payload local = p;
    TimedDgemm::run(local, ctx);
  }
};

#if defined(PROBE_ALONE)
using Types = weft::gpu::TaskTypes<TimedDgemm, TimedDgemmLocal, apps::gpu::DgemmTile>;
#else
using Types =
    weft::gpu::TaskTypes<TimedDgemm, TimedDgemmLocal, apps::gpu::DgemmTile, apps::gpu::SgemmTile,
                         apps::gpu::PotrfTile, apps::gpu::TrsmTile, apps::gpu::UpdateTile,
                         apps::gpu::KmeansAssign, apps::gpu::ReplicatedGemmTile>;
#endif
constexpr std::size_t kCapacity = apps::gpu::kAppCapacity;
using ProbePool = weft::gpu::Pool<Types, kCapacity>;
using Record = ProbePool::Record;

__global__ void timed_kernel(const TimedDgemm::Payload* payloads) {
  extern __shared__ __align__(16) unsigned char shared[];
  TimedDgemm::Payload p = payloads[blockIdx.x];
  TimedDgemm::run(
      p, weft::gpu::BlockContext(static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x),
                                 static_cast<int>(blockIdx.x), shared));
}

// box[0]: the host's ping number; box[1]: the kernel's answer; box[2]: its %globaltimer.
__global__ void pong(volatile unsigned long long* box, int pings) {
  for (int r = 1; r <= pings; ++r) {
    while (box[0] < static_cast<unsigned long long>(r)) {
    }
    unsigned long long t = 0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    box[2] = t;
    __threadfence_system();
    box[1] = r;
  }
}

// host ns - GPU ns, from the ping with the shortest round trip; `trip` gets that trip.
long long clock_offset(unsigned long long* box, double& trip_us) {
  constexpr int kPings = 2000;
  box[0] = box[1] = box[2] = 0;
  std::atomic_thread_fence(std::memory_order_seq_cst);
  pong<<<1, 1>>>(box, kPings);
  ok(cudaGetLastError(), "pong");
  long long best_trip = -1, best_offset = 0;
  for (int r = 1; r <= kPings; ++r) {
    const long long h0 = host_ns();
    std::atomic_ref<unsigned long long>(box[0]).store(r, std::memory_order_release);
    while (std::atomic_ref<unsigned long long>(box[1]).load(std::memory_order_acquire) <
           static_cast<unsigned long long>(r)) {
    }
    const long long h1 = host_ns();
    const auto g = static_cast<long long>(
        std::atomic_ref<unsigned long long>(box[2]).load(std::memory_order_relaxed));
    if (best_trip < 0 || h1 - h0 < best_trip) {
      best_trip = h1 - h0;
      best_offset = (h0 + h1) / 2 - g;
    }
  }
  ok(cudaDeviceSynchronize(), "pong sync");
  trip_us = static_cast<double>(best_trip) / 1e3;
  return best_offset;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

struct Phases {
  std::vector<double> push, to_first, spread, body_med, body_max, span, tail, total;
  int stacked_reps = 0;
  void print(const char* what) const {
    std::printf(
        "%-28s total %6.2f | push %5.2f, to first start %5.2f, starts spread %5.2f, body med "
        "%5.2f max %5.2f, span %5.2f, last end -> popped %5.2f us | reps with 2 on an SM: %d\n",
        what, median(total), median(push), median(to_first), median(spread), median(body_med),
        median(body_max), median(span), median(tail), stacked_reps);
  }
};

// One rep's device stamps (host clock via `offset`) into `ph`, beside the host's stamps.
void add_rep(Phases& ph, const unsigned long long* stamps, int batch, long long offset,
             long long t_push, long long t_pushed, long long t_popped, int sms) {
  long long first = -1, last_start = 0, last_end = 0;
  std::vector<double> body;
  std::vector<int> per_sm(static_cast<std::size_t>(sms) + 1, 0);
  for (int m = 0; m < batch; ++m) {
    const long long s = static_cast<long long>(stamps[3 * m]) + offset;
    const long long e = static_cast<long long>(stamps[3 * m + 1]) + offset;
    first = first < 0 ? s : std::min(first, s);
    last_start = std::max(last_start, s);
    last_end = std::max(last_end, e);
    body.push_back(static_cast<double>(e - s) / 1e3);
    ++per_sm[std::min<std::size_t>(stamps[3 * m + 2], static_cast<std::size_t>(sms))];
  }
  ph.push.push_back(static_cast<double>(t_pushed - t_push) / 1e3);
  ph.to_first.push_back(static_cast<double>(first - t_push) / 1e3);
  ph.spread.push_back(static_cast<double>(last_start - first) / 1e3);
  ph.body_med.push_back(median(body));
  ph.body_max.push_back(*std::max_element(body.begin(), body.end()));
  ph.span.push_back(static_cast<double>(last_end - first) / 1e3);
  ph.tail.push_back(static_cast<double>(t_popped - last_end) / 1e3);
  ph.total.push_back(static_cast<double>(t_popped - t_push) / 1e3);
  if (*std::max_element(per_sm.begin(), per_sm.end()) > 1) ++ph.stacked_reps;
}

// The lanes' rounds that moved a task (took, loaded or collected one), with their end times.
struct RoundTrace final : weft::gpu::SchedulerObserver {
  struct Entry {
    long long end_ns;
    weft::gpu::SchedulerObserver::LaneRound round;
  };
  std::vector<Entry> entries = std::vector<Entry>(1 << 16);
  std::atomic<std::size_t> next{0};
  std::atomic<bool> on{false};
  void on_round(const LaneRound& r) noexcept override {
    // relaxed: the flag and the index only pick entries; the pops order them for the reader.
    if (!on.load(std::memory_order_relaxed) || (r.ended == 0 && r.loaded == 0)) return;
    const std::size_t i = next.fetch_add(1, std::memory_order_relaxed);
    if (i < entries.size()) entries[i] = {host_ns(), r};
  }
  // The rounds of one rep, times from the push (phases in us: collect deliver take load).
  void print(long long t_push) const {
    const std::size_t n = std::min(next.load(), entries.size());
    std::vector<Entry> e(entries.begin(), entries.begin() + static_cast<std::ptrdiff_t>(n));
    std::sort(e.begin(), e.end(),
              [](const Entry& x, const Entry& y) { return x.end_ns < y.end_ns; });
    for (const Entry& x : e) {
      std::printf(
          "    lane %zu round ended at %6.2f us: loaded %3zu ended %3zu active %3zu | "
          "collect %.2f deliver %.2f take %.2f load %.2f\n",
          x.round.lane, static_cast<double>(x.end_ns - t_push) / 1e3, x.round.loaded, x.round.ended,
          x.round.active_blocks, x.round.phase_ns[0] / 1e3, x.round.phase_ns[1] / 1e3,
          x.round.phase_ns[2] / 1e3, x.round.phase_ns[3] / 1e3);
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 200;
  constexpr int kBatch = 128, kN = 64;
  cudaDeviceProp prop{};
  ok(cudaGetDeviceProperties(&prop, 0), "props");
  const int sms = prop.multiProcessorCount;
  const std::size_t elems = static_cast<std::size_t>(kN) * kN * kBatch;
  std::vector<double> h(elems);
  for (std::size_t i = 0; i < h.size(); ++i) h[i] = static_cast<double>(i % 17) * 0.25 - 2.0;
  double *a = nullptr, *b = nullptr, *c = nullptr;
  ok(cudaMalloc(&a, elems * sizeof(double)), "malloc");
  ok(cudaMalloc(&b, elems * sizeof(double)), "malloc");
  ok(cudaMalloc(&c, elems * sizeof(double)), "malloc");
  ok(cudaMemcpy(a, h.data(), elems * sizeof(double), cudaMemcpyHostToDevice), "copy");
  ok(cudaMemcpy(b, h.data(), elems * sizeof(double), cudaMemcpyHostToDevice), "copy");
  unsigned long long *stamps = nullptr, *box = nullptr;
  ok(cudaHostAlloc(reinterpret_cast<void**>(&stamps), 3 * sizeof(unsigned long long) * kBatch,
                   cudaHostAllocMapped),
     "hostalloc");
  ok(cudaHostAlloc(reinterpret_cast<void**>(&box), 64, cudaHostAllocMapped), "hostalloc");
  std::vector<Record> timed, timed_local, plain;
  for (int m = 0; m < kBatch; ++m) {
    const std::size_t at = static_cast<std::size_t>(m) * kN * kN;
    apps::gpu::DgemmTile::Payload g{a + at, b + at, c + at, kN, kN, kN, kN, kN, kN, 0, 0, 1.0, 0.0};
    timed.push_back(Record::make<TimedDgemm>({g, stamps + 3 * m}));
    timed_local.push_back(Record::make<TimedDgemmLocal>({g, stamps + 3 * m}));
    plain.push_back(Record::make<apps::gpu::DgemmTile>(g));
  }
  double trip0 = 0, trip1 = 0;
  const long long offset0 = clock_offset(box, trip0);

  // The same blocks as one plain kernel, launch + synchronize.
  {
    std::vector<TimedDgemm::Payload> payloads;
    for (const Record& r : timed) payloads.push_back(r.as<TimedDgemm>());
    TimedDgemm::Payload* d_records = nullptr;
    ok(cudaMalloc(&d_records, sizeof(TimedDgemm::Payload) * kBatch), "malloc");
    ok(cudaMemcpy(d_records, payloads.data(), sizeof(TimedDgemm::Payload) * kBatch,
                  cudaMemcpyHostToDevice),
       "copy");
    ok(cudaFuncSetAttribute(timed_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            static_cast<int>(TimedDgemm::kSharedBytes)),
       "attr");
    Phases ph;
    for (int r = 0; r < reps + 5; ++r) {
      const long long t0 = host_ns();
      timed_kernel<<<kBatch, 128, TimedDgemm::kSharedBytes>>>(d_records);
      const long long t1 = host_ns();
      ok(cudaDeviceSynchronize(), "kernel");
      const long long t2 = host_ns();
      if (r >= 5) add_rep(ph, stamps, kBatch, offset0, t0, t1, t2, sms);
    }
    ph.print("plain kernel (launch)");
    cudaFree(d_records);
  }

  struct Config {
    const char* name;
    std::size_t lanes;
    int blocks_per_sm;
    std::size_t ring_depth;
  };
  const std::vector<Config> all = {
      {"pool, default", 0, 0, 0}, {"pool, 8 lanes", 8, 0, 0}, {"pool, 1 block an SM", 0, 1, 0},
      {"pool, 1 lane", 1, 0, 0},  {"pool, 2 lanes", 2, 0, 0}, {"pool, ring depth 1", 0, 0, 1}};
  const bool two = argc > 2 && std::string(argv[2]) == "two";  // the first two configurations
  for (const Config& cfg : two ? std::vector<Config>(all.begin(), all.begin() + 2) : all) {
    RoundTrace trace;
    weft::gpu::PoolOptions o;
    o.observer = &trace;
    o.blocks_per_sm = cfg.blocks_per_sm;
    o.ring_depth = cfg.ring_depth;
    o.backend = weft::gpu::Backend::device;
    o.program = weft::gpu::device_program<Types, kCapacity>();
    o.devices = {0};
    o.threads_per_block = 128;
    o.scheduler_lanes = cfg.lanes;
    ProbePool pool(o);
    std::vector<Record> done(kBatch);
    Phases ph, ph_local;
    std::vector<double> plain_total;
    bool all_ok = true;
    for (int r = 0; r < reps + 5; ++r) {
      const bool traced = r == reps + 4;
      if (traced) trace.on.store(true);
      const long long t0 = host_ns();
      pool.push_batch(timed);
      const long long t1 = host_ns();
      for (int got = 0; got < kBatch;) {
        const std::size_t k = pool.pop_batch(done);
        for (std::size_t j = 0; j < k; ++j) all_ok = all_ok && done[j].ok();
        got += static_cast<int>(k);
      }
      const long long t2 = host_ns();
      if (traced) trace.on.store(false);
      if (r >= 5) add_rep(ph, stamps, kBatch, offset0, t0, t1, t2, sms);
      if (traced) {
        std::printf("  the last rep: pushed at %.2f us, popped at %.2f; its lanes' rounds:\n",
                    static_cast<double>(t1 - t0) / 1e3, static_cast<double>(t2 - t0) / 1e3);
        trace.print(t0);
      }
      // The body on its payload's copy in registers.
      const long long l0 = host_ns();
      pool.push_batch(timed_local);
      const long long l1 = host_ns();
      for (int got = 0; got < kBatch;) got += static_cast<int>(pool.pop_batch(done));
      if (r >= 5) add_rep(ph_local, stamps, kBatch, offset0, l0, l1, host_ns(), sms);
      // The apps' own tile, untimed inside: its end-to-end time alone.
      const long long u0 = host_ns();
      pool.push_batch(plain);
      for (int got = 0; got < kBatch;) got += static_cast<int>(pool.pop_batch(done));
      if (r >= 5) plain_total.push_back(static_cast<double>(host_ns() - u0) / 1e3);
    }
    ph.print(cfg.name);
    ph_local.print("  payload copied to registers");
    std::printf("%-28s DgemmTile batch end to end %.2f us; %s%s\n", "", median(plain_total),
                pool.describe().c_str(), all_ok ? "" : " (A TASK FAILED)");
    pool.pause();
  }
  const long long offset1 = clock_offset(box, trip1);
  std::printf("clock offset: ping trips %.2f / %.2f us, drift over the run %.2f us\n", trip0, trip1,
              static_cast<double>(offset1 - offset0) / 1e3);
  cudaFreeHost(stamps);
  cudaFreeHost(box);
  return 0;
}
