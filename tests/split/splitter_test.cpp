// The splitter on the emulated device (weft/split/splitter.hpp): every item runs exactly once,
// on the side and core its share says; the parts run at once; the tables learn from measured
// times and converge; errors come back after every part has finished.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "weft/cpu/executor.hpp"
#include "weft/error.hpp"
#include "weft/split/splitter.hpp"
#include "weft/split/tables.hpp"

namespace ws = weft::split;
using namespace std::chrono_literals;

namespace {

weft::cpu::Executor make_executor(std::size_t workers) {
  weft::cpu::ExecutorOptions o;
  o.workers = workers;
  o.pinning = weft::cpu::Pinning::none;
  return weft::cpu::Executor(o);
}

ws::RegionWork region(std::int64_t items, double size = 100) {
  ws::RegionWork w;
  w.size = size;
  w.work = static_cast<double>(items);
  w.items = items;
  return w;
}

// Sleeps long enough for `items` at `rate` items per second.
void work_for(ws::Range r, double rate) {
  std::this_thread::sleep_for(std::chrono::duration<double>(static_cast<double>(r.size()) / rate));
}

}  // namespace

TEST(SplitRanges, CoverEveryItemOnceInGpuThenCoreOrder) {
  ws::RegionWork w = region(1000);
  const ws::SplitRanges r = ws::split_ranges(w, 0.6, {0.25, 0.25, 0.5});
  EXPECT_EQ(r.gpu, (ws::Range{0, 600}));
  ASSERT_EQ(r.cores.size(), 3u);
  EXPECT_EQ(r.cores[0], (ws::Range{600, 700}));
  EXPECT_EQ(r.cores[1], (ws::Range{700, 800}));
  EXPECT_EQ(r.cores[2], (ws::Range{800, 1000}));
}

TEST(SplitRanges, FallOnTheGrain) {
  ws::RegionWork w = region(1000);
  w.grain = 64;
  const ws::SplitRanges r = ws::split_ranges(w, 0.6, {0.5, 0.5});
  EXPECT_EQ(r.gpu.end % 64, 0);
  EXPECT_EQ(r.gpu.end, 576);  // 600 is nearer 576 than 640
  EXPECT_EQ(r.cores[0].end % 64, 0);
  EXPECT_EQ(r.cores[1].end, 1000);
}

TEST(SplitRanges, FollowTheWorkOfUnequalItems) {
  // Item i costs i + 1: the work before item i is i (i + 1) / 2.
  ws::RegionWork w;
  w.items = 100;
  w.work = 5050;
  w.work_before = [](std::int64_t i) { return static_cast<double>(i * (i + 1) / 2); };
  const ws::SplitRanges r = ws::split_ranges(w, 0.5, {1.0});
  EXPECT_EQ(r.gpu.end, 71);  // 71 * 72 / 2 = 2556, nearest to 2525
  EXPECT_NEAR(ws::work_in(w, r.gpu), 2556, 1e-9);
  EXPECT_EQ(r.cores[0], (ws::Range{71, 100}));
}

TEST(SplitRanges, GoAllToOneSideAtTheEnds) {
  ws::RegionWork w = region(10);
  EXPECT_TRUE(ws::split_ranges(w, 0, {0.5, 0.5}).gpu.empty());
  const ws::SplitRanges all_gpu = ws::split_ranges(w, 1, {0.5, 0.5});
  EXPECT_EQ(all_gpu.gpu, (ws::Range{0, 10}));
  EXPECT_TRUE(all_gpu.cores[0].empty());
  EXPECT_TRUE(all_gpu.cores[1].empty());
}

