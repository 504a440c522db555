// The factor operators' CUDA implementations against the CPU references, alone (with holes and
// ties) and composed in the five pipelines. Skipped, and reported so, without a usable GPU.
#include <gtest/gtest.h>

#if WEFT_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <string>
#include <thread>

#include "factor_kernels.hpp"
#include "pipelines.hpp"
#include "weft/cpu/executor.hpp"
#include "weft/graph/runtime.hpp"

namespace {

using factors::Series;
using weft::graph::Device;
using weft::graph::Policy;
namespace gk = factors::kernels;

struct GpuRuntime {
  weft::cpu::Executor ex;
  std::unique_ptr<weft::graph::Runtime> rt;
  GpuRuntime() {
    weft::graph::RuntimeOptions o;
    o.device = weft::graph::DeviceKind::automatic;
    rt = std::make_unique<weft::graph::Runtime>(ex, o);
  }
};

#define SKIP_WITHOUT_GPU(r) \
  if (!(r).rt->has_device()) GTEST_SKIP() << "SKIPPED: " << (r).rt->device_name()

Series holes_and_ties(std::size_t stocks, std::size_t days, unsigned seed) {
  std::mt19937 rng(seed);
  Series x(stocks, days);
  for (auto& v : x.values) v = float(int(rng() % 41) - 20) * 0.25f;  // many ties, zeros
  for (std::size_t i = 0; i < x.values.size(); i += 97) x.values[i] = NAN;
  return x;
}

// Runs one kernel node on the GPU over `inputs` and returns its output.
Series run_on_gpu(weft::graph::Runtime& rt, weft::graph::Kernel k, std::vector<Series> inputs) {
  weft::graph::Graph g;
  std::vector<weft::graph::Arg> args;
  for (Series& s : inputs) {
    args.push_back(weft::graph::read(g.add_data("in", s.values.data(), s.values.size() * 4)));
  }
  Series out(inputs[0].stocks, inputs[0].days, -1.0f);
  args.push_back(weft::graph::write(g.add_data("out", out.values.data(), out.values.size() * 4)));
  g.add_node(std::move(k), args);
  const auto report = rt.run(g, std::vector<Device>{Device::gpu});
  EXPECT_EQ(report.nodes.at(0).device, Device::gpu);
  return out;
}

void expect_matches(const Series& got, const Series& want, const char* what) {
  std::size_t mismatched = 0;
  for (std::size_t i = 0; i < got.values.size(); ++i) {
    const float g = got.values[i], w = want.values[i];
    const bool bad = std::isnan(g) != std::isnan(w) ||
                     (!std::isnan(w) && std::abs(g - w) > 1e-4f * std::max(1.0f, std::abs(w)));
    if (bad && mismatched++ < 5) {
      ADD_FAILURE() << what << " at " << i << ": got " << g << ", expected " << w;
    }
  }
  EXPECT_EQ(mismatched, 0u) << what;
}

TEST(FactorGpu, EachOperatorMatchesItsCpuReference) {
  GpuRuntime r;
  SKIP_WITHOUT_GPU(r);
  ASSERT_TRUE(gk::gpu_compiled());
  const std::size_t S = 301, D = 257;
  const gk::Shape shape{S, D};
  Series x = holes_and_ties(S, D, 1), y = holes_and_ties(S, D, 2);
  factors::Market m = factors::generate_market(shape, 3);
  Series close(S, D), volume(S, D);
  close.values = m.close;
  volume.values = m.volume;
  auto& rt = *r.rt;
  namespace g = factors;
  expect_matches(run_on_gpu(rt, gk::moving_mean(shape, 10), {close}), g::moving_mean(close, 10),
                 "moving_mean");
  expect_matches(run_on_gpu(rt, gk::moving_stddev(shape, 20), {close}), g::moving_stddev(close, 20),
                 "moving_stddev");
  expect_matches(run_on_gpu(rt, gk::moving_correlation(shape, 10), {close, volume}),
                 g::moving_correlation(close, volume, 10), "moving_correlation");
  expect_matches(run_on_gpu(rt, gk::moving_mean(shape, 5), {x}), g::moving_mean(x, 5),
                 "moving_mean with holes");
  expect_matches(run_on_gpu(rt, gk::delta(shape, 3), {x}), g::delta(x, 3), "delta");
  expect_matches(run_on_gpu(rt, gk::rank(shape), {x}), g::rank(x), "rank with ties and holes");
  expect_matches(run_on_gpu(rt, gk::rank(shape), {close}), g::rank(close), "rank");
  // rank by a block per day up to 1024, 4096 and 8192 stocks, by the segmented sort beyond:
  // each way at its limits, with holes and ties.
  for (const std::size_t stocks : {1024u, 1025u, 4096u, 4097u, 8192u, 8193u}) {
    const Series t = holes_and_ties(stocks, 3, static_cast<unsigned>(stocks));
    expect_matches(run_on_gpu(rt, gk::rank({stocks, 3}), {t}), g::rank(t),
                   ("rank of " + std::to_string(stocks) + " stocks").c_str());
  }
  expect_matches(run_on_gpu(rt, gk::scale(shape), {x}), g::scale(x), "scale");
  expect_matches(run_on_gpu(rt, gk::multiply(shape), {x, y}), g::multiply(x, y), "multiply");
  expect_matches(run_on_gpu(rt, gk::subtract(shape), {x, y}), g::subtract(x, y), "subtract");
}

// The GPU kernels' launch functions run on the runtime's dispatcher thread and must not wait for
// the GPU: rank's, enqueued behind its producer's input copies and kernel, returns long before
// it starts. (CUB's DeviceSegmentedSort, which rank used before, copies its partition's sizes to
// the host and synchronizes the stream: its launch lasted until after rank's first kernels.)
TEST(FactorGpu, LaunchesDoNotWaitForTheGpu) {
  GpuRuntime r;
  SKIP_WITHOUT_GPU(r);
  const gk::Shape shape{4000, 4000};  // 64 MB per series: its copies in alone take > 1 ms
  factors::Market m = factors::generate_market(shape, 5);
  weft::graph::Graph g;
  auto close = g.add_data("close", m.close.data(), shape.bytes());
  auto volume = g.add_data("volume", m.volume.data(), shape.bytes());
  auto corr = g.add_data("corr", shape.bytes());
  Series out(shape.stocks, shape.days, -1.0f);
  auto ranked = g.add_data("ranked", out.values.data(), shape.bytes());
  g.add_node(gk::moving_correlation(shape, 20),
             {weft::graph::read(close), weft::graph::read(volume), weft::graph::write(corr)});
  g.add_node(gk::rank(shape), {weft::graph::read(corr), weft::graph::write(ranked)});
  for (int run = 0; run < 2; ++run) {  // the second with the scratch pools warm
    const auto report = r.rt->run(g, std::vector<Device>{Device::gpu, Device::gpu});
    ASSERT_EQ(report.nodes.size(), 2u);
    for (const auto& n : report.nodes) {
      SCOPED_TRACE("node " + std::to_string(n.node) + ", run " + std::to_string(run));
      EXPECT_GT(n.start, 0.001) << "the input copies alone should take over 1 ms";
      EXPECT_LT(n.launch_seconds, 0.25 * n.start) << "the launch waited for the GPU";
    }
  }
  Series close_series(shape.stocks, shape.days), volume_series(shape.stocks, shape.days);
  close_series.values = m.close;
  volume_series.values = m.volume;
  const Series want = factors::rank(factors::moving_correlation(close_series, volume_series, 20));
  expect_matches(out, want, "rank(correlation) at 4000 x 4000");
}

#if WEFT_HAVE_CUDA
// Runs `g` while CUDA's one callback thread is held for 300 ms by a host function on a stream
// of its own, launched first: every host callback of the run waits behind it.
weft::graph::RunReport run_with_callback_thread_held(weft::graph::Runtime& rt,
                                                     weft::graph::Graph& g,
                                                     const std::vector<Device>& mapping) {
  cudaStream_t holder = nullptr;
  EXPECT_EQ(cudaStreamCreateWithFlags(&holder, cudaStreamNonBlocking), cudaSuccess);
  EXPECT_EQ(cudaLaunchHostFunc(
                holder, [](void*) { std::this_thread::sleep_for(std::chrono::milliseconds(300)); },
                nullptr),
            cudaSuccess);
  auto report = rt.run(g, mapping);
  EXPECT_EQ(cudaStreamSynchronize(holder), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(holder), cudaSuccess);
  return report;
}

// A chain of GPU nodes runs back to back even while CUDA's callback thread, which runs every
// host function, is held (here by a host function of the test's own that sleeps 300 ms; in the
// bench by 16 busy workers keeping it off the cores): the runtime's completion callbacks go on
// notify streams beside the compute streams, so no kernel waits for one. With the callbacks on
// the compute stream each next kernel waited until the held thread had run its predecessor's.
TEST(FactorGpu, ChainedKernelsDoNotWaitForHostCallbacks) {
  GpuRuntime r;
  SKIP_WITHOUT_GPU(r);
  const gk::Shape shape{1000, 1000};
  Series x = holes_and_ties(shape.stocks, shape.days, 7);
  weft::graph::Graph g;
  auto in = g.add_data("x", x.values.data(), shape.bytes());
  auto a = g.add_data("a", shape.bytes());
  auto b = g.add_data("b", shape.bytes());
  Series out(shape.stocks, shape.days, -1.0f);
  auto c = g.add_data("c", out.values.data(), shape.bytes());
  g.add_node(gk::delta(shape, 1), {weft::graph::read(in), weft::graph::write(a)});
  g.add_node(gk::moving_mean(shape, 5), {weft::graph::read(a), weft::graph::write(b)});
  g.add_node(gk::delta(shape, 2), {weft::graph::read(b), weft::graph::write(c)});
  const std::vector<Device> all_gpu(3, Device::gpu);
  (void)r.rt->run(g, all_gpu);  // warm: device memory allocated, kernels loaded

  const auto report = run_with_callback_thread_held(*r.rt, g, all_gpu);

  ASSERT_EQ(report.nodes.size(), 3u);
  std::vector<weft::graph::NodeRecord> chain(report.nodes);
  std::sort(chain.begin(), chain.end(),
            [](const auto& p, const auto& q) { return p.node < q.node; });
  for (std::size_t i = 1; i < chain.size(); ++i) {
    EXPECT_LT(chain[i].start - chain[i - 1].end, 0.02)
        << "node " << i << " started " << (chain[i].start - chain[i - 1].end) * 1e3
        << " ms after its producer ended";
  }
  EXPECT_GT(report.seconds, 0.2) << "the callback thread was not held: the test tests nothing";
  const Series want = factors::delta(factors::moving_mean(factors::delta(x, 1), 5), 2);
  expect_matches(out, want, "delta(moving_mean(delta(x, 1), 5), 2)");
}

// What comes back to the host is enqueued with the kernel that produces it, not when the
// dispatcher hears (through a host callback) that the kernel ended: with CUDA's callback
// thread held for 300 ms, a GPU output that a CPU node reads and a user's buffer whose last
// writer is a GPU node must each start copying back right after their kernel.
TEST(FactorGpu, CopiesBackDoNotWaitForHostCallbacks) {
  GpuRuntime r;
  SKIP_WITHOUT_GPU(r);
  const gk::Shape shape{1000, 1000};
  Series x = holes_and_ties(shape.stocks, shape.days, 9);
  weft::graph::Graph g;
  auto in = g.add_data("x", x.values.data(), shape.bytes());
  auto a = g.add_data("a", shape.bytes());
  Series out(shape.stocks, shape.days, -1.0f), mean(shape.stocks, shape.days, -1.0f);
  auto c = g.add_data("c", out.values.data(), shape.bytes());
  auto m = g.add_data("m", mean.values.data(), shape.bytes());
  g.add_node(gk::delta(shape, 1), {weft::graph::read(in), weft::graph::write(a)});
  g.add_node(gk::moving_mean(shape, 5), {weft::graph::read(a), weft::graph::write(c)});
  g.add_node(gk::average(shape), {weft::graph::read(a), weft::graph::write(m)});
  const std::vector<Device> mapping{Device::gpu, Device::gpu, Device::cpu};
  (void)r.rt->run(g, mapping);  // warm: device memory allocated, kernels loaded

  const auto report = run_with_callback_thread_held(*r.rt, g, mapping);

  std::vector<double> end(3, -1);
  for (const auto& n : report.nodes) end[n.node] = n.end;
  int back = 0;
  for (const auto& t : report.transfers) {
    if (t.to_device) continue;
    ++back;
    // `a` comes from node 0 and `c` from node 1 (data indices in order of add_data).
    ASSERT_TRUE(t.data == 1 || t.data == 2) << "an unexpected copy back of data " << t.data;
    const double producer_end = end[t.data == 1 ? 0 : 1];
    EXPECT_LT(t.start - producer_end, 0.02)
        << "data " << t.data << " started back " << (t.start - producer_end) * 1e3
        << " ms after its producer ended";
  }
  EXPECT_EQ(back, 2);
  EXPECT_GT(report.seconds, 0.2) << "the callback thread was not held: the test tests nothing";
  expect_matches(out, factors::moving_mean(factors::delta(x, 1), 5), "moving_mean(delta(x, 1), 5)");
  expect_matches(mean, factors::average(factors::delta(x, 1)), "average(delta(x, 1))");
}
#endif

TEST(FactorGpu, EveryPipelineMatchesItsReferenceUnderEveryPolicy) {
  GpuRuntime r;
  SKIP_WITHOUT_GPU(r);
  factors::Market market = factors::generate_market({1000, 700}, 4);
  for (const auto& app : factors::applications()) {
    const Series want = app.reference(market);
    factors::BuiltApp built = app.build(market);
    for (Policy p : {Policy::a_free, Policy::d_map}) {
      (void)r.rt->run(*built.graph, p);
      const auto cmp = factors::compare(built.output, want);
      EXPECT_TRUE(cmp.ok()) << app.name << " " << weft::graph::to_string(p) << ": "
                            << cmp.mismatched << " mismatched, max error " << cmp.max_abs_error;
    }
  }
}

}  // namespace
