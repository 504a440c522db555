// weft models: the cost models in the calibration store
// (include/weft/graph/mapping/model_store.hpp).
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>

#include "commands.hpp"
#include "weft/graph/mapping/model_store.hpp"

namespace weft::tools {

std::string default_models_path() { return weft::graph::ModelStore::default_path(); }

int run_models(const ModelsArgs& args) {
  const std::string path = args.db.empty() ? default_models_path() : args.db;
  if (!std::filesystem::exists(path)) {
    std::printf("no models: %s does not exist yet (weft calibrate writes it)\n", path.c_str());
    return 0;
  }
  const weft::graph::ModelStore store(path);
  const auto models = store.list(args.machine);
  if (models.empty()) {
    std::printf("no models in %s%s%s\n", path.c_str(), args.machine.empty() ? "" : " for ",
                args.machine.c_str());
    return 0;
  }
  std::printf(
      "%s: %zu model(s); time = a + b * size (seconds; size in elements, bytes for "
      "transfers)\n",
      path.c_str(), models.size());
  std::printf("%-16s %-8s %-24s %12s %12s %6s %9s %7s  %s\n", "machine", "device", "kernel",
              "a (s)", "b (s/unit)", "runs", "fit error", "spread", "updated");
  for (const auto& m : models) {
    // The spread: the typical |measured - predicted| / predicted of recent runs ("-": none yet).
    char spread[16] = "      -";
    if (std::isfinite(m.model.spread())) {
      std::snprintf(spread, sizeof spread, "%6.1f%%", 100.0 * m.model.spread());
    }
    std::printf("%-16s %-8s %-24s %12.4g %12.4g %6zu %8.1f%% %7s  %s\n", m.key.machine.c_str(),
                m.key.device.c_str(), m.key.kernel.c_str(), m.model.intercept(), m.model.slope(),
                m.model.observations(), 100.0 * m.fit_error, spread, m.updated.c_str());
  }
  return 0;
}

}  // namespace weft::tools
