// The split tables' store (weft/split/store.hpp): what is saved comes back, tables learned for
// other cores or buckets are refused, another application's database and a store opened
// read-only are not written to, a process killed mid-save leaves whole tables, and the splitter
// loads and saves through it.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "weft/cpu/executor.hpp"
#include "weft/error.hpp"
#include "weft/graph/mapping/model_store.hpp"
#include "weft/split/splitter.hpp"
#include "weft/split/store.hpp"

#if WEFT_TEST_SQLITE_DIRECT
#include <sqlite3.h>
#endif

namespace ws = weft::split;
namespace fs = std::filesystem;

namespace {

class SplitStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!ws::SplitStore::available()) GTEST_SKIP() << "weft was built without SQLite";
    dir_ = fs::temp_directory_path() /
           ("weft-split-store-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    path_ = (dir_ / "models.db").string();
  }
  void TearDown() override { fs::remove_all(dir_); }
#if WEFT_TEST_SQLITE_DIRECT
  // Runs SQL on the store's file behind its back (rows as another weft, or damage, left them).
  void exec_sql(std::initializer_list<const char*> statements) const {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    for (const char* sql : statements) {
      ASSERT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK) << sql;
    }
    sqlite3_close(db);
  }
#endif

  fs::path dir_;
  std::string path_;
};

ws::SplitOptions opts() {
  ws::SplitOptions o;
  o.buckets = 20;
  o.size_min = 0;
  o.size_max = 1900;
  o.window = 3;
  o.min_share = 0;
  return o;
}

ws::RegionTiming timing(double gpu_rate, double core_rate, std::size_t cores) {
  ws::RegionTiming t;
  t.gpu_work = 100;
  t.gpu_seconds = 100 / gpu_rate;
  t.core_work.assign(cores, 10);
  t.core_seconds.assign(cores, 10 / core_rate);
  t.core_seconds[0] = 10 / (core_rate / 2);  // core 0 runs at half speed
  return t;
}

const ws::SplitKey kKey{"host-a", "gemm_rows", "NVIDIA H100, driver 13000"};

}  // namespace

TEST_F(SplitStoreTest, SavedTablesComeBackAsTheyWere) {
  ws::SplitTables t(4, {100, 10}, opts());
  t.update(3, timing(50, 5, 4));
  t.update(3, timing(60, 5, 4));
  t.update(17, timing(80, 6, 4));
  {
    ws::SplitStore store(path_);
    store.save(kKey, t);
  }
  ws::SplitStore store(path_);
  ws::SplitTables back(4, {100, 10}, opts());
  ASSERT_EQ(store.load(kKey, back), ws::SplitStore::Load::loaded);
  for (std::size_t b = 0; b < 20; ++b) {
    EXPECT_DOUBLE_EQ(back.gsplit(b), t.gsplit(b)) << b;
    EXPECT_EQ(back.buckets()[b].regions, t.buckets()[b].regions);
    EXPECT_EQ(back.buckets()[b].gpu_rate.recent(), t.buckets()[b].gpu_rate.recent());
    EXPECT_EQ(back.buckets()[b].split_cost.recent(), t.buckets()[b].split_cost.recent());
  }
  EXPECT_DOUBLE_EQ(back.buckets()[3].last_balanced, t.buckets()[3].last_balanced);
  EXPECT_EQ(back.csplit(), t.csplit());
  ASSERT_EQ(store.list().size(), 1u);
  EXPECT_EQ(store.list()[0].key, kKey);
  EXPECT_DOUBLE_EQ(store.list()[0].tables.gsplit(17), t.gsplit(17));
}

TEST_F(SplitStoreTest, TablesForOtherCoresBucketsOrKeysAreNotUsed) {
  ws::SplitTables t(4, {100, 10}, opts());
  t.update(3, timing(50, 5, 4));
  ws::SplitStore store(path_);
  store.save(kKey, t);
  ws::SplitTables fewer_cores(3, {100, 10}, opts());
  EXPECT_EQ(store.load(kKey, fewer_cores), ws::SplitStore::Load::invalidated);
  EXPECT_EQ(fewer_cores.buckets()[3].regions, 0u);  // left at the prior
  ws::SplitOptions more = opts();
  more.buckets = 40;
  ws::SplitTables more_buckets(4, {100, 10}, more);
  EXPECT_EQ(store.load(kKey, more_buckets), ws::SplitStore::Load::invalidated);
  ws::SplitTables other(4, {100, 10}, opts());
  EXPECT_EQ(store.load({"host-a", "gemm_rows", "NVIDIA H100, driver 13010"}, other),
            ws::SplitStore::Load::absent);
  EXPECT_EQ(store.load({"host-b", "gemm_rows", kKey.device}, other), ws::SplitStore::Load::absent);
}

