// The split tables' store on SQLite (include/weft/split/store.hpp). A set of tables is one row:
// what it was learned for in columns, the learned rates as text (numbers separated by spaces),
// so that a save is one INSERT OR REPLACE, all of it or none.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "store/sqlite_db.hpp"
#include "weft/error.hpp"
#include "weft/graph/mapping/model_store.hpp"
#include "weft/split/store.hpp"

namespace weft::split {

namespace {

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS split_tables (
  machine TEXT NOT NULL,
  region TEXT NOT NULL,
  device TEXT NOT NULL,
  fingerprint TEXT NOT NULL,
  cores INTEGER NOT NULL,
  buckets INTEGER NOT NULL,
  window INTEGER NOT NULL,
  min_share REAL NOT NULL,
  core_shares INTEGER NOT NULL,
  core_class TEXT NOT NULL,
  prior_gpu REAL NOT NULL,
  prior_cpu REAL NOT NULL,
  size_set INTEGER NOT NULL,
  size_min REAL NOT NULL,
  size_max REAL NOT NULL,
  bucket_state TEXT NOT NULL,
  share_rates TEXT NOT NULL,
  updated TEXT NOT NULL,
  PRIMARY KEY (machine, region, device)
);)sql";

constexpr const char* kColumns =
    "machine, region, device, fingerprint, cores, buckets, window, min_share, core_shares, "
    "core_class, prior_gpu, prior_cpu, size_set, size_min, size_max, bucket_state, share_rates, "
    "updated";

constexpr const char* kOwner = "weft::split::SplitStore";

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::string join(const std::vector<double>& v) {
  std::string s;
  for (double x : v) {
    if (!s.empty()) s += ' ';
    s += number(x);
  }
  return s;
}

std::vector<double> numbers(const std::string& text) {
  std::vector<double> out;
  std::istringstream in(text);
  std::string word;
  while (in >> word) out.push_back(std::strtod(word.c_str(), nullptr));
  return out;
}

// One line per measured bucket: "b regions last_used last_balanced since_split window_split
// applied_split |
// gpu rates | cpu rates | split costs | GPU-alone costs | CPU-alone costs".
std::string encode_buckets(const SplitTables& t) {
  std::string s;
  for (std::size_t b = 0; b < t.buckets().size(); ++b) {
    const Bucket& k = t.buckets()[b];
    if (k.regions == 0) continue;
    s += std::to_string(b) + ' ' + std::to_string(k.regions) + ' ' + number(k.last_used) + ' ' +
         number(k.last_balanced) + ' ' + std::to_string(k.since_split) + ' ' +
         number(k.window_split) + ' ' + number(k.applied_split);
    for (const RateEstimate* r :
         {&k.gpu_rate, &k.cpu_rate, &k.split_cost, &k.gpu_alone_cost, &k.cpu_alone_cost}) {
      s += " | " + join(r->recent());
    }
    s += '\n';
  }
  return s;
}

std::string encode_share_rates(const SplitTables& t) {
  std::string s;
  for (const RateEstimate& r : t.share_rates()) s += join(r.recent()) + '\n';
  return s;
}

std::vector<std::string> split_on(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(text);
  while (std::getline(in, part, sep)) parts.push_back(part);
  return parts;
}

void decode_into(SplitTables& t, const std::string& bucket_state, const std::string& share_rates,
                 const std::string& what) {
  for (const std::string& line : split_on(bucket_state, '\n')) {
    if (line.empty()) continue;
    const std::vector<std::string> parts = split_on(line, '|');
    const std::vector<double> head = parts.empty() ? std::vector<double>{} : numbers(parts[0]);
    if (parts.size() != 6 || head.size() != 7 || !(head[0] >= 0) ||
        head[0] >= static_cast<double>(t.buckets().size())) {
      throw Error(std::string(kOwner) + ": " + what + ": a bucket row cannot be read: '" + line +
                  "'");
    }
    // Counters are whole numbers >= 0 (a negative one would come back near 2^64).
    for (const std::size_t counter : {std::size_t{1}, std::size_t{4}}) {
      if (!(head[counter] >= 0) || head[counter] != std::floor(head[counter]) ||
          head[counter] > 1e15) {
        throw Error(std::string(kOwner) + ": " + what + ": a bucket row's counter is not a " +
                    "count: '" + line + "'");
      }
    }
    Bucket k;
    k.regions = static_cast<std::uint64_t>(head[1]);
    k.last_used = head[2];
    k.last_balanced = head[3];
    k.since_split = static_cast<std::uint64_t>(head[4]);
    k.window_split = head[5];
    k.applied_split = head[6];
    RateEstimate* windows[] = {&k.gpu_rate, &k.cpu_rate, &k.split_cost, &k.gpu_alone_cost,
                               &k.cpu_alone_cost};
    for (std::size_t i = 0; i < 5; ++i) {
      *windows[i] = RateEstimate(kMaxWindow);  // restore_bucket keeps the tables' window
      for (double v : numbers(parts[i + 1])) windows[i]->add(v);
    }
    t.restore_bucket(static_cast<std::size_t>(head[0]), k);
  }
  const std::vector<std::string> lines = split_on(share_rates, '\n');
  if (lines.size() != t.share_rates().size()) {
    throw Error(std::string(kOwner) + ": " + what + ": " + std::to_string(lines.size()) +
                " share rates stored for " + std::to_string(t.share_rates().size()));
  }
  for (std::size_t i = 0; i < lines.size(); ++i) t.restore_share_rate(i, numbers(lines[i]));
}

void check_key(const SplitKey& k, const char* what) {
  if (k.machine.empty() || k.region.empty() || k.device.empty()) {
    throw InvalidArgument(std::string(kOwner) + "::" + what +
                          ": machine, region and device must not be empty");
  }
  // A control character (NUL included) would make keys that list alike and cannot be typed.
  for (const std::string* s : {&k.machine, &k.region, &k.device}) {
    for (const char c : *s) {
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
        throw InvalidArgument(std::string(kOwner) + "::" + what +
                              ": a key with a control character (machine, region or device)");
      }
    }
  }
}

