// weft/split/tables.hpp - the split tables of seed 002: DB1, the GPU's share of a region by size
// bucket, and DB2, each core's share of the CPU's part, both learned from measured rates.
//
//   weft::split::SplitTables t(/*cores=*/15, {.gpu = 60e12, .cpu = 0.6e12}, {});
//   const std::size_t b = t.bucket_of(size);   // DB1's bucket of this region's size F
//   double g = t.gsplit(b);                    // the GPU's share of the work S
//   ... run the region, time each part ...
//   t.update(b, timing);                       // DB1[b] and DB2 from the measured rates
//
// The seed overwrites a bucket's split with Pgpu' / (Pgpu' + Pcpu') of the last region alone
// (Pgpu' = S_gpu / T_gpu, Pcpu' = S_cpu / max_j T_j) and DB2 with P_j / sum P. Here each rate is
// instead the median of its last `window` measurements, so that one outlier (a page-fault
// storm, a preempted core) cannot send the next region's work to one side; window = 1 is the
// seed's overwrite. A bucket that has never been measured borrows the rates of its nearest
// measured bucket before it falls back to the peak prior: sizes close together split alike,
// and an LU whose trailing update visits each size once would otherwise run every bucket of
// its first factorisation at the peak split.
//
// The seed's rule balances the two sides as if each ran at the same rate alone as beside the
// other. Where they share what limits them (host memory bandwidth, which the GPU's copies and
// the cores' loads both draw on), a balanced split can take longer than the faster side alone.
// So each bucket also keeps what a region cost per unit of work split and with the side that
// takes most of the work alone; once the cost of a split near the balanced one is known, one
// region runs that side alone to measure it (unless a neighbouring bucket has, or the side's
// peak rate could not beat that cost), and the side alone is kept where it is at least 5%
// cheaper. A bucket that goes alone
// runs one split region again every `revisit` regions, so that a change of the machine is seen.
// docs/split.md gives the method; docs/decisions/031-split-smoothing-and-alone.md the
// measurements behind these choices.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace weft::split {

/// How the CPU's part is divided among its cores (DB2).
enum class CoreShares : std::uint8_t {
  /// A share per core, learned from each core's own rate (the seed's DB2).
  per_core,
  /// A share per class of cores (SplitOptions::core_class), the cores of a class sharing it
  /// equally: fewer, steadier estimates where cores are alike within a class.
  per_class,
};

/// Options of the split tables.
struct SplitOptions {
  /// M, the size buckets of DB1 (the seed used 50..200). At least 1.
  std::size_t buckets = 100;
  /// [Fmin, Fmax]: bucket i holds sizes from Fmin + i (Fmax - Fmin) / (M - 1); a size at or
  /// above the last bucket's start uses the last bucket, one below Fmin the first. Both 0:
  /// set from the first region's size F to [0, 2F].
  double size_min = 0;
  double size_max = 0;
  /// Each rate is the median of its last `window` measurements; 1 is the seed's overwrite. At
  /// least 1.
  std::size_t window = 5;
  CoreShares core_shares = CoreShares::per_core;
  /// With per_class: the class of each core, core j (worker j) in class core_class[j].
  std::vector<std::size_t> core_class{};
  /// A side whose share of the work would fall below this fraction gets none: the region goes
  /// all to the GPU or all to the CPU rather than paying a part's fixed costs for a sliver.
  /// In [0, 0.5).
  double min_share = 0.01;
  /// Compare the balanced split with the larger side alone (above) and keep the cheaper.
  bool try_alone = true;
  /// A bucket that goes alone runs a split region again after this many regions. At least 1.
  std::size_t revisit = 16;
  /// A bucket's split regions keep the split they last ran at while the balanced split stays
  /// within this of it. In [0, 0.5).
  double deadband = 0.01;
  /// Cores that finish their own range take pieces of the ranges still running (CALDGEMM's
  /// remedy for the slowest core deciding the CPU's time): each core's range then runs in
  /// pieces, the CPU part is called once per piece, and each core's rate is learned from the
  /// work it did (on by default: docs/decisions/033-idle-cores-take-the-tail.md). Off: each
  /// core runs its own range in one call.
  bool take_tail = true;
};

/// The prior: peak rates, in the region's units of work per second, of the GPU and of all the
/// cores that take part together (the seed: theoretical peaks, Pgpu / (Pgpu + Pcpu)). Absolute
/// rates, not only their ratio: a side is not probed alone where its peak rate could not beat
/// the split's measured cost (SplitOptions::try_alone).
struct PeakRates {
  double gpu = 0;
  double cpu = 0;
};

/// What one region measured: the work each side and each core was given, and the seconds from
/// the region's start until each finished it.
struct RegionTiming {
  double seconds = 0;  // the whole region; 0: the later of the parts
  double gpu_work = 0;
  double gpu_seconds = 0;
  std::vector<double> core_work;     // per core (worker index)
  std::vector<double> core_seconds;  // per core; ignored where core_work is 0
};

/// The median of the last few measurements of a rate.
class RateEstimate {
 public:
  RateEstimate() : RateEstimate(5) {}
  explicit RateEstimate(std::size_t window);
  /// Adds one measurement (> 0 and finite; others are ignored).
  void add(double rate);
  [[nodiscard]] bool empty() const noexcept { return recent_.empty(); }
  /// The median of the recent measurements; 0 when empty.
  [[nodiscard]] double value() const;
  /// The recent measurements, oldest first (for the store).
  [[nodiscard]] const std::vector<double>& recent() const noexcept { return recent_; }
  [[nodiscard]] std::size_t window() const noexcept { return window_; }