TEST_F(SplitStoreTest, ALearnedSizeRangeIsRestored) {
  ws::SplitOptions o = opts();
  o.size_min = o.size_max = 0;  // learned from the first region
  ws::SplitTables t(2, {1, 1}, o);
  const std::size_t b = t.bucket_of(500);  // [0, 1000]
  t.update(b, timing(50, 5, 2));
  ws::SplitStore store(path_);
  store.save(kKey, t);
  ws::SplitTables back(2, {1, 1}, o);
  ASSERT_EQ(store.load(kKey, back), ws::SplitStore::Load::loaded);
  EXPECT_TRUE(back.size_range_set());
  EXPECT_EQ(back.bucket_of(500), b);
  EXPECT_DOUBLE_EQ(back.gsplit(b), t.gsplit(b));
}

TEST_F(SplitStoreTest, ResetRemovesByMachineAndRegion) {
  ws::SplitTables t(1, {1, 1}, opts());
  ws::SplitStore store(path_);
  store.save({"a", "r1", "d"}, t);
  store.save({"a", "r2", "d"}, t);
  store.save({"b", "r1", "d"}, t);
  EXPECT_EQ(store.reset("a", "r1"), 1u);
  EXPECT_EQ(store.list().size(), 2u);
  EXPECT_EQ(store.reset("", "r2"), 1u);
  EXPECT_EQ(store.reset("", ""), 1u);
  EXPECT_TRUE(store.list().empty());
}

TEST_F(SplitStoreTest, TablesOfAnOlderFormatAreCountedNotShown) {
  ws::SplitTables t(1, {1, 1}, opts());
  ws::SplitStore store(path_);
  store.save(kKey, t);
  store.save({"host-b", "old", "d"}, t);
#if WEFT_TEST_SQLITE_DIRECT
  // A row as an older weft wrote it: another format's fingerprint.
  exec_sql({"UPDATE split_tables SET fingerprint = 'cores=1 buckets=20' WHERE machine = 'host-b'"});
  std::size_t stale = 0;
  const auto shown = store.list("", &stale);
  ASSERT_EQ(shown.size(), 1u);
  EXPECT_EQ(shown[0].key, kKey);
  EXPECT_EQ(stale, 1u);
  ws::SplitTables back(1, {1, 1}, opts());
  EXPECT_EQ(store.load({"host-b", "old", "d"}, back), ws::SplitStore::Load::invalidated);
#else
  GTEST_SKIP() << "needs SQLite's header to write an old row";
#endif
}

// Damaged rows (no cores; buckets past what a table may have; a negative counter) are left
// out and counted, and the healthy row is still listed; loading a damaged one names it.
TEST_F(SplitStoreTest, DamagedRowsAreCountedAndDoNotHideTheOthers) {
  ws::SplitTables t(1, {1, 1}, opts());
  t.update(0, {1.0, 1.0, 1.0, {1.0}, {1.0}});
  ws::SplitStore store(path_);
  store.save(kKey, t);
  for (const char* m : {"no-cores", "many-buckets", "negative"}) store.save({m, "r", "d"}, t);
#if WEFT_TEST_SQLITE_DIRECT
  exec_sql({"UPDATE split_tables SET cores = 0 WHERE machine = 'no-cores'",
            "UPDATE split_tables SET buckets = 100000000000 WHERE machine = 'many-buckets'",
            "UPDATE split_tables SET bucket_state = replace(bucket_state, '0 1 ', '0 -5 ') WHERE "
            "machine = 'negative'"});
  std::size_t stale = 0;
  const auto shown = store.list("", &stale);
  ASSERT_EQ(shown.size(), 1u);
  EXPECT_EQ(shown[0].key, kKey);
  EXPECT_EQ(stale, 3u);
  ws::SplitTables back(1, {1, 1}, opts());
  try {
    (void)store.load({"negative", "r", "d"}, back);
    ADD_FAILURE() << "loaded";
  } catch (const weft::Error& e) {
    EXPECT_NE(std::string(e.what()).find("counter is not a count"), std::string::npos) << e.what();
  }
#else
  GTEST_SKIP() << "needs SQLite's header to damage a row";
#endif
}