std::string describe(const SplitKey& k) { return k.region + " on " + k.machine + "/" + k.device; }

std::vector<std::size_t> classes_of(const std::string& text) {
  std::vector<std::size_t> out;
  for (double v : numbers(text)) out.push_back(static_cast<std::size_t>(v));
  return out;
}

// SQLite opens a temporary database for "": what it learned would be lost at exit.
const std::string& non_empty_path(const std::string& path) {
  if (path.empty()) throw InvalidArgument("weft::split::SplitStore: an empty path");
  return path;
}

// The tables a row describes, before their learned state is restored.
SplitTables tables_of(const store::SqliteStatement& s) {
  SplitOptions o;
  o.buckets = static_cast<std::size_t>(s.column_integer(5));
  o.window = static_cast<std::size_t>(s.column_integer(6));
  o.min_share = s.column_real(7);
  o.core_shares = static_cast<CoreShares>(s.column_integer(8));
  o.core_class = classes_of(s.column_text(9));
  SplitTables t(static_cast<std::size_t>(s.column_integer(4)),
                {s.column_real(10), s.column_real(11)}, o);
  if (s.column_integer(12) != 0) t.set_size_range(s.column_real(13), s.column_real(14));
  return t;
}

}  // namespace

struct SplitStore::Db {
  Db(const std::string& path, Mode mode)
      : sqlite(kOwner, path,
               mode == Mode::read_only ? store::SqliteDb::Mode::read_only
                                       : store::SqliteDb::Mode::read_write),
        read_only(mode == Mode::read_only) {}
  store::SqliteDb sqlite;
  bool read_only;
  bool has_table = false;  // read-only, a calibration store may have no split tables yet

  void check_writable(const char* what) const {
    if (read_only) {
      throw InvalidState(std::string(kOwner) + " (" + sqlite.path() + "): " + what +
                         ": the store was opened read-only");
    }
  }
};

bool SplitStore::available() noexcept { return true; }

std::string SplitStore::default_path() {
  const std::string path = graph::ModelStore::default_path();
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!dir.empty()) std::filesystem::create_directories(dir, ec);  // opening names a failure
  return path;
}

SplitStore::SplitStore(const std::string& path, Mode mode)
    : db_(std::make_unique<Db>(non_empty_path(path), mode)) {
  if (mode == Mode::read_only) {
    db_->has_table = db_->sqlite.has_table("split_tables");
    return;
  }
  db_->sqlite.exec(kSchema, "creating the table");
  db_->has_table = true;
}

SplitStore::~SplitStore() = default;