TEST(Splitter, RunsEveryItemExactlyOnceOnTheSideItsShareSays) {
  auto ex = make_executor(3);
  auto gpu = ws::GpuSide::emulated();
  ws::Splitter s(ex, *gpu, "cover", {3, 1}, {.min_share = 0});
  std::vector<std::atomic<int>> runs(1000);
  std::atomic<int> gpu_items{0};
  std::vector<std::atomic<int>> core_items(3);
  for (int round = 0; round < 5; ++round) {
    for (auto& r : runs) r = 0;
    const ws::RegionReport rep = s.run(
        region(1000),
        [&](ws::Range r, const ws::GpuContext& g) {
          EXPECT_TRUE(g.emulated);
          EXPECT_EQ(g.stream, nullptr);
          for (auto i = r.begin; i < r.end; ++i) runs[static_cast<std::size_t>(i)]++;
          gpu_items += static_cast<int>(r.size());
        },
        [&](ws::Range r, std::size_t core) {
          EXPECT_LT(core, 3u);
          for (auto i = r.begin; i < r.end; ++i) runs[static_cast<std::size_t>(i)]++;
          core_items[core] += static_cast<int>(r.size());
        });
    for (auto& r : runs) ASSERT_EQ(r.load(), 1);
    EXPECT_EQ(rep.gpu.size() + rep.cores[0].size() + rep.cores[1].size() + rep.cores[2].size(),
              1000);
  }
  EXPECT_GT(gpu_items.load(), 0);
}

TEST(Splitter, RunsBothPartsAtOnce) {
  auto ex = make_executor(2);
  auto gpu = ws::GpuSide::emulated();
  // Each core its own range in one call, so that both cores start (with the tail taken, a
  // core let go by the GPU's start could take every piece of the other's range).
  ws::Splitter s(ex, *gpu, "overlap", {1, 1}, {.min_share = 0, .take_tail = false});
  // Each side waits until the other has started: run one after the other, they would hang.
  std::atomic<bool> gpu_started{false};
  std::atomic<int> cores_started{0};
  auto wait_for = [](auto&& ready) {
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!ready()) {
      if (std::chrono::steady_clock::now() > deadline) throw std::runtime_error("not at once");
      std::this_thread::sleep_for(1ms);
    }
  };
  EXPECT_NO_THROW(s.run(
      region(100),
      [&](ws::Range, const ws::GpuContext&) {
        gpu_started = true;
        wait_for([&] { return cores_started.load() == 2; });
      },
      [&](ws::Range, std::size_t) {
        cores_started++;
        wait_for([&] { return gpu_started.load(); });
      }));
}

TEST(Splitter, LearnsTheSplitThatBalancesMeasuredRates) {
  auto ex = make_executor(2);
  auto gpu = ws::GpuSide::emulated();
  // The prior says the GPU is 99x the CPU; in truth it runs 2000 items/s and each core 500
  // (1000 together): the balanced split is 2/3.
  ws::Splitter s(ex, *gpu, "converge", {99, 1}, {.window = 3, .min_share = 0});
  double g = 0;
  for (int round = 0; round < 6; ++round) {
    const ws::RegionReport rep = s.run(
        region(400), [&](ws::Range r, const ws::GpuContext&) { work_for(r, 2000); },
        [&](ws::Range r, std::size_t) { work_for(r, 500); });
    g = rep.next_gsplit;
  }
  EXPECT_NEAR(g, 2.0 / 3.0, 0.08);  // sleeps overshoot by scheduler jitter, not by more
}

TEST(Splitter, FindsASlowerCore) {
  auto ex = make_executor(2);
  auto gpu = ws::GpuSide::emulated();
  // The GPU as fast as both cores together, so that every region is split and both cores are
  // measured in each; core 0 does 1000 items a second, core 1 3000.
  ws::Splitter s(ex, *gpu, "percore", {4000, 4000},
                 {.window = 3, .min_share = 0, .try_alone = false});
  for (int round = 0; round < 5; ++round) {
    const ws::RegionReport r = s.run(
        region(600), [&](ws::Range r, const ws::GpuContext&) { work_for(r, 4000); },
        [&](ws::Range r, std::size_t core) { work_for(r, core == 0 ? 1000 : 3000); });
    EXPECT_FALSE(r.cores[0].empty());
    EXPECT_FALSE(r.cores[1].empty());
  }
  const std::vector<double> c = s.tables().csplit();
  EXPECT_NEAR(c[0], 0.25, 0.08);
  EXPECT_NEAR(c[1], 0.75, 0.08);
}