// A machine that keeps its name but not its CPU (a cloud instance on other hardware): the
// tables learned on the other CPU are not used.
TEST_F(SplitStoreTest, TablesLearnedOnAnotherCpuAreNotUsed) {
  ws::SplitTables t(2, {100, 10}, opts());
  t.update(3, timing(50, 5, 2));
  EXPECT_NE(ws::fingerprint_of(t).find(" cpu=\""), std::string::npos) << ws::fingerprint_of(t);
  ws::SplitStore store(path_);
  store.save(kKey, t);
#if WEFT_TEST_SQLITE_DIRECT
  exec_sql(
      {"UPDATE split_tables SET fingerprint = substr(fingerprint, 1, "
       "instr(fingerprint, ' cpu=') - 1) || ' cpu=\"Another CPU\"'"});
  ws::SplitTables back(2, {100, 10}, opts());
  EXPECT_EQ(store.load(kKey, back), ws::SplitStore::Load::invalidated);
  EXPECT_EQ(back.buckets()[3].regions, 0u);  // left at the prior
  // Listed all the same, under the CPU that learned it: not taken for an older format.
  std::size_t stale = 0;
  const auto shown = store.list("", &stale);
  EXPECT_EQ(stale, 0u);
  ASSERT_EQ(shown.size(), 1u);
  EXPECT_NE(shown[0].fingerprint.find("cpu=\"Another CPU\""), std::string::npos);
#else
  GTEST_SKIP() << "needs SQLite's header to write a row from another CPU";
#endif
}

TEST_F(SplitStoreTest, EmptyKeysAndMissingDirectoriesAreNamed) {
  ws::SplitStore store(path_);
  ws::SplitTables t(1, {1, 1}, opts());
  EXPECT_THROW(store.save({"", "r", "d"}, t), weft::InvalidArgument);
  try {
    ws::SplitStore bad((dir_ / "no-such-dir" / "x.db").string());
    ADD_FAILURE() << "opened";
  } catch (const weft::Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not exist"), std::string::npos) << e.what();
  }
  // "" would be SQLite's temporary database, lost at exit.
  EXPECT_THROW(ws::SplitStore(""), weft::InvalidArgument);
  // Keys that would list alike ("gemm" twice) and could not be typed back to reset.
  EXPECT_THROW(store.save({"host", std::string("gemm\0A", 6), "d"}, t), weft::InvalidArgument);
}

