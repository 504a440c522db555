// The calibration store where weft was built without SQLite's header (the GPU machine of the
// device tool has the library but not the header): every use says so.
#include "weft/error.hpp"
#include "weft/graph/mapping/model_store.hpp"

namespace weft::graph {

struct ModelStore::Db {};

bool ModelStore::available() noexcept { return false; }

ModelStore::ModelStore(const std::string& path) {
  throw InvalidState("weft::graph::ModelStore (" + path +
                     "): weft was built without SQLite (install libsqlite3-dev and rebuild)");
}
ModelStore::~ModelStore() = default;
void ModelStore::put(const ModelKey&, const LinearCostModel&, double) {}
std::optional<StoredModel> ModelStore::get(const ModelKey&) const { return std::nullopt; }
std::vector<StoredModel> ModelStore::list(const std::string&) const { return {}; }
bool ModelStore::erase(const ModelKey&) { return false; }

}  // namespace weft::graph
