// weft/graph/mapping/calibration.hpp - a calibration is a designed experiment: runs at chosen sizes
// whose measurements are fitted together. Learning run by run instead (CostModels::observe: RLS
// with forgetting) lets the last runs outweigh the first. On the H100, calibrated at 32m and then
// at 320m floats, D-Map of factor2 at 32m was predicted at 4.3 ms and measured 2.0, and PPTM mapped
// it all to the CPU, 2.1x slower (bench/results/h100/probes/graph-5a8a0de.log); its GPU kernels'
// models were right, so by inference the three copies' models were ~0.9 ms high each at 32m:
// the 320m copies, 10x as many bytes and most of the runs, had moved the line's intercept. So
// the runs are collected and every model is the least-squares fit of all of them.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "weft/graph/graph.hpp"
#include "weft/graph/mapping/cost_models.hpp"
#include "weft/graph/runtime.hpp"

namespace weft::graph {

/// The measurements of calibration runs (run them with Runtime::set_learning(false)), fitted at
/// once into a CostModels.
///
/// @code
///   weft::graph::Calibration cal;
///   rt.set_learning(false);
///   for (...) cal.add(graph, rt.run(graph, Policy::a_free));  // at two sizes or more
///   cal.fit_into(rt.models());
/// @endcode
class Calibration {
 public:
  /// Every node of `report` (a run of `graph`) and every transfer.
  void add(const Graph& graph, const RunReport& report);
  /// Replaces each model measured at two distinct sizes or more by the least-squares fit of
  /// its measurements (CostModels::fit); a CPU kernel's own model from its runs below
  /// kAloneMaxOverlap of their time beside copies, and then its runs at or above
  /// kBesideCopiesMinOverlap teach its model beside copies (CostModels::observe_cpu). Models
  /// measured at one size only get their measurements as observations (kept until a second
  /// size comes). Returns how many models were fitted.
  std::size_t fit_into(CostModels& models) const;
  /// Measurements collected so far.
  [[nodiscard]] std::size_t size() const noexcept { return count_; }

 private:
  struct CpuRun {
    double size, seconds, overlap;
  };
  std::map<std::pair<std::string, std::string>, std::vector<CostSample>> plain_;  // gpu, transfers
  std::map<std::string, std::vector<CpuRun>> cpu_;                                // by kernel
  std::size_t count_ = 0;
};

}  // namespace weft::graph
