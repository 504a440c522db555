// DB1 and DB2 of the adaptive split (include/weft/split/tables.hpp).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "weft/error.hpp"
#include "weft/split/tables.hpp"

namespace weft::split {

namespace {

bool positive_finite(double v) { return std::isfinite(v) && v > 0; }

// How far from the balanced split a split region may have run for its cost to stand for the
// balanced split's.
constexpr double kRepresentative = 0.05;
// The side alone replaces a split only when it is this much cheaper: the split's cost is the
// noisier (its slower side decides it), and a bucket that flapped between the two on noise
// would pay a region off its split each time.
constexpr double kAloneMargin = 0.05;
// A side alone runs no faster than its peak rate (the prior) times this: a prior measured on
// the machine, as the bench's are, may run low by its noise, and a probe that could win must
// not be skipped for it.
constexpr double kPeakSlack = 1.25;

[[noreturn]] void bad(const std::string& what) {
  throw InvalidArgument("weft::split::SplitTables: " + what);
}

}  // namespace

RateEstimate::RateEstimate(std::size_t window) : window_(window) {
  if (window_ == 0) bad("a rate window of 0 measurements");
}

void RateEstimate::add(double rate) {
  if (!positive_finite(rate)) return;
  if (recent_.size() == window_) recent_.erase(recent_.begin());
  recent_.push_back(rate);
}

double RateEstimate::value() const {
  if (recent_.empty()) return 0;
  std::vector<double> v = recent_;
  const std::size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  if (v.size() % 2 == 1) return v[mid];
  const double upper = v[mid];
  const double lower = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid));
  return 0.5 * (lower + upper);
}

namespace {

// The GPU's share of a region balanced between rates g and c: g / (g + c), written so that
// rates near DBL_MAX (a prior of "as fast as can be") do not overflow the sum.
double share_of(double g, double c) { return g > 0 ? 1 / (1 + c / g) : 0; }

}  // namespace

SplitTables::SplitTables(std::size_t cores, PeakRates prior, SplitOptions options)
    : cores_(cores), prior_(prior), options_(std::move(options)) {
  if (cores_ == 0) bad("no cores take part (cores must be >= 1)");
  if (options_.buckets == 0) bad("0 size buckets (M must be >= 1)");
  if (options_.buckets > kMaxBuckets) {
    bad(std::to_string(options_.buckets) + " size buckets: M is at most " +
        std::to_string(kMaxBuckets) + " (the seed used 50 to 200)");
  }
  if (options_.window == 0 || options_.window > kMaxWindow) {
    bad("a rate window of " + std::to_string(options_.window) + " measurements (1 to " +
        std::to_string(kMaxWindow) + ")");
  }
  if (options_.revisit == 0) bad("revisit must be >= 1 region");
  if (!(options_.deadband >= 0 && options_.deadband < 0.5)) {
    bad("deadband " + std::to_string(options_.deadband) + " is outside [0, 0.5)");
  }
  if (!(options_.min_share >= 0 && options_.min_share < 0.5)) {
    bad("min_share " + std::to_string(options_.min_share) + " is outside [0, 0.5)");
  }
  if (!positive_finite(prior_.gpu) || !positive_finite(prior_.cpu)) {
    bad("the peak rates must be positive and finite (gpu " + std::to_string(prior_.gpu) + ", cpu " +
        std::to_string(prior_.cpu) + ")");
  }
  if (options_.core_shares == CoreShares::per_class) {
    if (options_.core_class.size() != cores_) {
      bad("per_class needs one class per core: " + std::to_string(options_.core_class.size()) +
          " classes given for " + std::to_string(cores_) + " cores");
    }
    for (std::size_t j = 0; j < cores_; ++j) {
      if (options_.core_class[j] >= cores_) {
        bad("core_class[" + std::to_string(j) + "] = " + std::to_string(options_.core_class[j]) +
            ": class ids must be below the cores (" + std::to_string(cores_) + ")");
      }
    }
    classes_ = *std::max_element(options_.core_class.begin(), options_.core_class.end()) + 1;
  } else {
    classes_ = cores_;
  }
  buckets_.assign(options_.buckets, Bucket{});
  for (Bucket& b : buckets_) {
    b.gpu_rate = b.cpu_rate = RateEstimate(options_.window);
    b.split_cost = b.gpu_alone_cost = b.cpu_alone_cost = RateEstimate(options_.window);
  }
  share_rates_.assign(classes_, RateEstimate(options_.window));
  if (options_.size_min != 0 || options_.size_max != 0) {
    set_size_range(options_.size_min, options_.size_max);
  }
}

