// The adaptive splitter (include/weft/split/splitter.hpp): cuts a region by the tables, runs the
// GPU part on the calling thread and the CPU's shares on the executor's workers at once, times
// each from the region's common start, and learns.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <mutex>
#include <set>
#include <string>

#include "common/flag_claim.hpp"
#include "graph/device/device_backend.hpp"
#include "weft/cpu/executor.hpp"
#include "weft/cpu/team.hpp"
#include "weft/cpu/topology.hpp"
#include "weft/error.hpp"
#include "weft/split/splitter.hpp"
#include "weft/split/store.hpp"

namespace weft::split {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The graph layer's emulated device: the GPU part runs on its stream's thread, in order, while
// the feeding thread waits for the stream as it would for a CUDA stream.
class EmulatedSide final : public GpuSide {
 public:
  EmulatedSide() : device_(graph::detail::make_emulated_device(1)) {}

  [[nodiscard]] std::string description() const override { return "emulated"; }
  [[nodiscard]] bool is_emulated() const noexcept override { return true; }

  void run(const std::function<void(const GpuContext&)>& part) override {
    std::exception_ptr error;
    device_->on_host(0, [&](std::exception_ptr earlier) {
      if (earlier) {
        error = earlier;
        return;
      }
      try {
        part(GpuContext{nullptr, -1, true});
      } catch (...) {
        error = std::current_exception();
      }
    });
    device_->synchronize();  // orders `error`'s write before this read
    if (error) std::rethrow_exception(error);
  }

 private:
  std::unique_ptr<graph::detail::DeviceBackend> device_;
};

void check_work(const RegionWork& w) {
  const char* what = nullptr;
  if (w.items < 0) what = "a negative number of items";
  if (w.items > kMaxItems) what = "more items than a region may have (2^60)";
  if (w.grain < 1) what = "a grain below 1";
  if (!std::isfinite(w.work) || w.work < 0) what = "work that is negative or not finite";
  if (!std::isfinite(w.size) || w.size < 0) what = "a size that is negative or not finite";
  if (what != nullptr) throw InvalidArgument(std::string("weft::split: a region with ") + what);
  // work_before must run from 0 to the work: its fractions are where the cuts fall (the
  // values between are the caller's; both ends are checked here, once a region).
  if (w.work_before && w.work > 0 && w.items > 0) {
    const double first = w.work_before(0), last = w.work_before(w.items);
    const double tolerance = 1e-9 * w.work;
    if (!(std::abs(first) <= tolerance) || !(std::abs(last - w.work) <= 1e-6 * w.work)) {
      throw InvalidArgument(
          "weft::split: a region whose work_before(0) = " + std::to_string(first) +
          " and work_before(items) = " + std::to_string(last) + " are not 0 and the work " +
          std::to_string(w.work));
    }
  }
}

// The fraction of the region's work before item i.
double fraction_before(const RegionWork& w, std::int64_t i) {
  if (w.items == 0) return 0;
  if (w.work_before && w.work > 0) return w.work_before(i) / w.work;
  return static_cast<double>(i) / static_cast<double>(w.items);
}

// The item boundary, on a multiple of the grain (or the end), whose fraction of the work
// before it is nearest to `target`.
std::int64_t cut_at(const RegionWork& w, double target) {
  if (target <= 0) return 0;
  if (target >= 1) return w.items;
  // Boundaries 1..slots; written so that neither a grain near 2^63 nor the product overflows.
  const std::int64_t slots = w.items / w.grain + (w.items % w.grain != 0 ? 1 : 0);
  auto boundary = [&](std::int64_t k) { return k >= slots ? w.items : k * w.grain; };
  std::int64_t lo = 0;
  std::int64_t hi = slots;  // fraction_before(boundary(hi)) = 1 >= target
  while (lo < hi) {         // the first boundary at or past the target
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (fraction_before(w, boundary(mid)) < target) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  if (lo > 0 &&
      target - fraction_before(w, boundary(lo - 1)) < fraction_before(w, boundary(lo)) - target) {
    --lo;
  }
  return boundary(lo);
}

}  // namespace

std::unique_ptr<GpuSide> GpuSide::emulated() { return std::make_unique<EmulatedSide>(); }

std::unique_ptr<GpuSide> GpuSide::best_available() {
  try {
    return cuda(0);
  } catch (const Error&) {
    return emulated();
  }
}

namespace {

// Holds the splitter's running flag and its executor for one region, released on every way
// out. The executor claim is process-wide: two splitters on one executor would each wait in a
// team barrier for workers the other holds.
class OneRegionAtATime {
 public:
  OneRegionAtATime(std::atomic<bool>& running, const cpu::Executor& ex, const std::string& region)
      : running_(running, "weft::split::Splitter: a region of '" + region +
                              "' is already running (one region at a time; run() is not "
                              "reentrant)"),
        ex_(&ex) {
    const std::lock_guard lock(busy_mutex());
    if (!busy_executors().insert(ex_).second) {
      throw InvalidState("weft::split::Splitter: region '" + region +
                         "' was started while another splitter's region runs on its executor");
    }
  }
  ~OneRegionAtATime() {
    const std::lock_guard lock(busy_mutex());
    busy_executors().erase(ex_);
  }
  OneRegionAtATime(const OneRegionAtATime&) = delete;
  OneRegionAtATime& operator=(const OneRegionAtATime&) = delete;

