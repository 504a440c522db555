// A calibration's measurements fitted at once (calibration.hpp): every model the least-squares
// fit of all its runs, whatever their order; CPU runs by their share beside copies.
#include "weft/graph/mapping/calibration.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "weft/error.hpp"

namespace {

using weft::graph::Calibration;
using weft::graph::CostModels;
using weft::graph::CostSample;
using weft::graph::Device;
using weft::graph::Graph;
using weft::graph::Kernel;
using weft::graph::NodeRecord;
using weft::graph::RunReport;
using weft::graph::TransferRecord;

// One node of kernel "k" (CPU and GPU implementations that are never called here).
struct OneNode {
  std::vector<float> in = std::vector<float>(4), out = std::vector<float>(4);
  Graph g;
  OneNode() {
    auto x = g.add_data("x", in.data(), in.size() * sizeof(float));
    auto y = g.add_data("y", out.data(), out.size() * sizeof(float));
    g.add_node(
        Kernel{"k", [](const weft::graph::CpuCall&) {}, [](const weft::graph::GpuCall&) {}, {}},
        {weft::graph::read(x), weft::graph::write(y)});
  }
};

RunReport run_of(Device d, double size, double seconds, double overlap = 0) {
  RunReport r;
  NodeRecord n;
  n.node = 0;
  n.device = d;
  n.size = static_cast<std::size_t>(size);
  n.start = 1.0;
  n.end = 1.0 + seconds;
  n.copy_overlap = overlap;
  r.nodes.push_back(n);
  return r;
}

}  // namespace

// Ten runs at the small size, then two hundred at the large one: the fit goes through both
// sizes' means, however many runs came later at the other size (RLS with forgetting would have
// let the small size fade).
// A time that is not finite or negative, or a node the graph does not have, is refused before
// anything is kept: such a sample would make every later fit throw.
TEST(Calibration, BadTimesAndNodesAreRefusedBeforeAnythingIsKept) {
  Graph g;
  g.add_node(Kernel{"k", [](const weft::graph::CpuCall&) {}, {}, {}}, {});
  Calibration c;
  RunReport r;
  NodeRecord n;
  n.end = std::nan("");
  r.nodes = {n};
  EXPECT_THROW(c.add(g, r), weft::InvalidArgument);
  r.nodes[0].end = -1.0;
  EXPECT_THROW(c.add(g, r), weft::InvalidArgument);
  r.nodes[0].end = 1.0;
  r.nodes[0].node = 3;
  EXPECT_THROW(c.add(g, r), weft::InvalidArgument);
  r.nodes[0].node = 0;
  TransferRecord t;
  t.end = std::nan("");
  r.transfers = {t};
  EXPECT_THROW(c.add(g, r), weft::InvalidArgument);
  r.transfers.clear();
  Graph other;  // a report of another graph: its node 0 is not this graph's node 0
  other.add_node(Kernel{"other's", [](const weft::graph::CpuCall&) {}, {}, {}}, {});
  r.graph = other.id();
  EXPECT_THROW(c.add(g, r), weft::InvalidArgument);
  EXPECT_EQ(c.size(), 0u);  // nothing of the refused reports was kept
  EXPECT_NO_THROW(c.add(other, r));
}

TEST(Calibration, EveryModelIsTheFitOfAllItsRuns) {
  OneNode app;
  Calibration cal;
  std::mt19937_64 rng(3);
  std::normal_distribution<double> noise(0.0, 0.03);
  // `runs` runs of `bytes`, each taking the mean time times noise, with a copy in of half that;
  // returns the sum of the runs' times.
  auto add_runs = [&](int runs, std::size_t bytes, double mean) {
    double sum = 0;
    for (int i = 0; i < runs; ++i) {
      const double t = mean * (1 + noise(rng));
      sum += t;
      RunReport r = run_of(Device::gpu, static_cast<double>(bytes), t);
      TransferRecord tr;
      tr.to_device = true;
      tr.bytes = bytes;
      tr.start = 0;
      tr.end = t / 2;
      r.transfers.push_back(tr);
      cal.add(app.g, r);
    }
    return sum;
  };
  const double small_sum = add_runs(10, 25'600'000, 1e-3);
  const double large_sum = add_runs(200, 256'000'000, 1e-2);
  EXPECT_EQ(cal.size(), 420u);
  CostModels models;
  models.fit("gpu", "k", std::vector<CostSample>{{1, 5.0}, {2, 5.0}});  // replaced below
  EXPECT_EQ(cal.fit_into(models), 2u);
  EXPECT_NEAR(models.predict("gpu", "k", 25.6e6), small_sum / 10, 1e-12);
  EXPECT_NEAR(models.predict("gpu", "k", 256e6), large_sum / 200, 1e-12);
  EXPECT_NEAR(models.predict("gpu", weft::graph::kTransferToDevice, 25.6e6), small_sum / 20, 1e-12);
  EXPECT_EQ(models.pending("gpu", "k"), 0u);
}

// CPU runs alone make the kernel's own model; runs beside copies then seed its model beside
// copies from it (CostModels::observe_cpu); runs in between teach neither.
TEST(Calibration, CpuRunsGoByTheirShareBesideCopies) {
  OneNode app;
  Calibration cal;
  for (double size : {1e6, 2e6}) {
    cal.add(app.g, run_of(Device::cpu, size, size * 1e-9, 0.0));    // alone: 1 ns per byte
    cal.add(app.g, run_of(Device::cpu, size, size * 1.5e-9, 1.0));  // beside copies: 1.5
    cal.add(app.g, run_of(Device::cpu, size, 1.0, 0.3));            // between: ignored
  }
  cal.add(app.g, run_of(Device::cpu, 4e6, 4e6 * 1.5e-9, 1.0));
  CostModels models;
  EXPECT_EQ(cal.fit_into(models), 1u);
  EXPECT_NEAR(models.predict_cpu("k", 8e6, 0.0), 8e-3, 1e-12);
  EXPECT_NEAR(models.predict_cpu("k", 8e6, 1.0), 12e-3, 1e-12);
}

// Measured at one size only: the runs wait as observations for a second size, as run by run.
TEST(Calibration, OneSizeOnlyLeavesObservationsPending) {
  OneNode app;
  Calibration cal;
  for (int i = 0; i < 3; ++i) cal.add(app.g, run_of(Device::gpu, 1e6, 1e-3));
  CostModels models;
  EXPECT_EQ(cal.fit_into(models), 0u);
  EXPECT_EQ(models.find("gpu", "k"), nullptr);
  EXPECT_EQ(models.pending("gpu", "k"), 3u);
  EXPECT_THROW(models.fit("gpu", "k", std::vector<CostSample>{{1e6, 1e-3}, {1e6, 2e-3}}),
               weft::InvalidArgument);
  EXPECT_EQ(models.pending("gpu", "k"), 3u);  // a refused fit changes nothing
}
