// weft/graph/mapping/cost_models.hpp - the predictors a graph runtime maps with: one
// LinearCostModel per (device, kernel) over the bytes a node's arguments span, and one per
// transfer direction over bytes; learnt from measured runs and kept in a ModelStore between
// runs.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "weft/graph/mapping/cost_model.hpp"
#include "weft/graph/mapping/model_store.hpp"

namespace weft::graph {

/// The transfer models' kernel names (their device is "gpu").
inline constexpr const char* kTransferToDevice = "transfer:h2d";
inline constexpr const char* kTransferToHost = "transfer:d2h";

/// A CPU kernel runs slower while host<->device copies are in flight: the copy engines take
/// host memory bandwidth from it, and one model learning both kinds of run would be off both
/// ways (docs/decisions/029-cpu-kernels-have-a-model-beside-copies.md). So a CPU kernel has two
/// models:
/// its own ("delta") from runs with a share of their time beside copies below
/// kAloneMaxOverlap, and one beside copies ("delta+copies": the kernel name with this suffix),
/// of its time with copies in flight throughout, from runs at or above
/// kBesideCopiesMinOverlap (scaled up to a whole overlap from the own model); runs in between
/// teach neither. The thresholds are shares of a run's own time, so they hold on any machine:
/// below one tenth a run is alone for the model's purpose, from one half on it is mostly
/// beside copies, and the scaling to a whole overlap does the rest.
inline constexpr const char* kBesideCopies = "+copies";
inline constexpr double kAloneMaxOverlap = 0.1;
inline constexpr double kBesideCopiesMinOverlap = 0.5;
/// The model beside copies starts as the kernel's own line times the median slowdown of this
/// many runs beside copies (at any sizes), then learns by RLS like every model.
inline constexpr std::size_t kBesideCopiesSeedRuns = 3;

/// Whether `kernel` is a key the models above keep for themselves: a transfer (starting with
/// "transfer:") or a model beside copies (ending with kBesideCopies). A kernel of that name would
/// share their models, in memory and in the store, so Graph::add_node refuses it.
[[nodiscard]] bool is_reserved_model_key(std::string_view kernel) noexcept;

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
  /// A CPU kernel with copies in flight for a share `overlap` (0..1) of its time: its own model's
  /// time, moved that share of the way toward its model beside copies when there is one.
  /// Throws InvalidState when the kernel has no CPU model, InvalidArgument for an overlap
  /// outside [0, 1].
  [[nodiscard]] double predict_cpu(const std::string& kernel, double size, double overlap) const;
  /// A CPU kernel's measured run with copies in flight for a share `overlap` of it: teaches its
  /// own model below kAloneMaxOverlap (and always while it has none: without it the run could
  /// not be scaled), the model beside copies at or above kBesideCopiesMinOverlap, with the time
  /// scaled to a whole overlap, own + (seconds - own) / overlap (seeded after
  /// kBesideCopiesSeedRuns such runs); runs in between teach neither.
  /// Throws like observe, and InvalidArgument for an overlap outside [0, 1].
  void observe_cpu(const std::string& kernel, double size, double seconds, double overlap);
  /// Sets the model to the least-squares fit of `samples` (LinearCostModel::fit: at least two
  /// distinct sizes, else InvalidArgument), replacing any, and keeps the last of them as the
  /// measurements its stored fit error is computed over (save).
  void fit(const std::string& device, const std::string& kernel,
           std::span<const CostSample> samples);
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
