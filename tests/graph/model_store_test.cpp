// The calibration store: round trips, RLS resumed exactly, listing, and that a process killed
// mid-run loses nothing it had stored.
#include "weft/graph/mapping/model_store.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "weft/error.hpp"

#if WEFT_TEST_SQLITE_DIRECT
#include <sqlite3.h>
#endif

using weft::graph::CostSample;
using weft::graph::LinearCostModel;
using weft::graph::ModelKey;
using weft::graph::ModelStore;

namespace {

// A fresh database path per test, removed (with its WAL files) afterwards.
struct TempDb {
  std::filesystem::path path;
  TempDb() {
    path = std::filesystem::temp_directory_path() /
           ("weft-models-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".db");
    remove();
  }
  ~TempDb() { remove(); }
  void remove() const {
    for (const char* suffix : {"", "-wal", "-shm"}) {
      std::filesystem::remove(path.string() + suffix);
    }
  }
};

#define REQUIRE_SQLITE()                                                  \
  do {                                                                    \
    if (!ModelStore::available()) GTEST_SKIP() << "built without SQLite"; \
  } while (0)

// Kernel name "k<i>" (appended, not "k" + to_string: GCC 12 warns falsely on that, PR 105651).
std::string kernel_name(int i) {
  std::string k = "k";
  k += std::to_string(i);
  return k;
}

LinearCostModel sample_model(double slope) {
  const std::vector<CostSample> s = {
      {1e6, 1e-4 + slope * 1e6}, {4e6, 1e-4 + slope * 4e6}, {1.6e7, 1e-4 + slope * 1.6e7 + 1e-5}};
  return LinearCostModel::fit(s);
}

#if WEFT_TEST_SQLITE_DIRECT
// A store as the first version wrote it (no spread, no run count), holding one model ("m",
// "cpu", "old").
bool write_first_version_store(const std::filesystem::path& path) {
  sqlite3* h = nullptr;
  if (sqlite3_open(path.string().c_str(), &h) != SQLITE_OK) return false;
  const char* old_schema =
      "CREATE TABLE cost_models (machine TEXT NOT NULL, device TEXT NOT NULL, kernel TEXT NOT "
      "NULL, intercept REAL NOT NULL, slope REAL NOT NULL, p00 REAL NOT NULL, p01 REAL NOT "
      "NULL, p11 REAL NOT NULL, p_trace_limit REAL NOT NULL, forgetting REAL NOT NULL, "
      "observations INTEGER NOT NULL, fit_error REAL NOT NULL, updated TEXT NOT NULL, "
      "PRIMARY KEY (machine, device, kernel));"
      "INSERT INTO cost_models VALUES ('m', 'cpu', 'old', 1e-4, 2e-9, 1, 0, 1e-18, 1e6, 0.98, "
      "5, 0.01, '2026-01-01T00:00:00Z');";
  const bool ok = sqlite3_exec(h, old_schema, nullptr, nullptr, nullptr) == SQLITE_OK;
  sqlite3_close(h);
  return ok;
}
#endif

}  // namespace

TEST(ModelStore, AnEmptyPathIsRefused) {
  REQUIRE_SQLITE();
  EXPECT_THROW(ModelStore(""), weft::InvalidArgument);  // SQLite's temporary database
}

TEST(ModelStore, StoresAndResumesAModelExactly) {
  REQUIRE_SQLITE();
  TempDb db;
  const ModelKey key{"node-a", "gpu0", "moving_mean"};
  LinearCostModel m = sample_model(1e-9);
  m.update(8e6, 1.0);  // far beyond the clip: the start of a run that could reset the model
  ASSERT_EQ(m.one_sided(), 1);
  {
    ModelStore store(db.path.string());
    store.put(key, m, 0.03);
  }
  ModelStore reopened(db.path.string());  // another run
  const auto got = reopened.get(key);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->key, key);
  EXPECT_DOUBLE_EQ(got->fit_error, 0.03);
  EXPECT_EQ(got->updated.size(), 20u) << got->updated;  // 2026-11-23T04:05:06Z
  EXPECT_EQ(got->model.observations(), 4u);
  EXPECT_EQ(got->model.one_sided(), 1);
  // The RLS state came back whole: the same update moves both the same way.
  LinearCostModel resumed = got->model;
  m.update(8e6, 5e-3);
  resumed.update(8e6, 5e-3);
  EXPECT_DOUBLE_EQ(resumed.intercept(), m.intercept());
  EXPECT_DOUBLE_EQ(resumed.slope(), m.slope());
  EXPECT_DOUBLE_EQ(resumed.spread(), m.spread());  // the clipping's scale came back too
  EXPECT_EQ(resumed.one_sided(), m.one_sided());
  EXPECT_FALSE(reopened.get({"node-a", "gpu0", "other"}).has_value());
}

