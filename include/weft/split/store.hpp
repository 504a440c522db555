// weft/split/store.hpp - the split tables kept across runs, in the SQLite database of the
// calibration store (weft/graph/mapping/model_store.hpp; by default
// ~/.local/share/weft/models.db), keyed by machine, region and device. A save is one SQLite
// transaction (WAL, synchronous=FULL): a process killed mid-save leaves the previous tables
// whole, never half of the new ones.
//
//   weft::split::SplitStore store(weft::split::SplitStore::default_path());
//   splitter.attach(store, "h100-node");   // load what was learned, save after every region
//
// Tables are stored with a fingerprint of what they were learned for (the cores taking part,
// the buckets, the size range, how DB2 is shared). Loading under a different fingerprint
// reports them invalidated and leaves the caller's tables as they were (the prior): a split
// learned for 15 cores says nothing about 7. The device's key names the GPU and its driver, so
// that a new driver or card starts from the prior too.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "weft/split/tables.hpp"

namespace weft::split {

struct SplitKey {
  std::string machine;
  std::string region;
  std::string device;
  friend bool operator==(const SplitKey&, const SplitKey&) = default;
};

/// What a set of tables was learned for: tables stored under another fingerprint are not used.
/// It ends with the CPU's model (` cpu="..."`) of the machine that computes it.
std::string fingerprint_of(const SplitTables& tables);
/// A fingerprint without its CPU part: what the row's format and options say, whichever CPU
/// learned it (a store shared by several machines lists every machine's tables).
std::string fingerprint_without_cpu(const std::string& fingerprint);

/// One stored set of tables.
struct StoredSplit {
  SplitKey key;
  std::string fingerprint;
  std::string updated;  // UTC, ISO 8601
  SplitTables tables;
};

/// An open split store. Not thread-safe: one owner (several processes may share the file:
/// SQLite locks it). Without SQLite at build time (available() is false) the constructor throws
/// weft::InvalidState.
class SplitStore {
 public:
  enum class Load { loaded, absent, invalidated };
  /// read_write: the store and its table are created if needed. read_only (`weft split show`):
  /// the file must exist and no data is written to it (closing it as a WAL store's last
  /// connection, SQLite moves what a writer committed from the -wal file into the store and
  /// removes the -wal and -shm files); a store without split tables lists none, and save and
  /// reset throw weft::InvalidState.
  enum class Mode { read_write, read_only };

  /// Opens the database at `path`. Throws weft::Error naming the path and SQLite's message when
  /// it cannot, weft::InvalidArgument for an empty path (SQLite's temporary database, lost at
  /// exit) or for a file holding tables that are not weft's (another application's database:
  /// naming them, and leaving the file as it was).
  explicit SplitStore(const std::string& path, Mode mode = Mode::read_write);
  ~SplitStore();
  SplitStore(const SplitStore&) = delete;
  SplitStore& operator=(const SplitStore&) = delete;

  /// The calibration store's file, weft::graph::ModelStore::default_path(), with its directory
  /// created.
  static std::string default_path();

  /// Saves `tables` under `key`, replacing what was there, atomically. Throws
  /// weft::InvalidArgument for an empty machine, region or device, weft::Error when SQLite fails
  /// (nothing is then changed).
  void save(const SplitKey& key, const SplitTables& tables);
  /// Restores into `tables` what is stored under `key` when it was stored with `tables`'
  /// fingerprint (loaded); leaves `tables` as it was otherwise (absent, invalidated). Throws
  /// weft::Error for a row that cannot be read back.
  Load load(const SplitKey& key, SplitTables& tables) const;
  /// Every stored set of tables, or those of one machine, ordered by machine, region, device.
  /// Sets stored by a weft whose rows held another format, and rows that cannot be read back,
  /// are left out, and counted in `stale` when given (reset() removes them).
  [[nodiscard]] std::vector<StoredSplit> list(const std::string& machine = "",
                                              std::size_t* stale = nullptr) const;
  /// Removes the tables of `machine` (every machine when empty) and `region` (every region when
  /// empty); returns how many sets were removed.
  std::size_t reset(const std::string& machine, const std::string& region);

  /// Whether weft was built with SQLite.
  static bool available() noexcept;

 private:
  struct Db;
  std::unique_ptr<Db> db_;
};

}  // namespace weft::split
