// weft/graph/mapping/model_store.hpp - the calibration store: cost models that persist across runs
// in an SQLite database, keyed by machine, device and kernel, so that a runtime maps well from its
// first run on a machine it has calibrated before. Every write is one SQLite transaction in WAL
// mode with synchronous=FULL: a crash mid-run loses nothing already stored, and a reader never sees
// half a model.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "weft/graph/mapping/cost_model.hpp"

namespace weft::graph {

/// What a stored model is for: `kernel` is a kernel's registered name, or a transfer
/// ("transfer:h2d", "transfer:d2h"); `device` names the device ("cpu", "gpu0", ...).
struct ModelKey {
  std::string machine;
  std::string device;
  std::string kernel;
  friend bool operator==(const ModelKey&, const ModelKey&) = default;
};

struct StoredModel {
  ModelKey key;
  LinearCostModel model{0.0, 0.0};
  double fit_error = 0;  // median relative error when it was stored (see LinearCostModel)
  std::string updated;   // UTC, ISO 8601, when it was stored
};

/// An open calibration database. Not thread-safe: one owner (several processes may share the
/// file: SQLite locks it). Without SQLite at build time (weft::graph::ModelStore::available()
/// is false) the constructor throws InvalidState.
///
/// @code
///   weft::graph::ModelStore store("weft-models.db");
///   store.put({"h100-node", "gpu0", "moving_mean"}, model, model.median_relative_error(runs));
///   if (auto m = store.get({"h100-node", "gpu0", "moving_mean"})) use(m->model);
/// @endcode
class ModelStore {
 public:
  /// Opens (creating it and its table if needed) the database at `path`. Throws Error naming
  /// the path and SQLite's message when it cannot, InvalidArgument for a file holding tables that
  /// are not weft's (another application's database: naming them, before anything is written).
  explicit ModelStore(const std::string& path);
  ~ModelStore();
  ModelStore(const ModelStore&) = delete;
  ModelStore& operator=(const ModelStore&) = delete;

  /// Stores (or replaces) the model under `key`, atomically. Throws InvalidArgument for an empty
  /// machine, device or kernel name, Error when SQLite fails (nothing is then changed).
  void put(const ModelKey& key, const LinearCostModel& model, double fit_error);
  /// The model stored under `key`, if any.
  [[nodiscard]] std::optional<StoredModel> get(const ModelKey& key) const;
  /// Every model, or those of one machine, ordered by machine, device, kernel.
  [[nodiscard]] std::vector<StoredModel> list(const std::string& machine = "") const;
  /// Removes the model under `key`; returns whether there was one.
  bool erase(const ModelKey& key);

  /// Whether weft was built with SQLite.
  static bool available() noexcept;
  /// Where the store lives unless told otherwise: $WEFT_MODELS_DB, else
  /// $XDG_DATA_HOME/weft/models.db, else ~/.local/share/weft/models.db (the directory may not
  /// exist yet).
  static std::string default_path();

 private:
  struct Db;
  std::unique_ptr<Db> db_;
};

}  // namespace weft::graph