#if WEFT_TEST_SQLITE_DIRECT
// A store written before models kept their spread and their run beyond the clip: opening it adds
// the columns, and its models come back with the spread unknown (infinite: no clipping until
// they have seen a measurement) and no run.
TEST(ModelStore, AStoreWithoutTheSpreadColumnIsUpgraded) {
  REQUIRE_SQLITE();
  TempDb db;
  ASSERT_TRUE(write_first_version_store(db.path)) << "could not write the old store";
  ModelStore store(db.path.string());
  const auto old = store.get({"m", "cpu", "old"});
  ASSERT_TRUE(old.has_value());
  EXPECT_DOUBLE_EQ(old->model.slope(), 2e-9);
  EXPECT_TRUE(std::isinf(old->model.spread()));
  EXPECT_EQ(old->model.one_sided(), 0);
  store.put({"m", "cpu", "new"}, sample_model(1e-9), 0.02);
  const auto fresh = store.get({"m", "cpu", "new"});
  ASSERT_TRUE(fresh.has_value());
  EXPECT_DOUBLE_EQ(fresh->model.spread(), sample_model(1e-9).spread());
  ModelStore again(db.path.string());  // the upgraded store opens as it is
  EXPECT_EQ(again.list("m").size(), 2u);
}

// Several processes (here connections on threads) opening one old store at once: each finds
// the columns added by whoever upgraded first, none fails with "duplicate column".
TEST(ModelStore, ManyOpenersOfAnOldStoreUpgradeItOnce) {
  REQUIRE_SQLITE();
  constexpr int kRounds = 20, kOpeners = 4;
  for (int round = 0; round < kRounds; ++round) {
    TempDb db;
    ASSERT_TRUE(write_first_version_store(db.path)) << "could not write the old store";
    std::atomic<int> ready{0};
    std::vector<std::string> errors(kOpeners);
    std::vector<std::thread> openers;
    for (int i = 0; i < kOpeners; ++i) {
      openers.emplace_back([&, i] {
        ready.fetch_add(1);
        while (ready.load() < kOpeners) {
        }
        try {
          ModelStore store(db.path.string());
          if (!store.get({"m", "cpu", "old"}).has_value()) errors[i] = "the old row is gone";
        } catch (const std::exception& e) {
          errors[i] = e.what();
        }
      });
    }
    for (auto& t : openers) t.join();
    for (const std::string& e : errors) ASSERT_EQ(e, "") << "round " << round;
  }
}
#endif

TEST(ModelStore, PutReplacesListFiltersAndOrdersEraseRemoves) {
  REQUIRE_SQLITE();
  TempDb db;
  ModelStore store(db.path.string());
  store.put({"b", "gpu0", "rank"}, sample_model(2e-9), 0.1);
  store.put({"a", "cpu", "rank"}, sample_model(3e-9), 0.2);
  store.put({"a", "cpu", "delta"}, sample_model(4e-9), 0.3);
  store.put({"a", "cpu", "rank"}, sample_model(5e-9), 0.05);  // replaces
  const auto all = store.list();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].key, (ModelKey{"a", "cpu", "delta"}));
  EXPECT_EQ(all[1].key, (ModelKey{"a", "cpu", "rank"}));
  EXPECT_EQ(all[2].key, (ModelKey{"b", "gpu0", "rank"}));
  EXPECT_NEAR(all[1].model.slope(), 5e-9, 1e-10);
  EXPECT_DOUBLE_EQ(all[1].fit_error, 0.05);
  EXPECT_EQ(store.list("a").size(), 2u);
  EXPECT_TRUE(store.list("nobody").empty());
  EXPECT_TRUE(store.erase({"a", "cpu", "delta"}));
  EXPECT_FALSE(store.erase({"a", "cpu", "delta"}));
  EXPECT_EQ(store.list().size(), 2u);
}

