// What a set of split tables was learned for (weft::split::fingerprint_of, weft/split/store.hpp):
// built with or without SQLite, since it describes the tables, not the store.
#include <charconv>
#include <string>

#include "weft/cpu/topology.hpp"
#include "weft/split/store.hpp"

namespace weft::split {

namespace {

// The shortest text that reads back as `v`: a range restored from the store prints the same.
std::string shortest(double v) {
  char buf[32];
  const auto end = std::to_chars(buf, buf + sizeof buf, v).ptr;
  return std::string(buf, end);
}

// The CPU's model name ("unknown" where the system does not say), read once.
const std::string& cpu_model() {
  static const std::string model = [] {
    std::string m = cpu::describe_cpu_topology().model;
    return m.empty() ? std::string("unknown") : m;
  }();
  return model;
}

}  // namespace

std::string fingerprint_of(const SplitTables& t) {
  const SplitOptions& o = t.options();
  // The rows' format leads (v4: split and alone costs, the window's and the applied split; the
  // CPU's model): tables stored in another format are learned again.
  std::string f = "v4 cores=" + std::to_string(t.cores()) +
                  " buckets=" + std::to_string(o.buckets) +
                  " shares=" + (o.core_shares == CoreShares::per_class ? "per_class" : "per_core");
  if (o.core_shares == CoreShares::per_class) {
    f += " classes=";
    for (std::size_t c : o.core_class) f += std::to_string(c) + ',';
  }
  if (t.size_range_set()) f += " sizes=" + shortest(o.size_min) + ".." + shortest(o.size_max);
  // The CPU's model: a machine keeps its name (the key's) across a change of hardware, as a
  // cloud instance does, and the cores' rates learned on one CPU say little about another.
  f += " cpu=\"" + cpu_model() + "\"";
  return f;
}

std::string fingerprint_without_cpu(const std::string& fingerprint) {
  const auto at = fingerprint.find(" cpu=\"");
  return at == std::string::npos ? fingerprint : fingerprint.substr(0, at);
}

}  // namespace weft::split