void SplitTables::set_size_range(double size_min, double size_max) {
  // [0, 0] is "not set yet" (SplitOptions); any other range needs room for its buckets.
  if (!std::isfinite(size_min) || !std::isfinite(size_max) || size_max < size_min ||
      (size_max == size_min && size_max != 0)) {
    bad("the size range [" + std::to_string(size_min) + ", " + std::to_string(size_max) +
        "] is empty or not finite");
  }
  options_.size_min = size_min;
  options_.size_max = size_max;
  const double m = static_cast<double>(buckets_.size());
  const double step = buckets_.size() > 1 ? (size_max - size_min) / (m - 1) : 0;
  for (std::size_t i = 0; i < buckets_.size(); ++i) {
    buckets_[i].size_from = size_min + step * static_cast<double>(i);
  }
  range_set_ = true;
}

std::size_t SplitTables::bucket_of(double size) {
  if (!std::isfinite(size) || size < 0) {
    bad("a region's size must be finite and >= 0, not " + std::to_string(size));
  }
  if (!range_set_) {
    if (size == 0) return 0;  // a range [0, 0] would put every later size in the last bucket
    set_size_range(0, 2 * size);
  }
  // The last bucket whose start is <= size (the first when size is below every start).
  const auto after = std::upper_bound(buckets_.begin(), buckets_.end(), size,
                                      [](double s, const Bucket& b) { return s < b.size_from; });
  return after == buckets_.begin() ? 0 : static_cast<std::size_t>(after - buckets_.begin() - 1);
}

double SplitTables::nearest(std::size_t b, RateEstimate Bucket::*what) const {
  for (std::size_t d = 0; d < buckets_.size(); ++d) {
    if (b >= d && !(buckets_[b - d].*what).empty()) return (buckets_[b - d].*what).value();
    if (b + d < buckets_.size() && !(buckets_[b + d].*what).empty()) {
      return (buckets_[b + d].*what).value();
    }
  }
  return 0;
}

// A side's rate for bucket b: as measured beside the other side, in this bucket or the nearest
// (the lower one on a tie); else as measured alone; else the prior.
double SplitTables::rate_for(std::size_t b, RateEstimate Bucket::*side,
                             RateEstimate Bucket::*alone_cost, double prior) const {
  if (const double r = nearest(b, side); r > 0) return r;
  if (const double cost = nearest(b, alone_cost); cost > 0) return 1 / cost;
  return prior;
}

double SplitTables::gpu_rate_for(std::size_t b) const {
  return rate_for(b, &Bucket::gpu_rate, &Bucket::gpu_alone_cost, prior_.gpu);
}

double SplitTables::cpu_rate_for(std::size_t b) const {
  return rate_for(b, &Bucket::cpu_rate, &Bucket::cpu_alone_cost, prior_.cpu);
}

double SplitTables::clamp_share(double g) const {
  if (g < options_.min_share) return 0;
  if (g > 1 - options_.min_share) return 1;
  return g;
}

double SplitTables::prior_gsplit() const { return clamp_share(share_of(prior_.gpu, prior_.cpu)); }

double SplitTables::balanced_gsplit(std::size_t b) const {
  if (b >= buckets_.size()) {
    bad("bucket " + std::to_string(b) + " of " + std::to_string(buckets_.size()));
  }
  const double g = gpu_rate_for(b);
  const double c = cpu_rate_for(b);
  return clamp_share(share_of(g, c));
}

// The split regions of a bucket keep to the split they ran at while the balanced one stays
// within the dead band of it: moving by less buys nothing that the noise of the rates does not
// take back, and a steady split keeps the rates' window describing one way of running.
double SplitTables::steadied(std::size_t b, double balanced) const {
  const double applied = buckets_[b].applied_split;
  if (applied > 0 && applied < 1 && balanced > 0 && balanced < 1 &&
      std::abs(balanced - applied) <= options_.deadband) {
    return applied;
  }
  return balanced;
}

