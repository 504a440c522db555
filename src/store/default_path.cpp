// Where the calibration store lives by default (weft::graph::ModelStore::default_path): built
// with or without SQLite, so that tools can name the file either way.
#include <cstdlib>
#include <filesystem>
#include <string>

#include "weft/graph/mapping/model_store.hpp"

namespace weft::graph {

std::string ModelStore::default_path() {
  if (const char* env = std::getenv("WEFT_MODELS_DB"); env != nullptr && *env != '\0') return env;
  std::filesystem::path base;
  if (const char* xdg = std::getenv("XDG_DATA_HOME"); xdg != nullptr && *xdg != '\0') {
    base = xdg;
  } else if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    base = std::filesystem::path(home) / ".local" / "share";
  } else {
    base = std::filesystem::current_path();
  }
  return (base / "weft" / "models.db").string();
}

}  // namespace weft::graph
