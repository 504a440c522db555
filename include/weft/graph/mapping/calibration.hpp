// weft/graph/mapping/calibration.hpp - a calibration is a designed experiment: runs at chosen sizes
// whose measurements are fitted together. Learning run by run instead (CostModels::observe: RLS
// with forgetting) lets the last runs outweigh the first: calibrated at a small size and then
// at a large one, a line through the large size's many runs can be far off at the small size,
// and the mappers then map the small size wrongly. So the runs are collected and every model is
// the least-squares fit of all of them, each size weighing by its runs, not by its order
// (docs/decisions/028-calibration-fits-all-runs-at-once.md).
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