TEST(Splitter, ReportsTheSplitThatRanOnTheGrain) {
  auto ex = make_executor(2);
  auto gpu = ws::GpuSide::emulated();
  ws::Splitter s(ex, *gpu, "grain", {1, 1}, {.min_share = 0});
  ws::RegionWork w = region(512);
  w.grain = 256;  // two places to cut: a GPU share of 0.3 becomes 0.5
  const ws::RegionReport r = s.run_fixed(
      w, 0.3, [](ws::Range, const ws::GpuContext&) {}, [](ws::Range, std::size_t) {});
  EXPECT_DOUBLE_EQ(r.gsplit, 0.5);
}

TEST(Splitter, AFirstRegionOfSizeZeroLeavesTheBucketsForLaterSizes) {
  auto ex = make_executor(2);
  auto gpu = ws::GpuSide::emulated();
  ws::Splitter s(ex, *gpu, "zero", {1, 1}, {.buckets = 11});
  const ws::GpuPart g = [](ws::Range, const ws::GpuContext&) {};
  const ws::CpuPart c = [](ws::Range, std::size_t) {};
  EXPECT_EQ(s.run(region(10, 0), g, c).bucket, 0u);
  EXPECT_FALSE(s.tables().size_range_set());
  EXPECT_EQ(s.run(region(10, 500), g, c).bucket, 5u);  // [0, 1000] from this one
}

// Without take_tail each core runs its own range, whole, in one call, and its work is that
// range's.
TEST(Splitter, WithoutTakeTailEachCoreRunsItsOwnRangeInOneCall) {
  auto ex = make_executor(3);
  auto gpu = ws::GpuSide::emulated();
  ws::Splitter s(ex, *gpu, "own", {1, 1}, {.min_share = 0, .take_tail = false});
  std::vector<std::atomic<int>> calls(3);
  std::vector<ws::Range> seen(3);
  const ws::RegionReport rep = s.run_fixed(
      region(900), 0, [](ws::Range, const ws::GpuContext&) {},
      [&](ws::Range r, std::size_t core) {
        calls[core]++;
        seen[core] = r;  // one call per core: no other thread writes this core's entry
      },
      {1.0 / 3, 1.0 / 3, 1.0 / 3});
  for (std::size_t j = 0; j < 3; ++j) {
    EXPECT_EQ(calls[j].load(), 1) << "core " << j;
    EXPECT_EQ(seen[j], rep.cores[j]) << "core " << j;
    EXPECT_DOUBLE_EQ(rep.core_work[j], static_cast<double>(rep.cores[j].size()));
  }
}

// With take_tail, cores that finish their range take pieces of a slow core's: every item still
// runs once, some of the slow core's items run elsewhere, and each core's work is what it did.
TEST(Splitter, IdleCoresTakeTheTailOfASlowCore) {
  auto ex = make_executor(3);
  auto gpu = ws::GpuSide::emulated();
  ws::Splitter s(ex, *gpu, "tail", {1, 1}, {.min_share = 0, .take_tail = true});
  for (int round = 0; round < 3; ++round) {
    std::vector<std::atomic<int>> runs(960);
    std::vector<std::atomic<int>> ran_on(960);
    const ws::RegionReport rep = s.run_fixed(
        region(960), 0, [](ws::Range, const ws::GpuContext&) {},
        [&](ws::Range r, std::size_t core) {
          if (core == 0) std::this_thread::sleep_for(20ms);  // the slow core, per piece
          for (auto i = r.begin; i < r.end; ++i) {
            runs[static_cast<std::size_t>(i)]++;
            ran_on[static_cast<std::size_t>(i)] = static_cast<int>(core);
          }
        },
        {1.0 / 3, 1.0 / 3, 1.0 / 3});
    for (auto& r : runs) ASSERT_EQ(r.load(), 1);
    int taken = 0;
    for (auto i = rep.cores[0].begin; i < rep.cores[0].end; ++i)
      taken += ran_on[static_cast<std::size_t>(i)] != 0 ? 1 : 0;
    EXPECT_GT(taken, 0) << "round " << round << ": no piece of core 0's range ran elsewhere";
    EXPECT_LT(rep.core_work[0], static_cast<double>(rep.cores[0].size()));
    EXPECT_DOUBLE_EQ(rep.core_work[0] + rep.core_work[1] + rep.core_work[2], 960.0);
  }
}

