// The split store where weft was built without SQLite: every use says so.
#include "weft/error.hpp"
#include "weft/graph/mapping/model_store.hpp"
#include "weft/split/store.hpp"

namespace weft::split {

struct SplitStore::Db {};

bool SplitStore::available() noexcept { return false; }
std::string SplitStore::default_path() { return graph::ModelStore::default_path(); }

SplitStore::SplitStore(const std::string& path, Mode) {
  throw InvalidState("weft::split::SplitStore (" + path +
                     "): weft was built without SQLite (install libsqlite3-dev and rebuild)");
}
SplitStore::~SplitStore() = default;
void SplitStore::save(const SplitKey&, const SplitTables&) {}
SplitStore::Load SplitStore::load(const SplitKey&, SplitTables&) const { return Load::absent; }
std::vector<StoredSplit> SplitStore::list(const std::string&, std::size_t*) const { return {}; }
std::size_t SplitStore::reset(const std::string&, const std::string&) { return 0; }

}  // namespace weft::split
