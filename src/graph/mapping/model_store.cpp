// The calibration store on SQLite (include/weft/graph/mapping/model_store.hpp). The C API directly:
// a dozen calls, wrapped in two small RAII types, need no C++ wrapper library.
#include "weft/graph/mapping/model_store.hpp"

#if WEFT_SQLITE_OWN_DECLARATIONS
#include "sqlite3_declarations.hpp"  // the library without its header (see there)
#else
#include <sqlite3.h>
#endif

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

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

std::string utc_now() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

void check_key(const ModelKey& k, const char* what) {
  if (k.machine.empty() || k.device.empty() || k.kernel.empty()) {
    throw InvalidArgument(std::string("weft::graph::ModelStore::") + what +
                          ": machine, device and kernel must not be empty");
  }
}

}  // namespace

struct ModelStore::Db {
  sqlite3* handle = nullptr;
  std::string path;

  ~Db() { sqlite3_close(handle); }  // statements are finalised by their owners first

  [[noreturn]] void fail(const std::string& what) const {
    throw Error("weft::graph::ModelStore (" + path + "): " + what + ": " +
                (handle != nullptr ? sqlite3_errmsg(handle) : "out of memory"));
  }
  void exec(const char* sql, const char* what) { exec_waiting(sql, what, std::chrono::seconds(0)); }
  // As exec, but a busy or locked database is tried again for up to `patience`: switching the
  // journal mode does not wait through the busy handler, and two processes opening one new
  // store at once both switch it.
  void exec_waiting(const char* sql, const char* what, std::chrono::milliseconds patience) {
    const auto deadline = std::chrono::steady_clock::now() + patience;
    for (;;) {
      char* message = nullptr;
      const int rc = sqlite3_exec(handle, sql, nullptr, nullptr, &message);
      if (rc == SQLITE_OK) return;
      const std::string m = message != nullptr ? message : "";
      sqlite3_free(message);
      if ((rc == SQLITE_BUSY || rc == SQLITE_LOCKED) &&
          std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        continue;
      }
      throw Error("weft::graph::ModelStore (" + path + "): " + what + ": " + m);
    }
  }
};

namespace {

// One prepared statement, finalised on scope exit.
class Statement {
 public:
  Statement(sqlite3* db, const std::string& sql, const std::string& path) {
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt_, nullptr) != SQLITE_OK) {
      throw Error("weft::graph::ModelStore (" + path +
                  "): preparing a statement: " + sqlite3_errmsg(db));
    }
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  void text(int i, const std::string& v) {
    sqlite3_bind_text(stmt_, i, v.c_str(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  }
  void real(int i, double v) { sqlite3_bind_double(stmt_, i, v); }
  void integer(int i, std::int64_t v) { sqlite3_bind_int64(stmt_, i, v); }
  int step() { return sqlite3_step(stmt_); }
  [[nodiscard]] std::string column_text(int i) const {
    const auto* t = sqlite3_column_text(stmt_, i);
    return t != nullptr ? reinterpret_cast<const char*>(t) : "";
  }
  [[nodiscard]] double column_real(int i) const { return sqlite3_column_double(stmt_, i); }
  [[nodiscard]] std::int64_t column_integer(int i) const { return sqlite3_column_int64(stmt_, i); }

 private:
  sqlite3_stmt* stmt_ = nullptr;
};

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

ModelStore::ModelStore(const std::string& path) : db_(std::make_unique<Db>()) {
  db_->path = path;
  if (sqlite3_open_v2(path.c_str(), &db_->handle, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
                      nullptr) != SQLITE_OK) {
    // SQLite says only "unable to open database file"; the usual reason is worth naming.
    std::error_code ec;
    const std::filesystem::path dir = std::filesystem::path(path).parent_path();
    if (!dir.empty() && !std::filesystem::is_directory(dir, ec)) {
      db_->fail("opening (directory " + dir.string() + " does not exist)");
    }
    db_->fail("opening");
  }
  constexpr std::chrono::milliseconds kPatience{5000};
  sqlite3_busy_timeout(db_->handle,
                       static_cast<int>(kPatience.count()));  // another process writing: wait
  // WAL: a writer never blocks readers and a crash leaves the last committed state;
  // synchronous=FULL: a committed put survives a power cut, not only a crash of this process.
  db_->exec_waiting("PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;", "setting the journal mode",
                    kPatience);
  db_->exec(kSchema, "creating the table");
  auto missing_columns = [&] {
    std::vector<std::string> columns;
    Statement info(db_->handle, "PRAGMA table_info(cost_models)", db_->path);
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
  db_->exec_waiting("BEGIN IMMEDIATE", "locking the store to upgrade it", kPatience);
  try {
    for (const AddedColumn* c : missing_columns()) {
      db_->exec(c->add, (std::string("adding the ") + c->name + " column").c_str());
    }
    db_->exec("COMMIT", "upgrading the store");
  } catch (...) {
    sqlite3_exec(db_->handle, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

ModelStore::~ModelStore() = default;

void ModelStore::put(const ModelKey& key, const LinearCostModel& model, double fit_error) {
  check_key(key, "put");
  const LinearCostModel::State st = model.state();
  // One statement is one transaction (autocommit): all of the row or none of it.
  Statement s(db_->handle,
              std::string("INSERT OR REPLACE INTO cost_models (") + kColumns +
                  ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
              db_->path);
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
  s.text(13, utc_now());
  s.real(14, st.spread);
  s.integer(15, st.one_sided);
  if (s.step() != SQLITE_DONE) db_->fail("storing " + key.kernel + " on " + key.device);
}

std::optional<StoredModel> ModelStore::get(const ModelKey& key) const {
  Statement s(db_->handle,
              std::string("SELECT ") + kColumns +
                  " FROM cost_models WHERE machine = ?1 AND device = ?2 AND kernel = ?3",
              db_->path);
  bind_key(s, key);
  const int rc = s.step();
  if (rc == SQLITE_ROW) return read_row(s);
  if (rc != SQLITE_DONE) db_->fail("reading " + key.kernel);
  return std::nullopt;
}

std::vector<StoredModel> ModelStore::list(const std::string& machine) const {
  Statement s(
      db_->handle,
      std::string("SELECT ") + kColumns +
          " FROM cost_models WHERE ?1 = '' OR machine = ?1 ORDER BY machine, device, kernel",
      db_->path);
  s.text(1, machine);
  std::vector<StoredModel> out;
  for (int rc; (rc = s.step()) != SQLITE_DONE;) {
    if (rc != SQLITE_ROW) db_->fail("listing");
    out.push_back(read_row(s));
  }
  return out;
}

bool ModelStore::erase(const ModelKey& key) {
  check_key(key, "erase");
  Statement s(db_->handle,
              "DELETE FROM cost_models WHERE machine = ?1 AND device = ?2 AND kernel = ?3",
              db_->path);
  bind_key(s, key);
  if (s.step() != SQLITE_DONE) db_->fail("erasing " + key.kernel);
  return sqlite3_changes(db_->handle) > 0;
}

}  // namespace weft::graph