TEST(ModelStore, BadKeysAndPathsAreErrorsWithAReason) {
  REQUIRE_SQLITE();
  TempDb db;
  ModelStore store(db.path.string());
  EXPECT_THROW(store.put({"", "gpu0", "k"}, sample_model(1e-9), 0), weft::InvalidArgument);
  EXPECT_THROW(store.put({"m", "gpu0", ""}, sample_model(1e-9), 0), weft::InvalidArgument);
  try {
    ModelStore nowhere("/nonexistent-dir/weft/models.db");
    FAIL() << "opened a database in a directory that does not exist";
  } catch (const weft::Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-dir/weft/models.db"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("directory /nonexistent-dir/weft does not exist"),
              std::string::npos)
        << e.what();
  }
}

#if WEFT_TEST_SQLITE_DIRECT
// A --db naming another application's database: refused, naming its tables, before anything is
// written to it (no table created, no journal mode switched).
TEST(ModelStore, AnotherApplicationsDatabaseIsRefusedAndLeftByteForByte) {
  REQUIRE_SQLITE();
  TempDb db;
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(db.path.c_str(), &raw), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(raw, "CREATE TABLE orders (id INTEGER PRIMARY KEY, total REAL)", nullptr,
                         nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(raw);
  auto contents = [&] {
    std::ifstream in(db.path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  const std::string before = contents();
  try {
    ModelStore store(db.path.string());
    FAIL() << "opened another application's database";
  } catch (const weft::InvalidArgument& e) {
    const std::string why = e.what();
    EXPECT_NE(why.find(db.path.string() + "): not a weft store"), std::string::npos) << why;
    EXPECT_NE(why.find("'orders'"), std::string::npos) << why;
  }
  EXPECT_EQ(contents(), before);
  EXPECT_FALSE(std::filesystem::exists(db.path.string() + "-wal"));
}
#endif

TEST(ModelStore, AProcessKilledMidRunLosesNothingItHadStored) {
  REQUIRE_SQLITE();
  TempDb db;
  int pipe_fd[2];
  ASSERT_EQ(::pipe(pipe_fd), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The child stores models as fast as it can and reports each one stored; the parent kills
    // it at some point in the middle of a put.
    ::close(pipe_fd[0]);
    try {
      ModelStore store(db.path.string());
      for (int i = 0;; ++i) {
        store.put({"m", "gpu0", kernel_name(i)}, sample_model(1e-9 * (1 + i)), i);
        if (::write(pipe_fd[1], &i, sizeof i) != sizeof i) ::_exit(2);
      }
    } catch (...) {
      ::_exit(3);
    }
  }
  ::close(pipe_fd[1]);
  int last = -1, got = 0;
  while (last < 40 && ::read(pipe_fd[0], &got, sizeof got) == sizeof got) last = got;
  ::kill(child, SIGKILL);
  while (::read(pipe_fd[0], &got, sizeof got) == sizeof got) last = got;  // reported meanwhile
  ::close(pipe_fd[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the child ended by itself (status " << status << ")";
  ASSERT_GE(last, 40);
  ModelStore store(db.path.string());  // recovers the WAL
  for (int i = 0; i <= last; ++i) {
    const auto m = store.get({"m", "gpu0", kernel_name(i)});
    ASSERT_TRUE(m.has_value()) << "model " << i << " was reported stored and is gone";
    EXPECT_NEAR(m->model.slope(), 1e-9 * (1 + i), 1e-10 * (1 + i));
    EXPECT_DOUBLE_EQ(m->fit_error, i);
  }
  // Whatever the kill interrupted is either there whole or not at all.
  for (const auto& m : store.list("m")) EXPECT_GT(m.model.observations(), 0u);
}

TEST(ModelStore, WithoutSqliteEveryUseSaysSo) {
  if (ModelStore::available()) GTEST_SKIP() << "built with SQLite";
  EXPECT_THROW(ModelStore("x.db"), weft::InvalidState);
}
