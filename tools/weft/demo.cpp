// weft demo: the main job, run by `make demo`. The CPU showcase (the BOTS kernels on weft's
// executor, each verified against its sequential reference, with the speed-up), then the GPU
// pool on irregular fine-grained tasks (against a launch per task on a GPU; on the pool's host
// backend, checked only, where there is none); then
// a factor pipeline of the graph layer, mapped by PPTM, against D-Map; and one of seed 000's
// applications on the pool (batched GEMM: on the GPU when there is one, else on the pool's
// host backend).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "app_pool.hpp"
#include "batched_gemm.hpp"
#include "commands.hpp"
#include "cpu/kernels.hpp"
#include "gpu/segment_dots.hpp"
#include "harness/harness.hpp"
#include "weft/cpu/executor.hpp"
#include "weft/cpu/topology.hpp"
#include "weft/gpu/pool.hpp"
#if WEFT_TOOL_HAVE_CUDA
#include <cuda_runtime.h>

#include "gpu/pool_demo.hpp"
#include "gpu/pool_suite.hpp"
#endif

namespace weft::tools {

namespace {
struct Row {
  std::string name;
  std::string size;
  double seq_s = 0;
  double weft_s = 0;
  bool ok = false;
};

double best_of(int runs, const std::function<void()>& f) {
  double best = 1e300;
  for (int r = 0; r < runs; ++r) best = std::min(best, bench::time_seconds(f));
  return best;
}
// Without a GPU: the pool section's segmented dot products through the pool's host backend,
// each checked against the CPU reference and delivered once; its time is the CPU's, not a
// GPU's, and is printed as such.
bool run_pool_demo_on_host(bool quick) {
  const bench::gpu::SegmentDots d = bench::gpu::SegmentDots::make(quick ? 20'000 : 200'000);
  weft::gpu::Pool<bench::gpu::DemoTypes, bench::gpu::kDemoCapacity> pool{weft::gpu::PoolOptions{}};
  const bench::gpu::PoolRun run = bench::gpu::run_segments(pool, d, d.x.data(), d.y.data());
  std::printf(
      "%d segmented dot products (segments of 32..2048 floats) through the pool's host backend "
      "(%s): %.4f s, %s\n(the CPU reference, one thread: %.4f s; on a GPU this section times "
      "the pool against a kernel launch per task)\n",
      d.tasks, pool.describe().c_str(), run.seconds,
      run.ok() ? "verified, each delivered once" : "WRONG", d.cpu_seconds);
  return run.ok();
}

// Batched DGEMM (equal 64x64 products) through the applications' pool: on the GPU with
// device memory, or on the host backend with host memory. Verified against the CPU reference.
bool run_apps_demo(bool quick, bool on_gpu) {
  using namespace apps::gpu;
  const GemmBatch batch = GemmBatch::uniform(on_gpu ? 128 : (quick ? 16 : 64), 64, 64, 64);
  std::vector<double> a, b, c(batch.c_size), ref(batch.c_size);
  fill_inputs(batch, a, b);
  reference_gemm(batch, a.data(), b.data(), ref.data());
  double seconds = 0;
#if WEFT_TOOL_HAVE_CUDA
  if (on_gpu) {
    double *da = nullptr, *db = nullptr, *dc = nullptr;
    const bool made =
        cudaMalloc(&da, sizeof(double) * a.size()) == cudaSuccess &&
        cudaMalloc(&db, sizeof(double) * b.size()) == cudaSuccess &&
        cudaMalloc(&dc, sizeof(double) * c.size()) == cudaSuccess &&
        cudaMemcpy(da, a.data(), sizeof(double) * a.size(), cudaMemcpyHostToDevice) ==
            cudaSuccess &&
        cudaMemcpy(db, b.data(), sizeof(double) * b.size(), cudaMemcpyHostToDevice) == cudaSuccess;
    if (made) {
      AppPool pool(device_pool_options({0}));
      const auto tasks = gemm_tasks<double, kAppCapacity>(batch, da, db, dc);
      run_tasks(pool, std::span<const AppPool::Record>(tasks));  // warm-up
      seconds = best_of(5, [&] { run_tasks(pool, std::span<const AppPool::Record>(tasks)); });
      pool.pause();  // the copy and frees below need the GPU
      cudaMemcpy(c.data(), dc, sizeof(double) * c.size(), cudaMemcpyDeviceToHost);
    }
    cudaFree(da);
    cudaFree(db);
    cudaFree(dc);
    if (!made) {
      std::printf("batched DGEMM: device memory could not be made\n");
      return false;
    }
  }
#endif
  if (!on_gpu) {
    weft::gpu::PoolOptions o;  // the host backend
    AppPool pool(o);
    const auto tasks = gemm_tasks<double, kAppCapacity>(batch, a.data(), b.data(), c.data());
    seconds = best_of(3, [&] { run_tasks(pool, std::span<const AppPool::Record>(tasks)); });
  }
  const bool ok = max_relative_error<double>(c, ref) <= 1e-12;
  std::printf(
      "batched DGEMM, %zu products of 64x64x64 as %zu pool tasks (%s): %.1f us, %.2f "
      "GFLOP/s, %s\n(docs/apps.md; `weft bench gpu-apps` times it against cuBLAS)\n",
      batch.shapes.size(), batch.tiles(), on_gpu ? "GPU" : "host backend: no GPU here",
      seconds * 1e6, batch.flops() / seconds * 1e-9, ok ? "verified" : "WRONG");
  return ok;
}

}  // namespace

int run_demo(const DemoArgs& args) {
  const bool quick = args.quick;
  using namespace weft::bench::cpu;
  const cpu::CpuTopology topo = cpu::describe_cpu_topology();
  cpu::Executor ex;
  std::printf("weft demo on %s: %zu hardware thread(s); %zu weft worker(s)\n",
              topo.model.empty() ? "this CPU" : topo.model.c_str(), topo.processing_units,
              ex.num_workers());
  std::printf("\n== CPU: the BOTS kernels on the work-stealing executor ==\n");

  const int runs = 3;
  std::vector<Row> rows;
  {
    const int n = quick ? 30 : 36, cutoff = 22;
    long a = 0, b = 0;
    Row r{"fib", "n=" + std::to_string(n) + ", tasks above n=" + std::to_string(cutoff)};
    r.seq_s = best_of(runs, [&] { a = fib_seq(n); });
    r.weft_s = best_of(runs, [&] { b = fib_weft(ex, n, cutoff); });
    r.ok = a == b;
    rows.push_back(r);
  }
  {
    const int n = quick ? 9 : 11;
    long a = 0, b = 0;
    Row r{"nqueens", std::to_string(n) + "x" + std::to_string(n)};
    r.seq_s = best_of(runs, [&] { a = nqueens_seq(n); });
    r.weft_s = best_of(runs, [&] { b = nqueens_weft(ex, n); });
    r.ok = a == b && a > 0;
    rows.push_back(r);
  }
  {
    UtsParams p;
    p.max_depth = quick ? 9 : 12;
    std::uint64_t a = 0, b = 0;
    Row r{"uts", "geometric b=4, depth " + std::to_string(p.max_depth)};
    r.seq_s = best_of(runs, [&] { a = uts_seq(p); });
    r.weft_s = best_of(runs, [&] { b = uts_weft(ex, p, p.max_depth - 5); });
    r.ok = a == b;
    r.size += " (" + std::to_string(a) + " nodes)";
    rows.push_back(r);
  }
  {
    const int nb = quick ? 8 : 16, bs = quick ? 16 : 48;
    SparseMatrix ref, got;
    Row r{"sparselu",
          std::to_string(nb) + "x" + std::to_string(nb) + " blocks of " + std::to_string(bs)};
    r.seq_s = best_of(runs, [&] {
      ref = sparselu_input(nb, bs);
      sparselu_seq(ref);
    });
    r.weft_s = best_of(runs, [&] {
      got = sparselu_input(nb, bs);
      sparselu_weft(ex, got);
    });
    r.ok = sparselu_max_diff(ref, got) < 1e-3;
    rows.push_back(r);
  }
  {
    const std::size_t n = quick ? (1u << 18) : (1u << 22);
    const auto input = multisort_input(n, 1);
    std::vector<std::int32_t> a, b;
    Row r{"multisort", std::to_string(n) + " ints"};
    r.seq_s = best_of(runs, [&] {
      a = input;
      std::sort(a.begin(), a.end());
    });
    r.weft_s = best_of(runs, [&] {
      b = input;
      multisort_weft(ex, b);
    });
    r.ok = a == b;
    rows.push_back(r);
  }
  {
    const int seqs = quick ? 20 : 60;
    const auto in = alignment_input(seqs, 100, 200, 5);
    std::vector<int> a, b;
    Row r{"alignment", std::to_string(seqs) + " sequences, all pairs"};
    r.seq_s = best_of(runs, [&] { a = alignment_seq(in); });
    r.weft_s = best_of(runs, [&] { b = alignment_weft(ex, in); });
    r.ok = a == b;
    rows.push_back(r);
  }

  std::printf("%-10s %-40s %10s %10s %8s  %s\n", "kernel", "size", "seq (s)", "weft (s)", "speedup",
              "result");
  bool all_ok = true;
  for (const Row& r : rows) {
    std::printf("%-10s %-40s %10.4f %10.4f %7.2fx  %s\n", r.name.c_str(), r.size.c_str(), r.seq_s,
                r.weft_s, r.seq_s / r.weft_s, r.ok ? "verified" : "WRONG");
    all_ok = all_ok && r.ok;
  }
  const auto st = ex.stats();
  std::printf(
      "\nexecutor: %llu tasks queued and run, %llu run at once (bounded-queue spawning), "
      "%llu steals, %llu sleeps, %llu tasks found by a sleeper's re-check instead of a "
      "wake-up\n",
      static_cast<unsigned long long>(st.tasks_run),
      static_cast<unsigned long long>(st.tasks_inline), static_cast<unsigned long long>(st.steals),
      static_cast<unsigned long long>(st.sleeps),
      static_cast<unsigned long long>(st.found_without_wakeup));
  std::printf(
      "(sequential = the same kernel with plain recursion/loops; multisort against "
      "std::sort)\n");

  std::printf("\n== GPU: the resident-kernel thread pool ==\n");
#if WEFT_TOOL_HAVE_CUDA
  std::string why;
  if (bench::gpu::gpu_available(why)) {
    all_ok = bench::gpu::run_gpu_demo(quick) && all_ok;
  } else {
    std::printf("no usable GPU (%s): the pool's host backend runs the tasks\n", why.c_str());
    all_ok = run_pool_demo_on_host(quick) && all_ok;
  }
#else
  std::printf("this weft was built without CUDA: the pool's host backend runs the tasks\n");
  all_ok = run_pool_demo_on_host(quick) && all_ok;
#endif
  std::printf("\n== Graph: a factor pipeline mapped to CPU and GPU by PPTM ==\n");
  all_ok = run_graph_demo(ex, quick, args.trace) && all_ok;
  std::printf("\n== GPU applications: seed 000's batched GEMM on the pool ==\n");
  bool gpu_here = false;
#if WEFT_TOOL_HAVE_CUDA
  std::string no_gpu;
  gpu_here = bench::gpu::gpu_available(no_gpu);
#endif
  all_ok = run_apps_demo(quick, gpu_here) && all_ok;
  return all_ok ? 0 : 1;
}

}  // namespace weft::tools