TEST(Splitter, RunFixedUsesTheGivenSplitAndLearnsNothing) {
  auto ex = make_executor(2);
  auto gpu = ws::GpuSide::emulated();
  ws::Splitter s(ex, *gpu, "fixed", {1, 1}, {.min_share = 0});
  const ws::RegionReport rep = s.run_fixed(
      region(100), 0.3, [](ws::Range, const ws::GpuContext&) {}, [](ws::Range, std::size_t) {});
  EXPECT_EQ(rep.gpu, (ws::Range{0, 30}));
  EXPECT_EQ(s.tables().buckets()[rep.bucket].regions, 0u);
  EXPECT_THROW(
      s.run_fixed(
          region(100), 1.5, [](ws::Range, const ws::GpuContext&) {}, [](ws::Range, std::size_t) {}),
      weft::InvalidArgument);
}

TEST(Splitter, AFailingPartFailsTheRegionOnceNoPartIsRunning) {
  auto ex = make_executor(2);
  auto gpu = ws::GpuSide::emulated();
  // Each core its own range in one call, so that the core part's calls can be counted.
  ws::Splitter s(ex, *gpu, "errors", {1, 1}, {.min_share = 0, .take_tail = false});
  for (int round = 0; round < 5; ++round) {
    std::atomic<int> cores_started{0};
    std::atomic<int> cores_done{0};
    std::atomic<int> done_when_thrown{-1};
    try {
      s.run(
          region(100),
          [round](ws::Range, const ws::GpuContext&) {
            std::this_thread::sleep_for(std::chrono::milliseconds(round % 2 == 0 ? 0 : 5));
            throw std::logic_error("gpu part");
          },
          [&](ws::Range, std::size_t) {
            cores_started++;
            std::this_thread::sleep_for(20ms);
            cores_done++;
          });
      ADD_FAILURE() << "no error";
    } catch (const std::logic_error&) {
      done_when_thrown = cores_done.load();
    }
    // A core that had started finished before the error came back (one that had not yet
    // claimed its range may skip it: the region fails anyway).
    EXPECT_EQ(done_when_thrown.load(), cores_started.load()) << "round " << round;
  }
  std::atomic<bool> gpu_done{false};
  try {
    s.run(
        region(100),
        [&](ws::Range, const ws::GpuContext&) {
          std::this_thread::sleep_for(20ms);
          gpu_done = true;
        },
        [](ws::Range, std::size_t core) {
          if (core == 1) throw std::out_of_range("core part");
        });
    ADD_FAILURE() << "no error";
  } catch (const std::out_of_range& e) {
    EXPECT_STREQ(e.what(), "core part");
  }
  EXPECT_TRUE(gpu_done.load());
  for (const ws::Bucket& b : s.tables().buckets()) EXPECT_EQ(b.regions, 0u);  // nothing learned
  // The splitter is still usable.
  EXPECT_NO_THROW(s.run(
      region(100), [](ws::Range, const ws::GpuContext&) {}, [](ws::Range, std::size_t) {}));
}

// With take_tail the CPU part runs in pieces: a piece that throws fails the region once every
// piece already started has ended (none is still running when the error comes back), the GPU
// part finished, and nothing is learned.
TEST(Splitter, AFailingPieceFailsTheRegionAfterEveryRunningPieceEnded) {
  auto ex = make_executor(3);
  auto gpu = ws::GpuSide::emulated();
  ws::Splitter s(ex, *gpu, "piece errors", {1, 1}, {.min_share = 0, .take_tail = true});
  for (int round = 0; round < 5; ++round) {
    std::atomic<int> running{0};
    std::atomic<int> running_at_error{-1};
    std::atomic<bool> gpu_done{false};
    try {
      s.run(
          region(960),
          [&](ws::Range, const ws::GpuContext&) {
            std::this_thread::sleep_for(10ms);
            gpu_done = true;
          },
          [&](ws::Range r, std::size_t) {
            running++;
            std::this_thread::sleep_for(2ms);
            running--;
            if (r.begin <= 900 && 900 < r.end) throw std::out_of_range("piece with item 900");
          });
      ADD_FAILURE() << "no error";
    } catch (const std::out_of_range& e) {
      running_at_error = running.load();
      EXPECT_STREQ(e.what(), "piece with item 900");
    }
    EXPECT_EQ(running_at_error.load(), 0) << "round " << round;
    EXPECT_TRUE(gpu_done.load()) << "round " << round;
  }
  for (const ws::Bucket& b : s.tables().buckets()) EXPECT_EQ(b.regions, 0u);  // nothing learned
}

