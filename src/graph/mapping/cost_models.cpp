#include "weft/graph/mapping/cost_models.hpp"

#include <algorithm>
#include <cmath>

#include "weft/error.hpp"

namespace weft::graph {

namespace {

constexpr std::size_t kRecent = 64;

}  // namespace

bool is_reserved_model_key(std::string_view kernel) noexcept {
  constexpr std::string_view transfer = "transfer:";  // kTransferToDevice's and kTransferToHost's
  static_assert(std::string_view(kTransferToDevice).starts_with(transfer) &&
                std::string_view(kTransferToHost).starts_with(transfer));
  return kernel.starts_with(transfer) || kernel.ends_with(kBesideCopies);
}

void CostModels::set(const std::string& device, const std::string& kernel, LinearCostModel model) {
  entries_[{device, kernel}].model = std::move(model);
}

const LinearCostModel* CostModels::find(const std::string& device,
                                        const std::string& kernel) const {
  auto it = entries_.find({device, kernel});
  return it == entries_.end() || !it->second.model ? nullptr : &*it->second.model;
}

double CostModels::predict(const std::string& device, const std::string& kernel,
                           double size) const {
  const LinearCostModel* m = find(device, kernel);
  if (m == nullptr) {
    throw InvalidState("weft::graph: no cost model for '" + kernel + "' on " + device +
                       " (calibrate first: `weft calibrate`, or runs that measure it at two "
                       "sizes)");
  }
  return m->predict(size);
}

void CostModels::observe(const std::string& device, const std::string& kernel, double size,
                         double seconds) {
  if (!(size >= 0) || !std::isfinite(size) || !(seconds >= 0) || !std::isfinite(seconds)) {
    throw InvalidArgument("weft::graph::CostModels::observe: '" + kernel + "' on " + device +
                          ": size " + std::to_string(size) + " and time " +
                          std::to_string(seconds) + " must be finite and >= 0");
  }
  Entry& e = entries_[{device, kernel}];
  e.recent.push_back({size, seconds});
  if (e.recent.size() > kRecent) e.recent.erase(e.recent.begin());
  if (e.model) {
    e.model->update(size, seconds);
    return;
  }
  for (const CostSample& s : e.recent) {
    if (s.size != size) {
      e.model = LinearCostModel::fit(e.recent);
      return;
    }
  }
}

namespace {

void check_overlap(const char* who, const std::string& kernel, double overlap) {
  if (!(overlap >= 0 && overlap <= 1)) {
    throw InvalidArgument(std::string("weft::graph::CostModels::") + who + ": '" + kernel +
                          "': overlap " + std::to_string(overlap) + " is not in [0, 1]");
  }
}

}  // namespace

double CostModels::predict_cpu(const std::string& kernel, double size, double overlap) const {
  check_overlap("predict_cpu", kernel, overlap);
  const double own = predict("cpu", kernel, size);
  const LinearCostModel* beside = find("cpu", kernel + kBesideCopies);
  if (beside == nullptr || overlap == 0) return own;
  return own + overlap * (beside->predict(size) - own);
}

void CostModels::observe_cpu(const std::string& kernel, double size, double seconds,
                             double overlap) {
  check_overlap("observe_cpu", kernel, overlap);
  const LinearCostModel* own = find("cpu", kernel);
  const bool bad =
      !(size >= 0) || !std::isfinite(size) || !(seconds >= 0) || !std::isfinite(seconds);
  if (bad || overlap < kAloneMaxOverlap || own == nullptr) {
    observe("cpu", kernel, size, seconds);  // a bad sample throws there, named
    return;
  }
  if (overlap < kBesideCopiesMinOverlap) return;
  const double alone = own->predict(size);
  const double whole = std::max(0.0, alone + (seconds - alone) / overlap);
  const std::string key = kernel + kBesideCopies;
  Entry& e = entries_[{"cpu", key}];
  if (e.model) {
    observe("cpu", key, size, whole);
    return;
  }
  // Seeded from the kernel's own model, not fitted: runs beside copies may come at one size for
  // a long time (a fit needs two), and a fit through one run at the second size follows that
  // run, often a first run's page faults. The own line times the median slowdown of the first
  // kBesideCopiesSeedRuns runs keeps the own model's shape and its covariance (which depends on
  // the sizes measured, not on the times), and one slow run among them does not set it.
  e.recent.push_back({size, whole});
  if (e.recent.size() < kBesideCopiesSeedRuns) return;
  std::vector<double> slowdowns;
  for (const CostSample& s : e.recent) {
    const double t = own->predict(s.size);
    if (t > 0) slowdowns.push_back(s.seconds / t);
  }
  if (slowdowns.empty()) return;  // a model that predicts nothing: keep the runs, wait
  std::nth_element(slowdowns.begin(), slowdowns.begin() + slowdowns.size() / 2, slowdowns.end());
  const double r = slowdowns[slowdowns.size() / 2];
  LinearCostModel::State seeded = own->state();
  seeded.intercept *= r;
  seeded.slope *= r;
  seeded.one_sided = 0;
  e.model = LinearCostModel::from_state(seeded);
}

void CostModels::fit(const std::string& device, const std::string& kernel,
                     std::span<const CostSample> samples) {
  LinearCostModel m = LinearCostModel::fit(samples);  // throws before anything changes
  Entry& e = entries_[{device, kernel}];
  e.model = std::move(m);
  const std::size_t keep = std::min(samples.size(), kRecent);
  e.recent.assign(samples.end() - static_cast<std::ptrdiff_t>(keep), samples.end());
}

std::size_t CostModels::pending(const std::string& device, const std::string& kernel) const {
  auto it = entries_.find({device, kernel});
  return it == entries_.end() || it->second.model ? 0 : it->second.recent.size();
}

std::vector<std::pair<std::pair<std::string, std::string>, LinearCostModel>> CostModels::list()
    const {
  std::vector<std::pair<std::pair<std::string, std::string>, LinearCostModel>> out;
  for (const auto& [key, e] : entries_) {
    if (e.model) out.emplace_back(key, *e.model);
  }
  return out;
}

std::size_t CostModels::load(const ModelStore& store, const std::string& machine) {
  if (machine.empty()) {
    // list("") would be every machine's models, overwriting one another.
    throw InvalidArgument("weft::graph::CostModels::load: an empty machine name");
  }
  std::size_t n = 0;
  for (const StoredModel& m : store.list(machine)) {
    entries_[{m.key.device, m.key.kernel}].model = m.model;
    ++n;
  }
  return n;
}

void CostModels::save(ModelStore& store, const std::string& machine) const {
  for (const auto& [key, e] : entries_) {
    if (!e.model) continue;
    store.put({machine, key.first, key.second}, *e.model, e.model->median_relative_error(e.recent));
  }
}

}  // namespace weft::graph