 private:
  static std::mutex& busy_mutex() {
    static std::mutex m;
    return m;
  }
  static std::set<const cpu::Executor*>& busy_executors() {
    static std::set<const cpu::Executor*> s;
    return s;
  }
  weft::detail::FlagClaim running_;  // released after the executor (declared first)
  const cpu::Executor* ex_;
};

// The CPU's ranges as the cores claim them. Without tail-taking a core claims its own range
// whole, once. With it, each range is cut into pieces (about kPiecesPerRange, on the grain)
// claimed from the front by a cursor per range; a core out of its own takes from the range
// with the most items left. A piece is claimed by one fetch_add, so it runs once; relaxed: a
// claim orders nothing else (what the pieces write is the parts' business, and the region's
// end joins every core).
class TailPieces {
 public:
  TailPieces(const RegionWork& w, const std::vector<Range>& ranges, bool take_tail)
      : ranges_(ranges), take_tail_(take_tail), next_(ranges.size()), piece_(ranges.size()) {
    for (std::size_t j = 0; j < ranges.size(); ++j) {
      next_[j].store(ranges[j].begin, std::memory_order_relaxed);
      const std::int64_t size = ranges[j].size();
      const std::int64_t pieces = take_tail ? kPiecesPerRange : 1;
      const std::int64_t rough = std::max<std::int64_t>(1, (size + pieces - 1) / pieces);
      // On the grain, but never past the range: a cursor then moves at most one range's size
      // past its end per claim, far from overflowing (items <= kMaxItems).
      const std::int64_t on_grain =
          rough <= w.grain ? w.grain : rough / w.grain * w.grain + (rough % w.grain ? w.grain : 0);
      piece_[j] = std::max<std::int64_t>(1, std::min(on_grain, size));
    }
  }
  // The next piece for `core` into `out`; false when it has none left to run.
  bool claim(std::size_t core, Range& out) {
    if (claim_from(core, out)) return true;
    if (!take_tail_) return false;
    for (;;) {
      std::size_t most = core;
      std::int64_t most_left = 0;
      for (std::size_t j = 0; j < ranges_.size(); ++j) {
        const std::int64_t left = ranges_[j].end - next_[j].load(std::memory_order_relaxed);
        if (left > most_left) {
          most_left = left;
          most = j;
        }
      }
      if (most_left <= 0) return false;
      if (claim_from(most, out)) return true;
    }
  }

 private:
  static constexpr std::int64_t kPiecesPerRange = 8;
  bool claim_from(std::size_t j, Range& out) {
    const std::int64_t begin = next_[j].fetch_add(piece_[j], std::memory_order_relaxed);
    if (begin >= ranges_[j].end) return false;
    out = {begin, std::min(begin + piece_[j], ranges_[j].end)};
    return true;
  }