// Once a part has failed, the cores claim no more pieces: the region's other work is left
// undone (it fails anyway), and the error comes back without waiting for it.
TEST(Splitter, AFailedPieceStopsTheOtherCoresClaimingMore) {
  auto ex = make_executor(3);
  auto gpu = ws::GpuSide::emulated();
  ws::Splitter s(ex, *gpu, "stop", {1, 1}, {.min_share = 0, .take_tail = true});
  std::atomic<int> items_run{0};
  // The other cores' pieces wait (bounded) for the throw, so that a first core the machine
  // schedules late cannot let them run several pieces each before it fails.
  std::atomic<bool> thrown{false};
  EXPECT_THROW(s.run_fixed(
                   region(960), 0, [](ws::Range, const ws::GpuContext&) {},
                   [&](ws::Range r, std::size_t) {
                     if (r.begin == 0) {
                       thrown = true;
                       throw std::out_of_range("first piece");
                     }
                     const auto until = std::chrono::steady_clock::now() + 10s;
                     while (!thrown.load() && std::chrono::steady_clock::now() < until) {
                       std::this_thread::yield();
                     }
                     std::this_thread::sleep_for(2ms);
                     items_run += static_cast<int>(r.size());
                   },
                   {1.0 / 3, 1.0 / 3, 1.0 / 3}),
               std::out_of_range);
  // Each of the two other cores ran the piece it held when the first failed, and perhaps
  // one it had just claimed: 40 items a piece. All the rest would be 920.
  EXPECT_LE(items_run.load(), 4 * 40);
}

TEST(Splitter, RefusesBadRegionsAndWorkerCallers) {
  auto ex = make_executor(2);
  auto gpu = ws::GpuSide::emulated();
  ws::Splitter s(ex, *gpu, "bad", {1, 1});
  const ws::GpuPart g = [](ws::Range, const ws::GpuContext&) {};
  const ws::CpuPart c = [](ws::Range, std::size_t) {};
  ws::RegionWork w = region(10);
  w.items = -1;
  EXPECT_THROW(s.run(w, g, c), weft::InvalidArgument);
  w = region(10);
  w.grain = 0;
  EXPECT_THROW(s.run(w, g, c), weft::InvalidArgument);
  w = region(10);
  w.work = std::nan("");
  EXPECT_THROW(s.run(w, g, c), weft::InvalidArgument);
  EXPECT_THROW(ex.submit([&] { s.run(region(10), g, c); }).get(), weft::InvalidState);
  EXPECT_THROW(ws::Splitter(ex, *gpu, "", {1, 1}), weft::InvalidArgument);
}

// The message of the weft::Error that `call` throws, or "no exception".
template <class Call>
std::string error_of(Call&& call) {
  try {
    call();
  } catch (const weft::Error& e) {
    return e.what();
  }
  return "no exception";
}

// A region started while another runs, of the same splitter or of another on the same
// executor, would wait in the team's barrier for workers the first holds: it is refused, and
// both splitters run regions afterwards.
TEST(Splitter, ARegionStartedWhileAnotherRunsOnItsExecutorIsRefused) {
  auto ex = make_executor(2);
  auto gpu = ws::GpuSide::emulated();
  ws::Splitter s(ex, *gpu, "first", {1, 1});
  ws::Splitter other(ex, *gpu, "second", {1, 1});
  const ws::CpuPart c = [](ws::Range, std::size_t) {};
  const ws::GpuPart nothing = [](ws::Range, const ws::GpuContext&) {};
  std::string same, shared;
  s.run(
      region(1000),
      [&](ws::Range, const ws::GpuContext&) {
        same = error_of([&] { s.run(region(10), nothing, c); });
        shared = error_of([&] { other.run_fixed(region(10), 0.5, nothing, c); });
      },
      c);
  EXPECT_NE(same.find("a region of 'first' is already running"), std::string::npos) << same;
  EXPECT_NE(shared.find("another splitter's region runs on its executor"), std::string::npos)
      << shared;
  EXPECT_NO_THROW(s.run(region(10), nothing, c));
  EXPECT_NO_THROW(other.run(region(10), nothing, c));
}