double SplitTables::gsplit(std::size_t b) const {
  const double balanced = steadied(b, balanced_gsplit(b));
  if (!options_.try_alone || balanced == 0 || balanced == 1) return balanced;
  const bool gpu_larger = balanced >= 0.5;
  const double alone = gpu_larger ? 1.0 : 0.0;
  // Costs per unit of work, from this bucket or the nearest that has one: sizes close together
  // cost alike, so a bucket need not try both ways itself.
  const double split_cost = nearest(b, &Bucket::split_cost);
  if (split_cost == 0) return balanced;  // the split first
  const double alone_cost =
      nearest(b, gpu_larger ? &Bucket::gpu_alone_cost : &Bucket::cpu_alone_cost);
  if (alone_cost == 0) {  // then the larger side alone, once, where its peak could win
    return alone_could_win(gpu_larger, split_cost) ? alone : balanced;
  }
  if (alone_cost >= split_cost * (1 - kAloneMargin)) return balanced;
  return buckets_[b].since_split >= options_.revisit ? balanced : alone;
}

// Whether the side alone could cost less than the split by the margin. Alone it costs at
// least 1 / its peak rate per unit of work (kPeakSlack allowed for), so a side whose peak could
// not beat the split's measured cost is not probed: that probe would be a region slower than
// the split for nothing (the cores alone on memory-bound work split near a half, whose peak
// was measured alone). Only the probe is skipped: an alone cost measured (here, in a
// neighbouring bucket, or in tables restored from the store) is weighed as it is, since then
// the prior was the one that was wrong.
bool SplitTables::alone_could_win(bool gpu, double split_cost) const {
  const double peak = gpu ? prior_.gpu : prior_.cpu;
  return kPeakSlack * peak * split_cost * (1 - kAloneMargin) > 1;
}

std::vector<double> SplitTables::csplit() const {
  // A core (class) not measured yet is taken to be as fast as the mean of those that were, so
  // that DB2 starts at 1/N (the seed) and a newly measured core does not starve the others.
  double known_sum = 0;
  std::size_t known = 0;
  for (const RateEstimate& r : share_rates_) {
    if (!r.empty()) {
      known_sum += r.value();
      ++known;
    }
  }
  const double fallback = known > 0 ? known_sum / static_cast<double>(known) : 1.0;
  std::vector<double> shares(cores_);
  double total = 0;
  for (std::size_t j = 0; j < cores_; ++j) {
    const std::size_t i =
        options_.core_shares == CoreShares::per_class ? options_.core_class[j] : j;
    shares[j] = share_rates_[i].empty() ? fallback : share_rates_[i].value();
    total += shares[j];
  }
  for (double& s : shares) s /= total;
  return shares;
}

void SplitTables::learn_core_rates(const RegionTiming& t) {
  if (options_.core_shares == CoreShares::per_core) {
    for (std::size_t j = 0; j < cores_; ++j) {
      if (t.core_work[j] > 0 && t.core_seconds[j] > 0) {
        share_rates_[j].add(t.core_work[j] / t.core_seconds[j]);
      }
    }
    return;
  }
  // Per class: the class's work over its slowest core's time, per core of the class.
  std::vector<double> work(classes_, 0), slowest(classes_, 0), members(classes_, 0);
  for (std::size_t j = 0; j < cores_; ++j) {
    const std::size_t c = options_.core_class[j];
    if (t.core_work[j] > 0) {  // a core given nothing did not share its class's work
      members[c] += 1;
      work[c] += t.core_work[j];
      slowest[c] = std::max(slowest[c], t.core_seconds[j]);
    }
  }
  for (std::size_t c = 0; c < classes_; ++c) {
    if (work[c] > 0 && slowest[c] > 0) share_rates_[c].add(work[c] / slowest[c] / members[c]);
  }
}

