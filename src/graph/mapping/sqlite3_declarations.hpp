// The part of SQLite's C API that model_store.cpp uses, declared here for machines that have
// the SQLite shared library but not its header (the GPU machines: libsqlite3.so.0 is installed,
// libsqlite3-dev is not, and nothing can be installed there). Used only when CMake finds no
// sqlite3.h (cmake/WeftDependencies.cmake); with the header, the header is used.
//
// Why declaring them ourselves is safe: these functions and constants are SQLite 3's stable C
// ABI (unchanged since 3.5 or earlier, and SQLite promises not to change them within version 3);
// the prototypes below are copied from sqlite3.h's documentation.
#pragma once

#include <cstdint>

extern "C" {
struct sqlite3;
struct sqlite3_stmt;
using sqlite3_int64 = long long;
using sqlite3_destructor_type = void (*)(void*);

int sqlite3_open_v2(const char* filename, sqlite3** db, int flags, const char* vfs);
int sqlite3_close(sqlite3* db);
int sqlite3_busy_timeout(sqlite3* db, int ms);
const char* sqlite3_errmsg(sqlite3* db);
int sqlite3_exec(sqlite3* db, const char* sql, int (*callback)(void*, int, char**, char**),
                 void* arg, char** errmsg);
void sqlite3_free(void* p);
int sqlite3_changes(sqlite3* db);
int sqlite3_prepare_v2(sqlite3* db, const char* sql, int bytes, sqlite3_stmt** stmt,
                       const char** tail);
int sqlite3_finalize(sqlite3_stmt* stmt);
int sqlite3_step(sqlite3_stmt* stmt);
int sqlite3_bind_text(sqlite3_stmt* stmt, int index, const char* text, int bytes,
                      sqlite3_destructor_type destructor);
int sqlite3_bind_double(sqlite3_stmt* stmt, int index, double value);
int sqlite3_bind_int64(sqlite3_stmt* stmt, int index, sqlite3_int64 value);
const unsigned char* sqlite3_column_text(sqlite3_stmt* stmt, int column);
double sqlite3_column_double(sqlite3_stmt* stmt, int column);
sqlite3_int64 sqlite3_column_int64(sqlite3_stmt* stmt, int column);
int sqlite3_db_config(sqlite3* db, int op, ...);
}

// Result codes and open flags (sqlite3.h: "Result Codes", "Flags For File Open Operations").
inline constexpr int SQLITE_OK = 0;
inline constexpr int SQLITE_BUSY = 5;
inline constexpr int SQLITE_LOCKED = 6;
inline constexpr int SQLITE_ROW = 100;
inline constexpr int SQLITE_DONE = 101;
inline constexpr int SQLITE_OPEN_READONLY = 0x00000001;
inline constexpr int SQLITE_OPEN_READWRITE = 0x00000002;
inline constexpr int SQLITE_OPEN_CREATE = 0x00000004;
inline constexpr int SQLITE_OPEN_URI = 0x00000040;
// sqlite3.h: "Database Connection Configuration Options" (since 3.16).
inline constexpr int SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE = 1010;
// sqlite3.h defines SQLITE_TRANSIENT as ((sqlite3_destructor_type)-1): "copy the value now".
#define SQLITE_TRANSIENT (reinterpret_cast<sqlite3_destructor_type>(static_cast<std::intptr_t>(-1)))
