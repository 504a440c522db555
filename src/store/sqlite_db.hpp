// An SQLite database handle and prepared statements (src only): the few calls of SQLite's C API
// that weft's stores use (the cost-model store, the split tables), wrapped in two RAII types.
// A dozen calls need no C++ wrapper library. Every error names the store, its path and SQLite's
// message.
#pragma once

#if WEFT_SQLITE_OWN_DECLARATIONS
#include "graph/mapping/sqlite3_declarations.hpp"  // the library without its header (see there)
#else
#include <sqlite3.h>
#endif

#include <chrono>
#include <cstdint>
#include <string>

namespace weft::store {

/// An open database in WAL mode with synchronous=FULL: a writer never blocks readers, a crash
/// (even a power cut) leaves the last committed transaction, and a reader never sees half of one.
/// Not thread-safe: one owner.
///
/// Only weft's own file is opened: one whose tables are all weft stores' (kWeftTables; a new,
/// empty database has none). Every store shares the calibration store's file, and a path given
/// by mistake may name another application's database, which must not be written to.
class SqliteDb {
 public:
  /// How long a busy database (another process writing) is waited for.
  static constexpr std::chrono::milliseconds kPatience{5000};
  /// read_write: the file is created if needed and switched to WAL. read_only: the file must
  /// exist, and nothing is written to it (any journal mode is read as it is), but for what
  /// closing a WAL file does as its last connection: committed pages move from the -wal file
  /// into it, and the -wal and -shm files go.
  enum class Mode { read_write, read_only };

  /// Opens the database at `path`; `owner` prefixes every error ("weft::graph::ModelStore").
  /// Throws weft::InvalidArgument, naming the path and the tables that are not weft's, for
  /// another application's database, before anything is written to it; weft::Error naming the
  /// path and the reason when it cannot open it (a file that is not a database included).
  SqliteDb(std::string owner, std::string path, Mode mode = Mode::read_write);
  ~SqliteDb();
  SqliteDb(const SqliteDb&) = delete;
  SqliteDb& operator=(const SqliteDb&) = delete;

  [[nodiscard]] sqlite3* handle() const noexcept { return handle_; }
  [[nodiscard]] const std::string& path() const noexcept { return path_; }

  /// Throws weft::Error: "<owner> (<path>): <what>: <SQLite's last message>".
  [[noreturn]] void fail(const std::string& what) const;
  /// Runs `sql` (one or more statements). Throws weft::Error naming `what` on failure.
  void exec(const char* sql, const char* what) { exec_waiting(sql, what, {}); }
  /// As exec, but a busy or locked database is tried again for up to `patience`: switching the
  /// journal mode does not wait through the busy handler, and two processes opening one new
  /// store at once both switch it.
  void exec_waiting(const char* sql, const char* what, std::chrono::milliseconds patience);
  /// Rows the last INSERT, UPDATE or DELETE changed.
  [[nodiscard]] int changes() const noexcept;
  /// Whether the database has a table of that name.
  [[nodiscard]] bool has_table(const char* name) const;

 private:
  void open(Mode mode);
  /// Throws InvalidArgument when the file at path_ holds tables that are not weft's, read on a
  /// connection of its own that writes nothing, takes no lock and replays no journal
  /// (immutable=1): the check leaves another application's file as it was, its log included.
  void refuse_foreign_file() const;
  /// The same on this connection (tables written only to a log the first check could not see);
  /// a refusal turns off the checkpoint its close would make.
  void refuse_foreign();
  [[noreturn]] void refuse(const std::string& tables) const;

  std::string owner_;
  std::string path_;
  sqlite3* handle_ = nullptr;
};

/// The tables of weft's stores (the cost models', the split tables'): a file holding any other
/// table is not weft's.
inline constexpr const char* kWeftTables[] = {"cost_models", "split_tables"};

/// One prepared statement, finalised on scope exit. Parameters are numbered from 1, columns
/// from 0, as in SQLite.
class SqliteStatement {
 public:
  SqliteStatement(const SqliteDb& db, const std::string& sql);
  ~SqliteStatement();
  SqliteStatement(const SqliteStatement&) = delete;
  SqliteStatement& operator=(const SqliteStatement&) = delete;

  void text(int i, const std::string& v);
  void real(int i, double v);
  void integer(int i, std::int64_t v);
  /// SQLITE_ROW, SQLITE_DONE or an error code.
  int step();
  [[nodiscard]] std::string column_text(int i) const;
  [[nodiscard]] double column_real(int i) const;
  [[nodiscard]] std::int64_t column_integer(int i) const;

 private:
  sqlite3_stmt* stmt_ = nullptr;
};

/// The current time, UTC, ISO 8601 ("2026-11-27T11:30:00Z").
std::string utc_now();

}  // namespace weft::store
