// The factor pipelines through the graph runtime (CI: the emulated device), and mapping
// decisions from model-given costs on graphs whose optimum is known.
#include "pipelines.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <random>

#include "weft/cpu/executor.hpp"
#include "weft/error.hpp"
#include "weft/graph/runtime.hpp"

namespace {

using weft::graph::Device;
using weft::graph::LinearCostModel;
using weft::graph::Policy;
using weft::graph::Runtime;

weft::graph::RuntimeOptions emulated() {
  weft::graph::RuntimeOptions o;
  o.device = weft::graph::DeviceKind::emulated;
  o.memory.first_region = 1 << 20;
  return o;
}

TEST(Pipelines, EveryApplicationMatchesItsReferenceUnderAnyMapping) {
  weft::cpu::Executor ex;
  Runtime rt(ex, emulated());
  factors::Market market = factors::generate_market({40, 60}, 5);
  std::mt19937 rng(9);
  for (const auto& app : factors::applications()) {
    const factors::Series want = app.reference(market);
    factors::BuiltApp built = app.build(market);
    std::vector<std::vector<Device>> mappings = {rt.map(*built.graph, Policy::a_free),
                                                 rt.map(*built.graph, Policy::d_map)};
    for (int k = 0; k < 8; ++k) {
      auto m = mappings[1];
      for (auto& d : m) d = d == Device::gpu && rng() % 2 ? Device::gpu : Device::cpu;
      mappings.push_back(m);
    }
    for (const auto& m : mappings) {
      std::fill(built.output.begin(), built.output.end(), -7.0f);
      (void)rt.run(*built.graph, m);
      const auto cmp = factors::compare(built.output, want);
      // The emulated device runs the CPU code: the results are the reference's exactly.
      EXPECT_EQ(cmp.mismatched, 0u) << app.name;
      EXPECT_EQ(cmp.max_abs_error, 0.0) << app.name;
    }
  }
}

TEST(Pipelines, ComparisonCountsHolesAndLargeErrors) {
  factors::Series want(1, 4);
  want.values = {1.0f, 2.0f, NAN, 4.0f};
  EXPECT_EQ(factors::compare({1.0f, 2.0f, NAN, 4.0f}, want).mismatched, 0u);
  EXPECT_EQ(factors::compare({1.0f, NAN, NAN, 4.0f}, want).mismatched, 1u);
  EXPECT_EQ(factors::compare({1.0f, 2.0f, 3.0f, 4.0f}, want).mismatched, 1u);
  EXPECT_EQ(factors::compare({1.0f, 2.001f, NAN, 4.1f}, want).mismatched, 1u);  // 0.1 > 4e-3
  EXPECT_FALSE(factors::compare({1.0f, NAN, NAN, 4.0f}, want).ok());
}

TEST(Pipelines, MarketCsvRoundTripsAndBadFilesAreNamed) {
  const factors::Market m = factors::generate_market({3, 5}, 2);
  const std::string path = ::testing::TempDir() + "market.csv";
  factors::save_market_csv(m, path);
  const factors::Market back = factors::load_market_csv(path);
  EXPECT_EQ(back.shape.stocks, 3u);
  EXPECT_EQ(back.shape.days, 5u);
  for (std::size_t i = 0; i < m.shape.count(); ++i) {
    ASSERT_FLOAT_EQ(back.close[i], m.close[i]);
    ASSERT_FLOAT_EQ(back.volume[i], m.volume[i]);
  }
  auto expect_error = [&](const std::string& text, const std::string& needle) {
    const std::string bad = ::testing::TempDir() + "bad.csv";
    std::ofstream(bad) << text;
    try {
      (void)factors::load_market_csv(bad);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const weft::InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  const std::string header = "stock,day,price,open,close,volume,returns\n";
  expect_error("a,b\n", "header");
  expect_error(header + "0,0,1,1,1,1,x\n", "bad.csv:2: column 'returns'");
  expect_error(header + "0,0,1,1,1,1,0\n0,0,1,1,1,1,0\n", "rows for");
  expect_error(header + "0,0,1,1,1,1,0\n1,1,1,1,1,1,0\n", "every stock needs every day");
  expect_error(header + "0,0,1,1,1,1\n", "6 columns");
  EXPECT_THROW((void)factors::load_market_csv("/no/such/file.csv"), weft::InvalidArgument);
  EXPECT_THROW((void)factors::application("factor9"), weft::InvalidArgument);
}

// Cost models shaped like a GPU node's: cross-sectional and windowed kernels gain much on
// the GPU, element-wise ones little, and moving a series costs about as much as a cheap CPU
// operator on it.
void gpu_node_like_models(Runtime& rt) {
  auto& m = rt.models();
  const double per_byte_cpu_cheap = 1e-10, per_byte_transfer = 1e-10;
  for (const char* k : {"delta", "multiply", "subtract", "scale", "moving_mean/5"}) {
    m.set("cpu", k, LinearCostModel(1e-5, per_byte_cpu_cheap));
    m.set("gpu", k, LinearCostModel(1e-5, per_byte_cpu_cheap / 20));
  }
  for (const char* k :
       {"rank", "moving_correlation/10", "moving_correlation/20", "moving_stddev/20"}) {
    m.set("cpu", k, LinearCostModel(1e-5, 30 * per_byte_cpu_cheap));
    m.set("gpu", k, LinearCostModel(1e-5, per_byte_cpu_cheap / 5));
  }
  m.set("cpu", "average", LinearCostModel(1e-5, per_byte_cpu_cheap));
  m.set("gpu", weft::graph::kTransferToDevice, LinearCostModel(1e-5, per_byte_transfer));
  m.set("gpu", weft::graph::kTransferToHost, LinearCostModel(1e-5, per_byte_transfer));
}

TEST(Pipelines, OnAModelledDevicePptmBeatsDMapWhereFencesSitOnTheCriticalPath) {
  weft::cpu::Executor ex;
  Runtime rt(ex, emulated());
  gpu_node_like_models(rt);
  factors::Market market = factors::generate_market({400, 400}, 1);  // 0.64 MB a series
  for (const auto& app : factors::applications()) {
    factors::BuiltApp built = app.build(market);
    const auto problem = rt.problem(*built.graph);
    const double d_map = weft::graph::mapping_cost(problem, rt.map(*built.graph, Policy::d_map));
    const double pptm = weft::graph::mapping_cost(problem, rt.map(*built.graph, Policy::pptm));
    const double cut = weft::graph::mapping_cost(problem, rt.map(*built.graph, Policy::mincut));
    EXPECT_LE(pptm, d_map * (1 + 1e-12)) << app.name;
    EXPECT_LE(cut, pptm * (1 + 1e-12)) << app.name;
  }
  // factor4: delta between two AVG fences gains less than its two transfers: the optimum keeps
  // it on the CPU and PPTM finds it; D-Map sends it to the GPU.
  factors::BuiltApp f4 = factors::application("factor4").build(market);
  const auto pptm = rt.map(*f4.graph, Policy::pptm);
  EXPECT_EQ(pptm[1], Device::cpu);
  EXPECT_EQ(rt.map(*f4.graph, Policy::d_map)[1], Device::gpu);
  EXPECT_EQ(rt.map(*f4.graph, Policy::mincut)[1], Device::cpu);
  // factor3: all heavy work; every node belongs on the GPU.
  factors::BuiltApp f3 = factors::application("factor3").build(market);
  EXPECT_EQ(rt.map(*f3.graph, Policy::pptm), std::vector<Device>(5, Device::gpu));
}

// PPTM's textbook case: ten nodes in a tree whose root v1 and inner node v5 are fences; v9 feeds
// v5, so on the GPU its result must come back to the host: it belongs there only if its gain s9
// exceeds that transfer c9. Tree: v1 <- {v2, v3}; v2 <- {v4, v5}; v3 <- {v6, v7}; v5 <- {v8, v9};
// v7 <- {v10}.
TEST(Pipelines, PptmMapsANodeFeedingAFenceByItsGainAgainstTheReadBack) {
  for (double s9 : {0.5, 3.0}) {  // c9 = 1 (1000 bytes at 1 ms/byte)
    weft::cpu::Executor ex;
    Runtime rt(ex, emulated());
    weft::graph::Graph g;
    const std::size_t bytes = 1000;  // intermediates the graph owns: only v1's leaves the graph
    std::vector<weft::graph::Data> out;
    // (std::string("v") += ..., not "v" + ...: GCC 12 warns falsely about the latter here.)
    auto name = [](int v) { return std::string("v") += std::to_string(v); };
    for (int v = 1; v <= 10; ++v) out.push_back(g.add_data(name(v), bytes));
    auto node = [&](int v, std::vector<int> children) {
      weft::graph::Kernel k{name(v), [](const weft::graph::CpuCall&) {}, {}, {}};
      if (v != 1 && v != 5) k.gpu = [](const weft::graph::GpuCall&) {};
      std::vector<weft::graph::Arg> args;
      for (int c : children) args.push_back(weft::graph::read(out[c - 1]));
      args.push_back(weft::graph::write(out[v - 1]));
      g.add_node(k, args, name(v));
      const double gain = v == 9 ? s9 : 4.0;
      rt.models().set("cpu", k.name, LinearCostModel(gain + 1.0, 0));
      rt.models().set("gpu", k.name, LinearCostModel(1.0, 0));
    };
    for (int v : {4, 8, 9, 10, 6}) node(v, {});
    node(5, {8, 9});
    node(7, {10});
    node(2, {4, 5});
    node(3, {6, 7});
    node(1, {2, 3});
    rt.models().set("gpu", weft::graph::kTransferToDevice, LinearCostModel(0, 1e-3));
    rt.models().set("gpu", weft::graph::kTransferToHost, LinearCostModel(0, 1e-3));
    const auto pptm = rt.map(g, Policy::pptm);
    const auto cut = rt.map(g, Policy::mincut);
    const std::size_t v9 = 2;  // the order nodes were added: v4, v8, v9, ...
    EXPECT_EQ(g.label(g.node_at(v9)), "v9");
    EXPECT_EQ(pptm[v9], s9 > 1.0 ? Device::gpu : Device::cpu) << "s9 = " << s9;
    EXPECT_EQ(cut[v9], pptm[v9]) << "s9 = " << s9;
    const auto p = rt.problem(g);
    EXPECT_DOUBLE_EQ(weft::graph::mapping_cost(p, pptm), weft::graph::mapping_cost(p, cut));
  }
}

}  // namespace