namespace {

std::string contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// What a store's write-ahead log holds: 0 when nothing was written since the last checkpoint
// (a reader of a WAL database may create an empty log and its index, as SQLite's readers do).
std::uintmax_t wal_bytes(const std::string& path) {
  const std::string wal = path + "-wal";
  return fs::exists(wal) ? fs::file_size(wal) : 0;
}

std::vector<std::string> files_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& f : fs::directory_iterator(dir)) names.push_back(f.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

#if WEFT_TEST_SQLITE_DIRECT
// `weft split show|reset --db` given another application's database: refused, naming its
// tables, before anything is written (no table created, no journal mode switched).
TEST_F(SplitStoreTest, AnotherApplicationsDatabaseIsRefusedAndLeftByteForByte) {
  exec_sql({"CREATE TABLE contacts (name TEXT PRIMARY KEY, phone TEXT)",
            "CREATE INDEX by_phone ON contacts (phone)",
            "INSERT INTO contacts VALUES ('ada', '1815')"});
  const std::string before = contents(path_);
  ASSERT_FALSE(before.empty());
  for (const auto mode : {ws::SplitStore::Mode::read_only, ws::SplitStore::Mode::read_write}) {
    try {
      ws::SplitStore store(path_, mode);
      ADD_FAILURE() << "opened another application's database";
    } catch (const weft::InvalidArgument& e) {
      const std::string why = e.what();
      EXPECT_NE(why.find(path_ + "): not a weft store"), std::string::npos) << why;
      EXPECT_NE(why.find("'contacts'"), std::string::npos) << why;
    }
  }
  // The calibration store opens the same file (`weft models`, the runtime's models) alike.
  EXPECT_THROW(weft::graph::ModelStore{path_}, weft::InvalidArgument);
  EXPECT_EQ(contents(path_), before);
  EXPECT_EQ(files_in(dir_), std::vector<std::string>{"models.db"});
}

// Another application's database in WAL mode, closed with its last commits still in the log
// (not checkpointed into the file): refused by every store and mode, with the file and the log
// left as they were. Closing the connection that found it foreign would otherwise checkpoint
// the log into the file.
TEST_F(SplitStoreTest, AnotherApplicationsWalDatabaseIsRefusedWithItsLogLeftAsItWas) {
  sqlite3* app = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &app), SQLITE_OK);
  for (const char* sql : {"PRAGMA journal_mode=WAL", "CREATE TABLE contacts (name TEXT)",
                          "INSERT INTO contacts VALUES ('ada')"}) {
    ASSERT_EQ(sqlite3_exec(app, sql, nullptr, nullptr, nullptr), SQLITE_OK) << sql;
  }
  sqlite3_db_config(app, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr);
  sqlite3_close(app);
  const std::string file = contents(path_), log = contents(path_ + "-wal");
  ASSERT_FALSE(log.empty());
  for (const auto mode : {ws::SplitStore::Mode::read_write, ws::SplitStore::Mode::read_only}) {
    EXPECT_THROW(ws::SplitStore(path_, mode), weft::InvalidArgument);
  }
  EXPECT_THROW(weft::graph::ModelStore{path_}, weft::InvalidArgument);
  EXPECT_EQ(contents(path_), file);
  EXPECT_EQ(contents(path_ + "-wal"), log);
}

// Only tables make a file another application's: a view a user adds over weft's own table
// leaves it weft's.
TEST_F(SplitStoreTest, AViewOverWeftsOwnTableKeepsTheStoreWefts) {
  { weft::graph::ModelStore models(path_); }
  exec_sql({"CREATE VIEW recent AS SELECT * FROM cost_models"});
  EXPECT_NO_THROW(weft::graph::ModelStore{path_});
  EXPECT_NO_THROW(ws::SplitStore(path_, ws::SplitStore::Mode::read_only));
}
#endif

// `weft split show`: a calibration store is read, never written, whether it holds split tables
// yet or not, and leaves no WAL files behind; a path that does not exist is not created.
TEST_F(SplitStoreTest, OpenedReadOnlyItWritesNothing) {
  { weft::graph::ModelStore models(path_); }  // cost models only, no split tables yet
  ws::SplitTables t(1, {1, 1}, opts());
  std::string before = contents(path_);
  {
    ws::SplitStore store(path_, ws::SplitStore::Mode::read_only);
    std::size_t stale = 7;
    EXPECT_TRUE(store.list("", &stale).empty());
    EXPECT_EQ(stale, 0u);
    EXPECT_EQ(store.load(kKey, t), ws::SplitStore::Load::absent);
    EXPECT_THROW(store.save(kKey, t), weft::InvalidState);
    EXPECT_THROW(store.reset("", ""), weft::InvalidState);
  }
  EXPECT_EQ(contents(path_), before);
  EXPECT_EQ(wal_bytes(path_), 0u);

  { ws::SplitStore(path_).save(kKey, t); }
  before = contents(path_);
  {
    ws::SplitStore store(path_, ws::SplitStore::Mode::read_only);
    EXPECT_EQ(store.list().size(), 1u);
    EXPECT_EQ(store.load(kKey, t), ws::SplitStore::Load::loaded);
  }
  EXPECT_EQ(contents(path_), before);
  EXPECT_EQ(wal_bytes(path_), 0u);
  EXPECT_EQ(files_in(dir_), std::vector<std::string>{"models.db"});  // no -wal, -shm left

  const fs::path absent = dir_ / "absent.db";
  EXPECT_THROW(ws::SplitStore(absent.string(), ws::SplitStore::Mode::read_only), weft::Error);
  EXPECT_FALSE(fs::exists(absent));
}