void SplitStore::save(const SplitKey& key, const SplitTables& t) {
  check_key(key, "save");
  db_->check_writable("saving");
  const SplitOptions& o = t.options();
  std::string classes;
  for (std::size_t c : o.core_class) classes += std::to_string(c) + ' ';
  // One statement is one transaction (autocommit): all of the row or none of it.
  store::SqliteStatement s(db_->sqlite, std::string("INSERT OR REPLACE INTO split_tables (") +
                                            kColumns +
                                            ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, "
                                            "?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)");
  s.text(1, key.machine);
  s.text(2, key.region);
  s.text(3, key.device);
  s.text(4, fingerprint_of(t));
  s.integer(5, static_cast<std::int64_t>(t.cores()));
  s.integer(6, static_cast<std::int64_t>(o.buckets));
  s.integer(7, static_cast<std::int64_t>(o.window));
  s.real(8, o.min_share);
  s.integer(9, static_cast<std::int64_t>(o.core_shares));
  s.text(10, classes);
  s.real(11, t.prior().gpu);
  s.real(12, t.prior().cpu);
  s.integer(13, t.size_range_set() ? 1 : 0);
  s.real(14, o.size_min);
  s.real(15, o.size_max);
  s.text(16, encode_buckets(t));
  s.text(17, encode_share_rates(t));
  s.text(18, store::utc_now());
  if (s.step() != SQLITE_DONE) db_->sqlite.fail("saving " + describe(key));
}

SplitStore::Load SplitStore::load(const SplitKey& key, SplitTables& tables) const {
  check_key(key, "load");
  if (!db_->has_table) return Load::absent;
  store::SqliteStatement s(db_->sqlite, std::string("SELECT ") + kColumns +
                                            " FROM split_tables WHERE machine = ?1 AND region = "
                                            "?2 AND device = ?3");
  s.text(1, key.machine);
  s.text(2, key.region);
  s.text(3, key.device);
  const int rc = s.step();
  if (rc == SQLITE_DONE) return Load::absent;
  if (rc != SQLITE_ROW) db_->sqlite.fail("loading " + describe(key));
  // The stored range counts only when the caller's tables have none yet (learned from the
  // first region) or the same one: the fingerprint below compares them.
  SplitTables candidate = tables;
  if (!candidate.size_range_set() && s.column_integer(12) != 0) {
    candidate.set_size_range(s.column_real(13), s.column_real(14));
  }
  if (s.column_text(3) != fingerprint_of(candidate)) return Load::invalidated;
  decode_into(candidate, s.column_text(15), s.column_text(16), describe(key));
  tables = std::move(candidate);
  return Load::loaded;
}

std::vector<StoredSplit> SplitStore::list(const std::string& machine, std::size_t* stale) const {
  if (stale != nullptr) *stale = 0;
  if (!db_->has_table) return {};
  store::SqliteStatement s(db_->sqlite,
                           std::string("SELECT ") + kColumns +
                               " FROM split_tables WHERE ?1 = '' OR machine = ?1 ORDER BY "
                               "machine, region, device");
  s.text(1, machine);
  std::vector<StoredSplit> out;
  for (int rc; (rc = s.step()) != SQLITE_DONE;) {
    if (rc != SQLITE_ROW) db_->sqlite.fail("listing");
    SplitKey key{s.column_text(0), s.column_text(1), s.column_text(2)};
    // A row is current when its fingerprint is the one its own columns give: a row stored by a
    // weft whose rows held something else is not shown (load() would not use it either), and
    // the caller may say how many there were. Whichever CPU learned it: a store shared by
    // machines lists theirs too (each row's fingerprint names its CPU; load() on another CPU
    // does not use it).
    // A row that cannot be read back (damaged, or written by hand) is left out and counted
    // like an older one: one bad row must not hide the others.
    try {
      SplitTables t = tables_of(s);
      if (fingerprint_without_cpu(s.column_text(3)) != fingerprint_without_cpu(fingerprint_of(t))) {
        if (stale != nullptr) ++*stale;
        continue;
      }
      decode_into(t, s.column_text(15), s.column_text(16), describe(key));
      out.push_back(StoredSplit{std::move(key), s.column_text(3), s.column_text(17), std::move(t)});
    } catch (const Error&) {
      if (stale != nullptr) ++*stale;
    }
  }
  return out;
}

std::size_t SplitStore::reset(const std::string& machine, const std::string& region) {
  db_->check_writable("resetting");
  store::SqliteStatement s(db_->sqlite,
                           "DELETE FROM split_tables WHERE (?1 = '' OR machine = ?1) AND "
                           "(?2 = '' OR region = ?2)");
  s.text(1, machine);
  s.text(2, region);
  if (s.step() != SQLITE_DONE) db_->sqlite.fail("resetting");
  return static_cast<std::size_t>(db_->sqlite.changes());
}

}  // namespace weft::split