  const std::vector<Range>& ranges_;
  bool take_tail_;
  std::vector<std::atomic<std::int64_t>> next_;
  std::vector<std::int64_t> piece_;
};

}  // namespace

double work_in(const RegionWork& w, Range r) {
  return w.work * (fraction_before(w, r.end) - fraction_before(w, r.begin));
}

namespace {

// The cut itself, for arguments already checked (Splitter::run_split's come checked from
// run and run_fixed).
SplitRanges cut_ranges(const RegionWork& w, double gsplit, const std::vector<double>& csplit) {
  SplitRanges out;
  const std::int64_t gpu_end = cut_at(w, gsplit);
  out.gpu = {0, gpu_end};
  double before = gsplit;
  std::int64_t begin = gpu_end;
  for (std::size_t j = 0; j < csplit.size(); ++j) {
    before += (1 - gsplit) * csplit[j];
    const std::int64_t end =
        j + 1 == csplit.size() ? w.items : std::max(begin, cut_at(w, std::min(before, 1.0)));
    out.cores.push_back({begin, end});
    begin = end;
  }
  return out;
}

}  // namespace

SplitRanges split_ranges(const RegionWork& w, double gsplit, const std::vector<double>& csplit) {
  check_work(w);
  if (!(gsplit >= 0 && gsplit <= 1)) {
    throw InvalidArgument("weft::split::split_ranges: gsplit " + std::to_string(gsplit) +
                          " is outside [0, 1]");
  }
  if (csplit.empty() && gsplit < 1 && w.items > 0) {
    throw InvalidArgument("weft::split::split_ranges: no core shares for the cores' part");
  }
  for (std::size_t j = 0; j < csplit.size(); ++j) {
    if (!(csplit[j] >= 0) || !std::isfinite(csplit[j])) {
      throw InvalidArgument("weft::split::split_ranges: core " + std::to_string(j) + "'s share " +
                            std::to_string(csplit[j]) + " is negative or not finite");
    }
  }
  return cut_ranges(w, gsplit, csplit);
}

Splitter::Splitter(cpu::Executor& ex, GpuSide& gpu, std::string region, PeakRates prior,
                   SplitOptions options)
    : ex_(ex),
      gpu_(gpu),
      region_(std::move(region)),
      tables_(ex.num_workers(), prior, std::move(options)) {
  if (region_.empty()) throw InvalidArgument("weft::split::Splitter: an empty region name");
  for (const char c : region_) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      throw InvalidArgument("weft::split::Splitter: region name with a control character");
    }
  }
}

Splitter::~Splitter() = default;

bool Splitter::attach(SplitStore& store, const std::string& machine) {
  if (machine.empty()) throw InvalidArgument("weft::split::Splitter::attach: an empty machine");
  if (store_ != nullptr) {
    throw InvalidState("weft::split::Splitter::attach: already attached (machine " + machine_ +
                       "); one store per splitter");
  }
  // Into a copy: a load that throws leaves the tables, and the splitter unattached, as they were.
  SplitTables loaded = tables_;
  const bool found =
      store.load({machine, region_, gpu_.description()}, loaded) == SplitStore::Load::loaded;
  tables_ = std::move(loaded);
  store_ = &store;
  machine_ = machine;
  return found;
}

void Splitter::save() {
  if (store_ != nullptr) store_->save({machine_, region_, gpu_.description()}, tables_);
}

void Splitter::check_parts(const GpuPart& gpu, const CpuPart& cpu) const {
  if (!gpu || !cpu) {
    throw InvalidArgument(std::string("weft::split::Splitter: region '") + region_ +
                          "' was given an empty " + (!gpu ? "GPU" : "CPU") + " part");
  }
}

RegionReport Splitter::run(const RegionWork& work, const GpuPart& gpu, const CpuPart& cpu) {
  check_work(work);
  check_parts(gpu, cpu);
  const OneRegionAtATime guard(running_, ex_, region_);  // over the tables' reads and update
  const std::size_t bucket = tables_.bucket_of(work.size);
  RegionReport report = run_split(work, bucket, tables_.gsplit(bucket), tables_.csplit(), gpu, cpu);
  RegionTiming timing;
  timing.seconds = report.seconds;
  timing.gpu_work = work_in(work, report.gpu);
  timing.gpu_seconds = report.gpu_seconds;
  for (std::size_t j = 0; j < report.cores.size(); ++j) {
    timing.core_work.push_back(report.core_work[j]);
    timing.core_seconds.push_back(report.core_seconds[j]);
  }
  tables_.update(bucket, timing);
  report.next_gsplit = tables_.gsplit(bucket);
  // The region succeeded and the tables learned from it: a store that cannot take them is
  // reported with the region rather than thrown, which would lose the report and make the
  // caller believe the region failed.
  try {
    save();
  } catch (const std::exception& e) {
    report.store_error = e.what();
  }
  return report;
}

