// weft/split/splitter.hpp - adaptive two-level CPU/GPU work splitting (seed 002): a data-parallel
// region of `items` is cut once between the GPU and the CPU (DB1's share for the region's size)
// and the CPU's part again between the cores (DB2); both parts run at once, each is timed, and
// the tables learn from the measured rates for the next region.
//
//   weft::cpu::Executor ex({.workers = cores - 1, .pinning = weft::cpu::Pinning::always});
//   auto gpu = weft::split::GpuSide::best_available();          // CUDA device 0, or emulated
//   weft::split::Splitter split(ex, *gpu, "gemm_rows", {.gpu = 50e12, .cpu = 0.5e12});
//   weft::split::RegionWork w{.size = flops, .work = flops, .items = m};
//   auto report = split.run(w,
//       [&](weft::split::Range r, const weft::split::GpuContext& g) {   // rows r on the GPU:
//         copy_in_async(r, g.stream); cublas_gemm(r, g.stream); copy_out_async(r, g.stream);
//       },
//       [&](weft::split::Range r, std::size_t core) { cblas_gemm(r); }); // rows r on one core
//
// The calling thread feeds the GPU: it calls the GPU part, which enqueues its work on the
// GPU context's stream, and waits for that stream. The seed leaves this core out of the CPU's
// part; here the CPU's part runs on the executor's workers, one share per worker, so give the
// executor one worker fewer than the machine's cores and bind them (Pinning::always binds
// worker i to unit i, leaving the last unit to the caller). docs/split.md says more.
//
// Every region's parts either all complete, or the region throws the first error after every
// part that started has finished: no part is left running.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "weft/split/tables.hpp"

// cudaStream_t as CUDA declares it, so that this header does not need CUDA's.
struct CUstream_st;
using cudaStream_t = CUstream_st*;

namespace weft::cpu {
class Executor;
}

namespace weft::split {

class SplitStore;

/// A range of items [begin, end).
struct Range {
  std::int64_t begin = 0;
  std::int64_t end = 0;
  [[nodiscard]] std::int64_t size() const noexcept { return end - begin; }
  [[nodiscard]] bool empty() const noexcept { return end <= begin; }
  friend bool operator==(const Range&, const Range&) = default;
};

/// What the GPU part is given. On a CUDA device the part enqueues its work (copies, kernels,
/// cuBLAS calls) on `stream` and returns; the splitter waits for the stream. On the emulated
/// device (`emulated`, `stream` null) the part does its work on the host before it returns.
struct GpuContext {
  cudaStream_t stream = nullptr;
  int device = -1;
  bool emulated = false;
};

/// Where a region's GPU part runs: a CUDA device with a stream of its own, or the graph layer's
/// emulated device (a host thread standing in for the GPU, so that CI runs every step of the
/// splitter without one).
class GpuSide {
 public:
  /// CUDA device `ordinal` with a new non-blocking stream. Throws weft::InvalidState naming why
  /// when weft was built without CUDA or there is no such device, weft::CudaError when the
  /// device is there but a CUDA call on it fails.
  static std::unique_ptr<GpuSide> cuda(int ordinal = 0);
  /// The emulated device.
  static std::unique_ptr<GpuSide> emulated();
  /// CUDA device 0 when there is one that works, else the emulated device.
  static std::unique_ptr<GpuSide> best_available();

  virtual ~GpuSide() = default;
  /// Names the device and what it runs on ("NVIDIA H100 80GB HBM3, driver 13000, cc 9.0" or
  /// "emulated"): part of the split tables' key, so that tables learned on one device are not
  /// used on another.
  [[nodiscard]] virtual std::string description() const = 0;
  [[nodiscard]] virtual bool is_emulated() const noexcept = 0;
  /// Runs `part` with this side's context and returns when its work is complete. Throws what
  /// `part` threw, or weft::CudaError for an error of the stream.
  virtual void run(const std::function<void(const GpuContext&)>& part) = 0;
};

/// One region: its size F (the key of DB1's buckets, in any unit that grows with the problem),
/// its work S (in the unit of the peak rates, e.g. floating-point operations), and the items
/// [0, items) that are split. Items are taken to carry equal work unless `work_before` says how
/// much work lies before item i (non-decreasing, 0 at 0 and `work` at `items`: both ends are
/// checked, weft::InvalidArgument), for items of unequal cost (rows of a sparse matrix). Split
/// points fall on multiples of `grain` (and at `items`).
struct RegionWork {
  double size = 0;
  double work = 0;
  std::int64_t items = 0;
  std::int64_t grain = 1;
  std::function<double(std::int64_t)> work_before{};
};

using GpuPart = std::function<void(Range, const GpuContext&)>;
/// The CPU's part for one core: the items and that core's index (its worker's index). Called
/// once per core and region, with the core's range; with SplitOptions::take_tail, once per
/// piece instead, on pieces of its own range and then of other cores' ranges still running.
using CpuPart = std::function<void(Range, std::size_t core)>;

/// What a region did.
struct RegionReport {
  std::size_t bucket = 0;
  double gsplit = 0;  // the GPU's share of the work it ran with (the one asked for, on the grain)
  Range gpu;
  std::vector<Range> cores;  // per core, as split (with take_tail, others may take a part)
  double gpu_seconds = 0;    // from the region's start until the GPU part was complete
  double cpu_seconds = 0;    // from the region's start until the last core was done
  std::vector<double> core_seconds;
  std::vector<double> core_work;  // per core, the work it did
  double seconds = 0;             // the whole region
  double next_gsplit = 0;         // the bucket's split after learning from this region
  /// Why the attached store could not save the tables after this region (empty: saved, or no
  /// store). The region itself succeeded and the tables in memory learned from it.
  std::string store_error;
};

/// Runs regions split between a GPU side and an executor's workers, learning as it goes.
/// One region at a time, and one region at a time on an executor: a region started while
/// another of this splitter, or of any splitter on the same executor, is running (from another
/// thread, or from inside a part) throws weft::InvalidState instead of deadlocking.
class Splitter {
 public:
  /// `region` names the tables (the store's key). The CPU's part runs on every worker of `ex`,
  /// which must be idle during a region (its participants all run at once). Throws
  /// weft::InvalidArgument for an empty region name and as SplitTables does.
  Splitter(cpu::Executor& ex, GpuSide& gpu, std::string region, PeakRates prior,
           SplitOptions options = {});
  ~Splitter();
  Splitter(const Splitter&) = delete;
  Splitter& operator=(const Splitter&) = delete;