// Options and inputs that would crash, hang or lose items are refused, naming them.
TEST(Splitter, RefusesOptionsAndInputsThatWouldCrashHangOrLoseItems) {
  auto ex = make_executor(2);
  auto gpu = ws::GpuSide::emulated();
  ws::SplitOptions classes;
  classes.core_shares = ws::CoreShares::per_class;
  classes.core_class = {0, static_cast<std::size_t>(-1)};
  EXPECT_NE(error_of([&] {
              ws::Splitter(ex, *gpu, "c", {1, 1}, classes);
            }).find("core_class[1] = 18446744073709551615: class ids must be below the cores (2)"),
            std::string::npos);
  ws::SplitOptions many;
  many.buckets = ws::kMaxBuckets + 1;
  EXPECT_NE(error_of([&] {
              ws::Splitter(ex, *gpu, "m", {1, 1}, many);
            }).find("M is at most"),
            std::string::npos);
  ws::SplitOptions point;
  point.size_min = point.size_max = 50;
  EXPECT_NE(error_of([&] {
              ws::Splitter(ex, *gpu, "f", {1, 1}, point);
            }).find("[50.000000, 50"),
            std::string::npos);
  ws::SplitOptions long_window;
  long_window.window = ws::kMaxWindow + 1;
  EXPECT_NE(error_of([&] {
              ws::Splitter(ex, *gpu, "w", {1, 1}, long_window);
            }).find("a rate window of 101 measurements (1 to 100)"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              ws::Splitter(ex, *gpu, std::string("ge\nmm"), {1, 1});
            }).find("control character"),
            std::string::npos);
  // Peak rates at the double's limit: the prior split is still even, not 0.
  const ws::SplitTables huge(2, {1.7e308, 1.7e308}, {});
  EXPECT_DOUBLE_EQ(huge.prior_gsplit(), 0.5);

  ws::Splitter s(ex, *gpu, "inputs", {1, 1});
  const ws::GpuPart g = [](ws::Range, const ws::GpuContext&) {};
  const ws::CpuPart c = [](ws::Range, std::size_t) {};
  EXPECT_NE(error_of([&] { s.run(region(10), {}, c); }).find("an empty GPU part"),
            std::string::npos);
  EXPECT_NE(error_of([&] { s.run(region(10), g, {}); }).find("an empty CPU part"),
            std::string::npos);
  ws::RegionWork scaled = region(10);
  scaled.work_before = [](std::int64_t i) { return 1000.0 * static_cast<double>(i); };
  EXPECT_NE(error_of([&] { s.run(scaled, g, c); }).find("work_before(items) = 10000.000000"),
            std::string::npos);
  scaled.work_before = [](std::int64_t i) { return static_cast<double>(i); };
  EXPECT_NO_THROW(s.run(scaled, g, c));
  ws::RegionWork too_many = region(10);
  too_many.items = ws::kMaxItems + 1;
  EXPECT_THROW(s.run(too_many, g, c), weft::InvalidArgument);
  EXPECT_NE(error_of([&] {
              (void)ws::split_ranges(region(100), std::nan(""), {0.5, 0.5});
            }).find("gsplit nan is outside [0, 1]"),
            std::string::npos);
  EXPECT_NE(error_of([&] { (void)ws::split_ranges(region(100), 0.3, {}); }).find("no core shares"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              (void)ws::split_ranges(region(100), 0.3, {1.5, -0.5});
            }).find("core 1's share -0.500000"),
            std::string::npos);
  EXPECT_EQ(ws::split_ranges(region(100), 1.0, {}).gpu.size(), 100);  // no cores' part: fine
}

