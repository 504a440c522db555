// src/store/sqlite_db.hpp: SQLite's C API in two RAII types.
#include "store/sqlite_db.hpp"

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <iterator>
#include <thread>

#include "weft/error.hpp"

namespace weft::store {

SqliteDb::SqliteDb(std::string owner, std::string path, Mode mode)
    : owner_(std::move(owner)), path_(std::move(path)) {
  try {
    open(mode);
  } catch (...) {
    sqlite3_close(handle_);  // a constructor that throws runs no destructor
    throw;
  }
}

void SqliteDb::open(Mode mode) {
  refuse_foreign_file();
  // read_only: SQLite's read-write connection all the same (never CREATE), read-only only where
  // the file is write-protected: closing it as the last connection removes a WAL file's -wal
  // and -shm files, as a writer's close does, where a read-only connection would leave them
  // behind. weft writes nothing through it (the stores refuse writes themselves), and a
  // foreign file was refused before the open (refuse_foreign_file).
  const int flags =
      mode == Mode::read_only ? SQLITE_OPEN_READWRITE : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
  if (sqlite3_open_v2(path_.c_str(), &handle_, flags, nullptr) != SQLITE_OK) {
    // SQLite says only "unable to open database file"; the usual reason is worth naming.
    std::error_code ec;
    const std::filesystem::path dir = std::filesystem::path(path_).parent_path();
    if (!dir.empty() && !std::filesystem::is_directory(dir, ec)) {
      fail("opening (directory " + dir.string() + " does not exist)");
    }
    fail("opening");
  }
  sqlite3_busy_timeout(handle_, static_cast<int>(kPatience.count()));  // another process writing
  refuse_foreign();  // before the journal mode, which is written to the file
  if (mode == Mode::read_only) return;
  exec_waiting("PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;", "setting the journal mode",
               kPatience);
}

namespace {

// Tables only: a view, index or trigger a user adds over weft's tables does not make the file
// another application's; SQLite's own tables start with "sqlite_".
constexpr const char* kTablesSql =
    "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' "
    "ESCAPE '\\' ORDER BY name";

// "'a', 'b'": the tables of `db` that are not weft's; false when the schema cannot be read.
bool foreign_tables(sqlite3* db, std::string& foreign) {
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v2(db, kTablesSql, -1, &s, nullptr) != SQLITE_OK) return false;
  int rc = 0;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    const auto* text = sqlite3_column_text(s, 0);
    const std::string table = text != nullptr ? reinterpret_cast<const char*>(text) : "";
    if (std::find(std::begin(kWeftTables), std::end(kWeftTables), table) != std::end(kWeftTables))
      continue;
    foreign += (foreign.empty() ? "'" : ", '") + table + "'";
  }
  sqlite3_finalize(s);
  return rc == SQLITE_DONE;
}

// The file as an SQLite URI that opens it immutable: '%', '?' and '#' escaped (the rest of a
// path stands as it is), absolute so that no "//" reads as an authority.
std::string immutable_uri(const std::string& path) {
  std::string uri = "file:";
  for (const char c : std::filesystem::absolute(path).lexically_normal().string()) {
    if (c == '%' || c == '?' || c == '#') {
      static constexpr char kHex[] = "0123456789ABCDEF";
      uri += '%';
      uri += kHex[static_cast<unsigned char>(c) >> 4];
      uri += kHex[static_cast<unsigned char>(c) & 0xF];
    } else {
      uri += c;
    }
  }
  return uri + "?immutable=1";
}

}  // namespace

void SqliteDb::refuse_foreign_file() const {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path_, ec) || std::filesystem::file_size(path_, ec) == 0) {
    return;  // a new store, or what the open itself will refuse with its own reason
  }
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(immutable_uri(path_).c_str(), &db,
                                 SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, nullptr);
  std::string foreign;
  const bool read = rc == SQLITE_OK && foreign_tables(db, foreign);
  const std::string message = db != nullptr ? sqlite3_errmsg(db) : "out of memory";
  sqlite3_close(db);
  if (!read) throw Error(owner_ + " (" + path_ + "): reading the schema: " + message);
  if (!foreign.empty()) refuse(foreign);
}

void SqliteDb::refuse_foreign() {
  std::string foreign;
  if (!foreign_tables(handle_, foreign)) fail("reading the schema");
  if (foreign.empty()) return;
  sqlite3_db_config(handle_, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr);
  refuse(foreign);
}

void SqliteDb::refuse(const std::string& tables) const {
  throw InvalidArgument(owner_ + " (" + path_ + "): not a weft store: it holds table(s) " + tables +
                        " of another application (left as they are)");
}

bool SqliteDb::has_table(const char* name) const {
  SqliteStatement s(*this, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1");
  s.text(1, name);
  const int rc = s.step();
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) fail("reading the schema");
  return rc == SQLITE_ROW;
}

SqliteDb::~SqliteDb() { sqlite3_close(handle_); }  // statements are finalised by their owners first

void SqliteDb::fail(const std::string& what) const {
  const std::string message = handle_ != nullptr ? sqlite3_errmsg(handle_) : "out of memory";
  throw Error(owner_ + " (" + path_ + "): " + what + ": " + message);
}

void SqliteDb::exec_waiting(const char* sql, const char* what, std::chrono::milliseconds patience) {
  const auto deadline = std::chrono::steady_clock::now() + patience;
  for (;;) {
    char* message = nullptr;
    const int rc = sqlite3_exec(handle_, sql, nullptr, nullptr, &message);
    if (rc == SQLITE_OK) return;
    const std::string m = message != nullptr ? message : "";
    sqlite3_free(message);
    if ((rc == SQLITE_BUSY || rc == SQLITE_LOCKED) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    throw Error(owner_ + " (" + path_ + "): " + what + ": " + m);
  }
}

int SqliteDb::changes() const noexcept { return sqlite3_changes(handle_); }

SqliteStatement::SqliteStatement(const SqliteDb& db, const std::string& sql) {
  if (sqlite3_prepare_v2(db.handle(), sql.c_str(), -1, &stmt_, nullptr) != SQLITE_OK) {
    db.fail("preparing a statement");
  }
}

SqliteStatement::~SqliteStatement() { sqlite3_finalize(stmt_); }

void SqliteStatement::text(int i, const std::string& v) {
  sqlite3_bind_text(stmt_, i, v.c_str(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
}
void SqliteStatement::real(int i, double v) { sqlite3_bind_double(stmt_, i, v); }
void SqliteStatement::integer(int i, std::int64_t v) { sqlite3_bind_int64(stmt_, i, v); }
int SqliteStatement::step() { return sqlite3_step(stmt_); }

std::string SqliteStatement::column_text(int i) const {
  const auto* t = sqlite3_column_text(stmt_, i);
  return t != nullptr ? reinterpret_cast<const char*>(t) : "";
}
double SqliteStatement::column_real(int i) const { return sqlite3_column_double(stmt_, i); }
std::int64_t SqliteStatement::column_integer(int i) const { return sqlite3_column_int64(stmt_, i); }

std::string utc_now() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace weft::store
