#include "weft/graph/mapping/calibration.hpp"
#include "weft/error.hpp"

#include <algorithm>
#include <cmath>
#include <string>

namespace weft::graph {

namespace {

bool two_sizes(const std::vector<CostSample>& s) {
  return std::any_of(s.begin(), s.end(),
                     [&](const CostSample& x) { return x.size != s.front().size; });
}

}  // namespace

void Calibration::add(const Graph& graph, const RunReport& report) {
  // Another graph's report names its own nodes by index: it would teach this graph's kernels
  // another's times.
  if (report.graph != 0 && report.graph != graph.id()) {
    throw InvalidArgument("weft::graph::Calibration::add: the report is of another graph");
  }
  // Every time first, before anything is kept: a bad sample would make every later fit throw.
  auto check = [](double seconds, const std::string& what) {
    if (!std::isfinite(seconds) || seconds < 0) {
      throw InvalidArgument("weft::graph::Calibration::add: " + what + "'s time " +
                            std::to_string(seconds) + " must be finite and >= 0");
    }
  };
  for (const NodeRecord& n : report.nodes) {
    if (n.node >= graph.num_nodes()) {
      throw InvalidArgument("weft::graph::Calibration::add: node " + std::to_string(n.node) +
                            " of a report is not in the graph (" +
                            std::to_string(graph.num_nodes()) + " nodes)");
    }
    check(n.end - n.start, "node " + std::to_string(n.node));
  }
  for (const TransferRecord& t : report.transfers) check(t.end - t.start, "a transfer");
  for (const NodeRecord& n : report.nodes) {
    const std::string& kernel = graph.kernel(graph.node_at(n.node)).name;
    const auto size = static_cast<double>(n.size);
    if (n.device == Device::cpu) {
      cpu_[kernel].push_back({size, n.end - n.start, n.copy_overlap});
    } else {
      plain_[{"gpu", kernel}].push_back({size, n.end - n.start});
    }
    ++count_;
  }
  for (const TransferRecord& t : report.transfers) {
    plain_[{"gpu", t.to_device ? kTransferToDevice : kTransferToHost}].push_back(
        {static_cast<double>(t.bytes), t.end - t.start});
    ++count_;
  }
}

std::size_t Calibration::fit_into(CostModels& models) const {
  std::size_t fitted = 0;
  auto fit_or_observe = [&](const std::string& device, const std::string& kernel,
                            const std::vector<CostSample>& samples) {
    if (samples.empty()) return;
    if (two_sizes(samples)) {
      models.fit(device, kernel, samples);
      ++fitted;
    } else {
      for (const CostSample& s : samples) models.observe(device, kernel, s.size, s.seconds);
    }
  };
  for (const auto& [key, samples] : plain_) fit_or_observe(key.first, key.second, samples);
  for (const auto& [kernel, runs] : cpu_) {
    std::vector<CostSample> alone;
    for (const CpuRun& r : runs) {
      if (r.overlap < kAloneMaxOverlap) alone.push_back({r.size, r.seconds});
    }
    fit_or_observe("cpu", kernel, alone);
    // Then the runs beside copies, scaled by the own model just fitted (observe_cpu).
    for (const CpuRun& r : runs) {
      if (r.overlap >= kBesideCopiesMinOverlap) {
        models.observe_cpu(kernel, r.size, r.seconds, r.overlap);
      }
    }
  }
  return fitted;
}

}  // namespace weft::graph