 private:
  std::size_t window_;
  std::vector<double> recent_;
};

/// One row of DB1.
struct Bucket {
  double size_from = 0;  // F_i
  /// The rates measured in split regions (a side alone runs faster than beside the other, so
  /// regions that ran one side alone add only to its alone cost below), and the split the
  /// oldest of them ran at: a region far from it starts them again.
  RateEstimate gpu_rate;
  RateEstimate cpu_rate;  // all cores together
  double window_split = std::numeric_limits<double>::quiet_NaN();
  /// The split the bucket's last split region ran at (see SplitOptions::deadband).
  double applied_split = std::numeric_limits<double>::quiet_NaN();
  std::uint64_t regions = 0;
  /// The split the bucket's last region ran with, and the split that would have balanced it
  /// (its own measured rates alone): predicted against measured, for `weft split show`.
  double last_used = std::numeric_limits<double>::quiet_NaN();
  double last_balanced = std::numeric_limits<double>::quiet_NaN();
  /// Seconds per unit of work of the regions that ran split, GPU alone and CPU alone.
  RateEstimate split_cost;
  RateEstimate gpu_alone_cost;
  RateEstimate cpu_alone_cost;
  /// Regions since the bucket last ran split (for `revisit`).
  std::uint64_t since_split = 0;
};

/// The most size buckets (M) a table may have.
inline constexpr std::size_t kMaxBuckets = 100000;
/// The longest rate window (SplitOptions::window) a table may have: what the store keeps.
inline constexpr std::size_t kMaxWindow = 100;

/// DB1 and DB2. Not thread-safe: the splitter that owns it updates it between regions.
class SplitTables {
 public:
  /// `cores` takes part in the CPU's part. Throws weft::InvalidArgument for 0 cores, bad options
  /// (buckets 0 or above kMaxBuckets, window 0 or above kMaxWindow, min_share outside [0, 0.5),
  /// size_max < size_min
  /// or both equal and not 0, a core_class of the wrong length or with a class id >= cores
  /// under per_class) or a prior that is not positive and finite.
  SplitTables(std::size_t cores, PeakRates prior, SplitOptions options);

  /// The bucket of size F (setting [Fmin, Fmax] from it on the first call when they were 0).
  /// Throws weft::InvalidArgument for a size that is negative or not finite.
  std::size_t bucket_of(double size);
  /// The GPU's share of the work for a region of bucket `b`, in [0, 1]: the balanced split, or
  /// a side alone where that was measured cheaper (or is to be measured next).
  [[nodiscard]] double gsplit(std::size_t b) const;
  /// The split that balances the two sides' rates for bucket `b` (the seed's Gsplit), in [0, 1].
  [[nodiscard]] double balanced_gsplit(std::size_t b) const;
  /// The split of bucket `b` from the prior alone (the seed's static split).
  [[nodiscard]] double prior_gsplit() const;
  /// Each core's share of the CPU's part (DB2); they sum to 1.
  [[nodiscard]] std::vector<double> csplit() const;
  /// Learns from one region of bucket `b`. A side that was given no work learns nothing.
  /// Throws weft::InvalidArgument for a timing whose per-core vectors have the wrong length.
  void update(std::size_t b, const RegionTiming& timing);

  [[nodiscard]] std::size_t cores() const noexcept { return cores_; }
  [[nodiscard]] const PeakRates& prior() const noexcept { return prior_; }
  [[nodiscard]] const SplitOptions& options() const noexcept { return options_; }
  [[nodiscard]] bool size_range_set() const noexcept { return range_set_; }
  [[nodiscard]] const std::vector<Bucket>& buckets() const noexcept { return buckets_; }
  /// DB2's rate estimates: one per core (per_core) or per class (per_class).
  [[nodiscard]] const std::vector<RateEstimate>& share_rates() const noexcept {
    return share_rates_;
  }

  // ---- for the store: restoring learned state --------------------------------------------
  /// Sets [Fmin, Fmax] (recomputing the buckets' starts). Throws as the constructor does.
  void set_size_range(double size_min, double size_max);
  /// Replaces bucket `b`'s learned state (all of `state` but its size_from; each estimate keeps
  /// its last `window` measurements).
  void restore_bucket(std::size_t b, const Bucket& state);
  /// Replaces DB2's rate estimate `i` (a core's, or a class's).
  void restore_share_rate(std::size_t i, const std::vector<double>& rates);

 private:
  [[nodiscard]] double steadied(std::size_t b, double balanced) const;
  [[nodiscard]] bool alone_could_win(bool gpu, double split_cost) const;
  [[nodiscard]] double rate_for(std::size_t b, RateEstimate Bucket::*side,
                                RateEstimate Bucket::*alone_cost, double prior) const;
  /// The nearest measured bucket's value of `what` (0 when none has one).
  [[nodiscard]] double nearest(std::size_t b, RateEstimate Bucket::*what) const;
  [[nodiscard]] double gpu_rate_for(std::size_t b) const;
  [[nodiscard]] double cpu_rate_for(std::size_t b) const;
  [[nodiscard]] double clamp_share(double g) const;
  void learn_core_rates(const RegionTiming& timing);

  std::size_t cores_;
  PeakRates prior_;
  SplitOptions options_;
  bool range_set_ = false;
  std::vector<Bucket> buckets_;
  std::vector<RateEstimate> share_rates_;
  std::size_t classes_ = 0;
};

}  // namespace weft::split
