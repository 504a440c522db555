// weft split show|reset: the split tables in the calibration store (weft/split/store.hpp).
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>

#include "commands.hpp"
#include "weft/split/store.hpp"

namespace weft::tools {

namespace {

using weft::split::RateEstimate;

std::string percent(double v) {
  if (!std::isfinite(v)) return "-";
  char buf[16];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100.0 * v);
  return buf;
}

void show_one(const weft::split::StoredSplit& s) {
  const weft::split::SplitTables& t = s.tables;
  std::printf("%s  region %s  device %s\n  %s; updated %s\n", s.key.machine.c_str(),
              s.key.region.c_str(), s.key.device.c_str(), s.fingerprint.c_str(), s.updated.c_str());
  std::printf("  prior (peak rates): GPU share %s\n", percent(t.prior_gsplit()).c_str());
  std::printf("  %-12s %8s %10s %10s %12s %12s %12s %12s\n", "size from", "regions", "predicted",
              "measured", "GPU share", "GPU rate", "CPU rate", "alone/split");
  for (std::size_t b = 0; b < t.buckets().size(); ++b) {
    const weft::split::Bucket& k = t.buckets()[b];
    if (k.regions == 0) continue;
    // predicted: the GPU share the bucket's last region ran with; measured: the share that
    // would have balanced that region; GPU share: what the next region gets.
    // alone/split: the time of the larger side alone over the split's, where both were measured
    // in this bucket (below 1: the bucket goes alone).
    const RateEstimate& alone = t.balanced_gsplit(b) >= 0.5 ? k.gpu_alone_cost : k.cpu_alone_cost;
    char ratio[16] = "-";
    if (!alone.empty() && !k.split_cost.empty()) {
      std::snprintf(ratio, sizeof ratio, "%.3f", alone.value() / k.split_cost.value());
    }
    std::printf("  %-12.4g %8llu %10s %10s %12s %12.4g %12.4g %12s\n", k.size_from,
                static_cast<unsigned long long>(k.regions), percent(k.last_used).c_str(),
                percent(k.last_balanced).c_str(), percent(t.gsplit(b)).c_str(), k.gpu_rate.value(),
                k.cpu_rate.value(), ratio);
  }
  std::printf("  CPU shares (DB2):");
  for (double c : t.csplit()) std::printf(" %s", percent(c).c_str());
  std::printf("\n");
}

// The store named by the arguments, when its file exists (else says so and returns none:
// show and reset have nothing to do, and opening would create the file). A file that is not a
// weft store throws, untouched (SplitStore).
std::optional<weft::split::SplitStore> open_existing(const SplitArgs& args, std::string& path,
                                                     weft::split::SplitStore::Mode mode) {
  path = args.db.empty() ? default_models_path() : args.db;
  if (!std::filesystem::exists(path)) {
    std::printf("no split tables: %s does not exist\n", path.c_str());
    return std::nullopt;
  }
  return std::optional<weft::split::SplitStore>(std::in_place, path, mode);
}

}  // namespace

int run_split_show(const SplitArgs& args) {
  std::string path;
  std::optional<weft::split::SplitStore> store =
      open_existing(args, path, weft::split::SplitStore::Mode::read_only);  // show writes no data
  if (!store) return 0;
  int shown = 0;
  std::size_t stale = 0;
  for (const auto& s : store->list(args.machine, &stale)) {
    if (!args.region.empty() && s.key.region != args.region) continue;
    show_one(s);
    ++shown;
  }
  if (shown == 0) std::printf("no split tables in %s\n", path.c_str());
  if (stale > 0) {
    std::printf(
        "(%zu set(s) stored by an older weft, or unreadable, are not shown; weft split reset "
        "removes them)\n",
        stale);
  }
  return 0;
}

int run_split_reset(const SplitArgs& args) {
  std::string path;
  std::optional<weft::split::SplitStore> store =
      open_existing(args, path, weft::split::SplitStore::Mode::read_write);
  if (!store) return 0;
  const std::size_t removed = store->reset(args.machine, args.region);
  std::printf("removed %zu set(s) of split tables from %s\n", removed, path.c_str());
  return 0;
}

}  // namespace weft::tools