// A grain near the largest int64 is one slot: the region runs every item once, where the
// cuts and the cores' cursors used to overflow into endless negative ranges.
TEST(Splitter, AGrainNearTheLargestIntegerRunsEveryItemOnce) {
  auto ex = make_executor(2);
  auto gpu = ws::GpuSide::emulated();
  ws::Splitter s(ex, *gpu, "grain", {1, 1});
  ws::RegionWork w = region(1000);
  w.grain = std::numeric_limits<std::int64_t>::max() - 10;
  std::vector<std::atomic<int>> runs(1000);
  auto count = [&](ws::Range r) {
    ASSERT_GE(r.begin, 0);
    ASSERT_LE(r.end, 1000);
    for (std::int64_t i = r.begin; i < r.end; ++i) runs[static_cast<std::size_t>(i)]++;
  };
  for (const double gsplit : {0.0, 0.5, 1.0}) {
    for (auto& r : runs) r = 0;
    s.run_fixed(
        w, gsplit, [&](ws::Range r, const ws::GpuContext&) { count(r); },
        [&](ws::Range r, std::size_t) { count(r); });
    for (std::size_t i = 0; i < runs.size(); ++i) ASSERT_EQ(runs[i].load(), 1) << "item " << i;
  }
}

TEST(Splitter, AnEmptyRegionRunsNothing) {
  auto ex = make_executor(2);
  auto gpu = ws::GpuSide::emulated();
  ws::Splitter s(ex, *gpu, "empty", {1, 1});
  std::atomic<int> calls{0};
  s.run(
      region(0), [&](ws::Range, const ws::GpuContext&) { calls++; },
      [&](ws::Range, std::size_t) { calls++; });
  EXPECT_EQ(calls.load(), 0);
}

TEST(GpuSide, BestAvailableIsCudaOrEmulated) {
  auto side = ws::GpuSide::best_available();
  EXPECT_FALSE(side->description().empty());
  if (side->is_emulated()) {
    EXPECT_EQ(side->description(), "emulated");
    EXPECT_THROW(ws::GpuSide::cuda(0), weft::InvalidState);
  }
}

// Many short regions, some of whose parts fail at random: every region either covers each item
// exactly once or throws its part's error, and the next region runs as if nothing happened.
TEST(Splitter, StressManyRegionsWithFailingParts) {
  const char* scale_env = std::getenv("WEFT_STRESS_SCALE");
  const double scale = scale_env != nullptr ? std::atof(scale_env) : 1.0;
  const int regions = std::max(20, static_cast<int>(400 * scale));
  auto ex = make_executor(3);
  auto gpu = ws::GpuSide::emulated();
  ws::Splitter s(ex, *gpu, "stress", {2, 1}, {.window = 3, .min_share = 0});
  std::vector<std::atomic<int>> runs(257);
  int failed = 0;
  for (int i = 0; i < regions; ++i) {
    for (auto& r : runs) r = 0;
    const int fail_core = i % 7 == 3 ? i % 3 : -1;
    const bool fail_gpu = i % 11 == 5;
    auto mark = [&](ws::Range r) {
      for (auto k = r.begin; k < r.end; ++k) runs[static_cast<std::size_t>(k)]++;
    };
    std::atomic<bool> threw{false};  // a part given no items is not called, and cannot fail
    bool region_failed = false;
    try {
      s.run(
          region(257, 10 + i % 50),
          [&](ws::Range r, const ws::GpuContext&) {
            mark(r);
            if (fail_gpu) {
              threw = true;
              throw std::runtime_error("gpu");
            }
          },
          [&](ws::Range r, std::size_t core) {
            mark(r);
            if (static_cast<int>(core) == fail_core) {
              threw = true;
              throw std::runtime_error("core");
            }
          });
      ASSERT_FALSE(threw.load()) << "region " << i << " hid its error";
    } catch (const std::runtime_error&) {
      ASSERT_TRUE(threw.load()) << "region " << i;
      ++failed;
      region_failed = true;
    }
    // A region that succeeded ran every item once; one that failed ran none twice (once a part
    // failed, the cores claim no more pieces, so some items may not have run).
    for (auto& r : runs) {
      if (region_failed) {
        ASSERT_LE(r.load(), 1) << "region " << i;
      } else {
        ASSERT_EQ(r.load(), 1) << "region " << i;
      }
    }
  }
  EXPECT_GT(failed, 0);
}