// A child saves tables over and over, each save with every rate equal to its round; it is
// killed at some point. Whatever the store holds then is one whole save: every rate of one
// round, never a mix.
TEST_F(SplitStoreTest, AProcessKilledMidSaveLeavesWholeTables) {
  { ws::SplitStore create(path_); }
  for (int attempt = 0; attempt < 5; ++attempt) {
    int ready[2];
    ASSERT_EQ(::pipe(ready), 0);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      ::close(ready[0]);
      try {
        ws::SplitStore store(path_);
        for (int round = 1;; ++round) {
          ws::SplitTables t(4, {1, 1}, opts());
          const double r = round + 1000.0 * attempt;
          for (std::size_t b = 0; b < 20; ++b) t.update(b, timing(r, r, 4));
          store.save(kKey, t);
          if (round == 1) {  // one whole save is in: the parent may kill from now on
            const char byte = 1;
            if (::write(ready[1], &byte, 1) != 1) ::_exit(4);
          }
        }
      } catch (...) {
        ::_exit(3);
      }
    }
    ::close(ready[1]);
    char byte = 0;
    ASSERT_EQ(::read(ready[0], &byte, 1), 1) << "the child saved nothing";
    ::close(ready[0]);
    std::this_thread::sleep_for(std::chrono::milliseconds(3 + 17 * attempt));  // mid-save, likely
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the child stopped by itself: " << status;
    {  // `weft split show` first: whole tables, and no -wal or -shm left once it closes
      ws::SplitStore shown(path_, ws::SplitStore::Mode::read_only);
      ws::SplitTables seen(4, {1, 1}, opts());
      ASSERT_EQ(shown.load(kKey, seen), ws::SplitStore::Load::loaded);
      EXPECT_EQ(seen.buckets()[19].gpu_rate.value(), seen.buckets()[0].gpu_rate.value());
    }
    EXPECT_EQ(files_in(dir_), std::vector<std::string>{"models.db"});
    ws::SplitStore store(path_);
    ws::SplitTables back(4, {1, 1}, opts());
    ASSERT_EQ(store.load(kKey, back), ws::SplitStore::Load::loaded);
    const double first = back.buckets()[0].gpu_rate.value();
    EXPECT_GE(first, 1000.0 * attempt);
    for (std::size_t b = 0; b < 20; ++b) {
      ASSERT_EQ(back.buckets()[b].regions, 1u);
      EXPECT_EQ(back.buckets()[b].gpu_rate.value(), first) << "bucket " << b;
    }
    EXPECT_DOUBLE_EQ(back.share_rates()[1].value(),
                     first);  // the cores' rates are of the same save
  }
}

TEST_F(SplitStoreTest, TheSplitterLoadsAndSavesThroughTheStore) {
  weft::cpu::ExecutorOptions eo;
  eo.workers = 2;
  eo.pinning = weft::cpu::Pinning::none;
  weft::cpu::Executor ex(eo);
  auto gpu = ws::GpuSide::emulated();
  ws::RegionWork w;
  w.size = 100;
  w.work = 100;
  w.items = 100;
  const ws::GpuPart g = [](ws::Range r, const ws::GpuContext&) {
    std::this_thread::sleep_for(std::chrono::microseconds(100 * r.size()));
  };
  const ws::CpuPart c = [](ws::Range r, std::size_t) {
    std::this_thread::sleep_for(std::chrono::microseconds(300 * r.size()));
  };
  double learned = 0;
  {
    ws::SplitStore store(path_);
    ws::Splitter s(ex, *gpu, "attach", {1, 1}, opts());
    EXPECT_FALSE(s.attach(store, "host-a"));  // nothing stored yet
    for (int i = 0; i < 3; ++i) learned = s.run(w, g, c).next_gsplit;
  }
  ws::SplitStore store(path_);
  ws::Splitter again(ex, *gpu, "attach", {1, 1}, opts());
  EXPECT_TRUE(again.attach(store, "host-a"));
  EXPECT_DOUBLE_EQ(again.tables().gsplit(1), learned);  // size 100 is bucket 1
  // One store per splitter: a second attach would replace what it learned.
  EXPECT_THROW(again.attach(store, "host-b"), weft::InvalidState);
  EXPECT_DOUBLE_EQ(again.tables().gsplit(1), learned);
}
