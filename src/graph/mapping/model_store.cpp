// The calibration store on SQLite (include/weft/graph/mapping/model_store.hpp), through the
// RAII wrappers of src/store/sqlite_db.hpp.
#include "weft/graph/mapping/model_store.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "store/sqlite_db.hpp"
#include "weft/error.hpp"

namespace weft::graph {

namespace {

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS cost_models (
  machine TEXT NOT NULL,
  device TEXT NOT NULL,
  kernel TEXT NOT NULL,
  intercept REAL NOT NULL,
  slope REAL NOT NULL,
  p00 REAL NOT NULL,
  p01 REAL NOT NULL,
  p11 REAL NOT NULL,
  p_trace_limit REAL NOT NULL,
  forgetting REAL NOT NULL,
  observations INTEGER NOT NULL,
  fit_error REAL NOT NULL,
  updated TEXT NOT NULL,
  spread REAL NOT NULL DEFAULT 9e999,
  one_sided INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (machine, device, kernel)
);)sql";

// Columns added after the first stores were written: a store without one gets it, with its
// default for the rows already there (9e999 is SQLite's infinity: a spread not known yet; no
// measurements beyond the clip yet).
struct AddedColumn {
  const char* name;
  const char* add;
};
constexpr AddedColumn kAddedColumns[] = {
    {"spread", "ALTER TABLE cost_models ADD COLUMN spread REAL NOT NULL DEFAULT 9e999"},
    {"one_sided", "ALTER TABLE cost_models ADD COLUMN one_sided INTEGER NOT NULL DEFAULT 0"},
};

constexpr const char* kColumns =
    "machine, device, kernel, intercept, slope, p00, p01, p11, p_trace_limit, forgetting, "
    "observations, fit_error, updated, spread, one_sided";

void check_key(const ModelKey& k, const char* what) {
  if (k.machine.empty() || k.device.empty() || k.kernel.empty()) {
    throw InvalidArgument(std::string("weft::graph::ModelStore::") + what +
                          ": machine, device and kernel must not be empty");
  }
}

}  // namespace

struct ModelStore::Db {
  explicit Db(const std::string& path) : sqlite("weft::graph::ModelStore", path) {}
  store::SqliteDb sqlite;
};

namespace {

using Statement = store::SqliteStatement;

// Binds the key to ?1..?3 (machine, device, kernel).
void bind_key(Statement& s, const ModelKey& key) {
  s.text(1, key.machine);
  s.text(2, key.device);
  s.text(3, key.kernel);
}

StoredModel read_row(const Statement& s) {
  StoredModel m;
  m.key = {s.column_text(0), s.column_text(1), s.column_text(2)};
  LinearCostModel::State st;
  st.intercept = s.column_real(3);
  st.slope = s.column_real(4);
  st.p00 = s.column_real(5);
  st.p01 = s.column_real(6);
  st.p11 = s.column_real(7);
  st.p_trace_limit = s.column_real(8);
  st.forgetting = s.column_real(9);
  st.observations = static_cast<std::size_t>(s.column_integer(10));
  st.spread = s.column_real(13);
  st.one_sided = static_cast<int>(s.column_integer(14));
  m.model = LinearCostModel::from_state(st);
  m.fit_error = s.column_real(11);
  m.updated = s.column_text(12);
  return m;
}

}  // namespace

bool ModelStore::available() noexcept { return true; }

namespace {

// SQLite opens a temporary database for "": what it learned would be lost at exit.
const std::string& non_empty_path(const std::string& path) {
  if (path.empty()) throw InvalidArgument("weft::graph::ModelStore: an empty path");
  return path;
}

}  // namespace

ModelStore::ModelStore(const std::string& path) : db_(std::make_unique<Db>(non_empty_path(path))) {
  store::SqliteDb& db = db_->sqlite;
  db.exec(kSchema, "creating the table");
  auto missing_columns = [&] {
    std::vector<std::string> columns;
    Statement info(db, "PRAGMA table_info(cost_models)");
    while (info.step() == SQLITE_ROW) columns.push_back(info.column_text(1));
    std::vector<const AddedColumn*> missing;
    for (const AddedColumn& c : kAddedColumns) {
      if (std::find(columns.begin(), columns.end(), c.name) == columns.end()) missing.push_back(&c);
    }
    return missing;
  };
  if (missing_columns().empty()) return;  // the usual case: no write lock taken
  // An older store. Another process may be upgrading it at this moment: the check and the
  // ALTERs are one write transaction (BEGIN IMMEDIATE takes the write lock first, waiting up
  // to the busy timeout), so whoever comes second finds the columns added, not a "duplicate
  // column" error.
  db.exec_waiting("BEGIN IMMEDIATE", "locking the store to upgrade it", store::SqliteDb::kPatience);
  try {
    for (const AddedColumn* c : missing_columns()) {
      db.exec(c->add, (std::string("adding the ") + c->name + " column").c_str());
    }
    db.exec("COMMIT", "upgrading the store");
  } catch (...) {
    sqlite3_exec(db.handle(), "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

ModelStore::~ModelStore() = default;

void ModelStore::put(const ModelKey& key, const LinearCostModel& model, double fit_error) {
  check_key(key, "put");
  const LinearCostModel::State st = model.state();
  // One statement is one transaction (autocommit): all of the row or none of it.
  Statement s(db_->sqlite,
              std::string("INSERT OR REPLACE INTO cost_models (") + kColumns +
                  ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)");
  bind_key(s, key);
  s.real(4, st.intercept);
  s.real(5, st.slope);
  s.real(6, st.p00);
  s.real(7, st.p01);
  s.real(8, st.p11);
  s.real(9, st.p_trace_limit);
  s.real(10, st.forgetting);
  s.integer(11, static_cast<std::int64_t>(st.observations));
  s.real(12, fit_error);
  s.text(13, store::utc_now());
  s.real(14, st.spread);
  s.integer(15, st.one_sided);
  if (s.step() != SQLITE_DONE) db_->sqlite.fail("storing " + key.kernel + " on " + key.device);
}

std::optional<StoredModel> ModelStore::get(const ModelKey& key) const {
  Statement s(db_->sqlite,
              std::string("SELECT ") + kColumns +
                  " FROM cost_models WHERE machine = ?1 AND device = ?2 AND kernel = ?3");
  bind_key(s, key);
  const int rc = s.step();
  if (rc == SQLITE_ROW) return read_row(s);
  if (rc != SQLITE_DONE) db_->sqlite.fail("reading " + key.kernel);
  return std::nullopt;
}

std::vector<StoredModel> ModelStore::list(const std::string& machine) const {
  Statement s(
      db_->sqlite,
      std::string("SELECT ") + kColumns +
          " FROM cost_models WHERE ?1 = '' OR machine = ?1 ORDER BY machine, device, kernel");
  s.text(1, machine);
  std::vector<StoredModel> out;
  for (int rc; (rc = s.step()) != SQLITE_DONE;) {
    if (rc != SQLITE_ROW) db_->sqlite.fail("listing");
    out.push_back(read_row(s));
  }
  return out;
}

bool ModelStore::erase(const ModelKey& key) {
  check_key(key, "erase");
  Statement s(db_->sqlite,
              "DELETE FROM cost_models WHERE machine = ?1 AND device = ?2 AND kernel = ?3");
  bind_key(s, key);
  if (s.step() != SQLITE_DONE) db_->sqlite.fail("erasing " + key.kernel);
  return db_->sqlite.changes() > 0;
}

}  // namespace weft::graph