  /// Runs a region with the learned split and learns from it, then saves the tables to the
  /// attached store, if any (a failed save is reported in RegionReport::store_error). Throws
  /// weft::InvalidArgument for a region with negative items (or more than kMaxItems), a grain
  /// < 1, work that is negative or not finite, or an empty part; weft::InvalidState when called
  /// from one of the executor's workers or while a region runs (above); and rethrows the first
  /// error of a part once every part has finished (the tables then learn nothing).
  RegionReport run(const RegionWork& work, const GpuPart& gpu, const CpuPart& cpu);
  /// Runs a region with the GPU's share fixed at `gsplit` (in [0, 1]) and the cores' shares
  /// `core_shares` (one per core, summing to 1; empty: DB2's current ones), learning nothing:
  /// the static splits a benchmark compares against. Throws weft::InvalidArgument for a gsplit
  /// outside [0, 1] or core shares of the wrong length, negative or not summing to 1.
  RegionReport run_fixed(const RegionWork& work, double gsplit, const GpuPart& gpu,
                         const CpuPart& cpu, std::vector<double> core_shares = {});

  /// Loads this region's tables from `store` (when it holds valid ones for this machine, device
  /// and options) and saves them there after every region from now on. `machine` names the
  /// host (the store's key). Returns whether tables were loaded. A load that throws leaves the
  /// splitter as it was, unattached; a splitter attaches once (weft::InvalidState after).
  bool attach(SplitStore& store, const std::string& machine);

  [[nodiscard]] const SplitTables& tables() const noexcept { return tables_; }
  [[nodiscard]] const std::string& region() const noexcept { return region_; }
  [[nodiscard]] std::size_t cores() const noexcept { return tables_.cores(); }
  [[nodiscard]] const GpuSide& gpu_side() const noexcept { return gpu_; }

 private:
  RegionReport run_split(const RegionWork& work, std::size_t bucket, double gsplit,
                         const std::vector<double>& core_shares, const GpuPart& gpu,
                         const CpuPart& cpu);
  void check_parts(const GpuPart& gpu, const CpuPart& cpu) const;
  void save();

  cpu::Executor& ex_;
  GpuSide& gpu_;
  std::string region_;
  SplitTables tables_;
  SplitStore* store_ = nullptr;
  std::string machine_;
  // Set while a region runs (acq_rel exchange on entry, release store on exit: each region's
  // use of the tables happens before the next region's).
  std::atomic<bool> running_{false};
};

/// The most items a region may have: the cuts and the cores' cursors add a grain or a piece to
/// an item index, which must not overflow.
inline constexpr std::int64_t kMaxItems = std::int64_t{1} << 60;

/// Cuts [0, work.items) into the GPU's range (first) and one range per core, in core order, so
/// that the GPU gets about `gsplit` of the work and core j about (1 - gsplit) * csplit[j], split
/// points on multiples of work.grain. Exposed for tests and for callers that split by hand.
/// Throws weft::InvalidArgument as Splitter::run does for the region, for a gsplit outside
/// [0, 1], and for csplit empty (with items for the cores) or holding a share that is negative
/// or not finite.
struct SplitRanges {
  Range gpu;
  std::vector<Range> cores;
};
SplitRanges split_ranges(const RegionWork& work, double gsplit, const std::vector<double>& csplit);

/// The work lying in `r` (work.work_before, or proportional to items).
double work_in(const RegionWork& work, Range r);

/// The seed's classes of the CPU part's cores, for CoreShares::per_class (SplitOptions::
/// core_class): worker j is in class 0 where its unit shares a cache with `feeding_pu` (the
/// unit of the thread that feeds the GPU, which the seed keeps out of the CPU's part: its
/// traffic slows the cores beside it), in class 1 where not. Every worker is in class 0 (one
/// class: DB2 stays equal) where all are alike, where the workers are not bound to units
/// (ExecutorOptions::pinning) or where the machine's caches are unknown.
std::vector<std::size_t> seed_core_classes(const cpu::Executor& ex, std::size_t feeding_pu);

}  // namespace weft::split