void SplitTables::update(std::size_t b, const RegionTiming& t) {
  if (b >= buckets_.size()) {
    bad("bucket " + std::to_string(b) + " of " + std::to_string(buckets_.size()));
  }
  if (t.core_work.size() != cores_ || t.core_seconds.size() != cores_) {
    bad("a timing of " + std::to_string(t.core_work.size()) + " cores' work and " +
        std::to_string(t.core_seconds.size()) + " cores' times for " + std::to_string(cores_) +
        " cores");
  }
  Bucket& bucket = buckets_[b];
  double cpu_work = 0;
  double cpu_seconds = 0;
  for (std::size_t j = 0; j < cores_; ++j) {
    if (t.core_work[j] > 0) {
      cpu_work += t.core_work[j];
      cpu_seconds = std::max(cpu_seconds, t.core_seconds[j]);
    }
  }
  // The split that ran: the one asked for, moved to the items' grain.
  bucket.last_used = t.gpu_work + cpu_work > 0 ? t.gpu_work / (t.gpu_work + cpu_work) : gsplit(b);
  const double gpu_measured = t.gpu_work > 0 && t.gpu_seconds > 0 ? t.gpu_work / t.gpu_seconds : 0;
  const double cpu_measured = cpu_work > 0 && cpu_seconds > 0 ? cpu_work / cpu_seconds : 0;
  // What would have balanced this region alone: measured where a side ran, estimated where not.
  const double g = gpu_measured > 0 ? gpu_measured : gpu_rate_for(b);
  const double c = cpu_measured > 0 ? cpu_measured : cpu_rate_for(b);
  bucket.last_balanced = share_of(g, c);
  if (t.gpu_work > 0 && cpu_work > 0) {
    // How much each side slows the other depends on the split: rates measured far from this
    // region's split (the prior's, on a cold bucket) describe another way of running, and the
    // window starts again rather than letting them weigh on its median.
    if (!(std::abs(bucket.last_used - bucket.window_split) <= kRepresentative)) {
      bucket.gpu_rate = bucket.cpu_rate = RateEstimate(options_.window);
      bucket.window_split = bucket.last_used;
    }
    bucket.gpu_rate.add(gpu_measured);
    bucket.cpu_rate.add(cpu_measured);
    bucket.applied_split = bucket.last_used;
  }
  bucket.regions += 1;
  const double seconds = t.seconds > 0 ? t.seconds : std::max(t.gpu_seconds, cpu_seconds);
  const double work = t.gpu_work + cpu_work;
  if (work > 0 && seconds > 0) {
    if (t.gpu_work > 0 && cpu_work > 0) {
      // A split far from the balanced one (the prior's, or one still converging) says little
      // about what the balanced split costs: only a region near it is held against the alone.
      if (std::abs(bucket.last_used - balanced_gsplit(b)) <= kRepresentative) {
        bucket.split_cost.add(seconds / work);
      }
      bucket.since_split = 0;
    } else {
      (t.gpu_work > 0 ? bucket.gpu_alone_cost : bucket.cpu_alone_cost).add(seconds / work);
      bucket.since_split += 1;
    }
  }
  learn_core_rates(t);
}

void SplitTables::restore_bucket(std::size_t b, const Bucket& state) {
  if (b >= buckets_.size()) {
    bad("restoring bucket " + std::to_string(b) + " of " + std::to_string(buckets_.size()));
  }
  Bucket& bucket = buckets_[b];
  const double from = bucket.size_from;
  auto rewindow = [this](const RateEstimate& stored) {
    RateEstimate r(options_.window);
    for (double v : stored.recent()) r.add(v);
    return r;
  };
  bucket = state;
  bucket.size_from = from;
  bucket.gpu_rate = rewindow(state.gpu_rate);
  bucket.cpu_rate = rewindow(state.cpu_rate);
  bucket.split_cost = rewindow(state.split_cost);
  bucket.gpu_alone_cost = rewindow(state.gpu_alone_cost);
  bucket.cpu_alone_cost = rewindow(state.cpu_alone_cost);
}

void SplitTables::restore_share_rate(std::size_t i, const std::vector<double>& rates) {
  if (i >= share_rates_.size()) {
    bad("restoring share rate " + std::to_string(i) + " of " + std::to_string(share_rates_.size()));
  }
  share_rates_[i] = RateEstimate(options_.window);
  for (double r : rates) share_rates_[i].add(r);
}

}  // namespace weft::split