RegionReport Splitter::run_fixed(const RegionWork& work, double gsplit, const GpuPart& gpu,
                                 const CpuPart& cpu, std::vector<double> core_shares) {
  check_work(work);
  check_parts(gpu, cpu);
  const OneRegionAtATime guard(running_, ex_, region_);
  if (!(gsplit >= 0 && gsplit <= 1)) {
    throw InvalidArgument("weft::split::Splitter::run_fixed: gsplit " + std::to_string(gsplit) +
                          " is outside [0, 1]");
  }
  if (core_shares.empty()) core_shares = tables_.csplit();
  double sum = 0;
  for (double c : core_shares) sum += c >= 0 ? c : std::nan("");
  if (core_shares.size() != tables_.cores() || !(std::abs(sum - 1) < 1e-9)) {
    throw InvalidArgument(
        "weft::split::Splitter::run_fixed: " + std::to_string(core_shares.size()) +
        " core shares for " + std::to_string(tables_.cores()) +
        " cores, or shares that are negative or do not sum to 1");
  }
  RegionReport report =
      run_split(work, tables_.bucket_of(work.size), gsplit, core_shares, gpu, cpu);
  report.next_gsplit = gsplit;  // nothing learned
  return report;
}

RegionReport Splitter::run_split(const RegionWork& work, std::size_t bucket, double gsplit,
                                 const std::vector<double>& core_shares, const GpuPart& gpu,
                                 const CpuPart& cpu) {
  if (ex_.this_worker_index() >= 0) {
    throw InvalidState(
        "weft::split::Splitter: a region was started on one of its executor's workers (the "
        "CPU's part needs every worker; start regions from another thread)");
  }

  const std::size_t cores = tables_.cores();
  const SplitRanges ranges = cut_ranges(work, gsplit, core_shares);
  RegionReport report;
  report.bucket = bucket;
  report.gsplit = work.work > 0 ? work_in(work, ranges.gpu) / work.work : gsplit;
  report.gpu = ranges.gpu;
  report.cores = ranges.cores;
  report.core_seconds.assign(cores, 0);
  report.core_work.assign(cores, 0);
  TailPieces pieces(work, ranges.cores, tables_.options().take_tail);

  std::mutex error_mutex;
  std::exception_ptr first_error;
  // Once a part has failed, the cores claim no more pieces (the region fails anyway); the
  // pieces running then finish. relaxed: a hint, read before each claim.
  std::atomic<bool> failed{false};
  auto keep_error = [&] {
    failed.store(true, std::memory_order_relaxed);
    const std::lock_guard lock(error_mutex);
    if (!first_error) first_error = std::current_exception();
  };
  const bool cpu_has_work = std::any_of(ranges.cores.begin(), ranges.cores.end(),
                                        [](const Range& r) { return !r.empty(); });
  const Clock::time_point t0 = Clock::now();
  // Every worker runs one participant: after the barrier each sits on a worker of its own, and
  // takes the share of that worker (core), so that DB2's entry j always describes core j.
  cpu::Future<void> cpu_done;
  if (cpu_has_work) {
    cpu_done = ex_.submit([&] {
      cpu::run_team(ex_, cores, [&](cpu::Team& team) {
        team.barrier();
        const auto core = static_cast<std::size_t>(ex_.this_worker_index());
        double done = 0;
        try {
          for (Range p; !failed.load(std::memory_order_relaxed) && pieces.claim(core, p);) {
            cpu(p, core);
            done += work_in(work, p);
          }
        } catch (...) {
          keep_error();
        }
        report.core_work[core] = done;
        report.core_seconds[core] = seconds_since(t0);
      });
    });
  }
  if (!ranges.gpu.empty()) {
    try {
      gpu_.run([&](const GpuContext& g) { gpu(ranges.gpu, g); });
    } catch (...) {
      keep_error();
    }
    report.gpu_seconds = seconds_since(t0);
  }
  if (cpu_has_work) {
    try {
      cpu_done.get();
    } catch (...) {
      keep_error();
    }
    report.cpu_seconds = *std::max_element(report.core_seconds.begin(), report.core_seconds.end());
  }
  report.seconds = seconds_since(t0);
  if (first_error) std::rethrow_exception(first_error);
  return report;
}

std::vector<std::size_t> seed_core_classes(const cpu::Executor& ex, std::size_t feeding_pu) {
  const std::vector<std::size_t>& units = ex.pinned_units();
  std::vector<std::size_t> classes(ex.num_workers(), 0);
  if (units.size() != classes.size()) return classes;  // not bound: nothing known
  const std::vector<bool> beside = cpu::shares_cache_with(feeding_pu, units);
  const bool mixed = std::find(beside.begin(), beside.end(), true) != beside.end() &&
                     std::find(beside.begin(), beside.end(), false) != beside.end();
  if (!mixed) return classes;
  for (std::size_t j = 0; j < classes.size(); ++j) classes[j] = beside[j] ? 0 : 1;
  return classes;
}

}  // namespace weft::split
