// weft/graph/cost_models.hpp - the predictors a graph runtime maps with (DESIGN.md §3): one
// LinearCostModel per (device, kernel) over the bytes a node's arguments span, and one per
// transfer direction over bytes; learnt from measured runs and kept in a ModelStore between
// runs.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "weft/graph/cost_model.hpp"
#include "weft/graph/model_store.hpp"

namespace weft::graph {

/// The transfer models' kernel names (their device is "gpu").
inline constexpr const char* kTransferToDevice = "transfer:h2d";
inline constexpr const char* kTransferToHost = "transfer:d2h";

/// Cost models by (device, kernel); devices are "cpu" and "gpu". Not thread-safe (the runtime
/// owns one and updates it between runs).
///
/// @code
///   weft::graph::CostModels models;
///   models.observe("gpu", "moving_mean", 1 << 26, 0.0009);  // kept until a second size...
///   models.observe("gpu", "moving_mean", 1 << 28, 0.0035);  // ...then fitted, then RLS
///   double t = models.predict("gpu", "moving_mean", 1 << 27);
/// @endcode
class CostModels {
 public:
  /// Sets (replaces) a model.
  void set(const std::string& device, const std::string& kernel, LinearCostModel model);
  [[nodiscard]] const LinearCostModel* find(const std::string& device,
                                            const std::string& kernel) const;
  /// The model's prediction. Throws InvalidState naming the device and kernel when there is no
  /// model yet ("calibrate first").
  [[nodiscard]] double predict(const std::string& device, const std::string& kernel,
                               double size) const;
  /// A measurement: refines the model by RLS, or, before there is one, is kept until
  /// measurements at two distinct sizes allow a least-squares fit. Throws InvalidArgument for a
  /// negative or non-finite size or time.
  void observe(const std::string& device, const std::string& kernel, double size, double seconds);
  /// Measurements still waiting for a second size, per (device, kernel).
  [[nodiscard]] std::size_t pending(const std::string& device, const std::string& kernel) const;

  /// Every model: ((device, kernel), model), ordered.
  [[nodiscard]] std::vector<std::pair<std::pair<std::string, std::string>, LinearCostModel>> list()
      const;

  /// Loads every model of `machine` from `store` (replacing those of the same keys); returns
  /// how many. Throws InvalidArgument for an empty machine name.
  std::size_t load(const ModelStore& store, const std::string& machine);
  /// Stores every model under `machine`, each with its fit error over the measurements it saw
  /// most recently (up to 64).
  void save(ModelStore& store, const std::string& machine) const;

 private:
  struct Entry {
    std::optional<LinearCostModel> model;
    std::vector<CostSample> recent;  // the last measurements (for the fit, then the error)
  };
  std::map<std::pair<std::string, std::string>, Entry> entries_;
};

}  // namespace weft::graph
