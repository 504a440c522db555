#include "graph/graph_suite.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <tuple>

#include "pipelines.hpp"
#include "weft/cpu/executor.hpp"
#include "weft/error.hpp"
#include "weft/graph/mapping/calibration.hpp"
#include "weft/graph/mapping/model_store.hpp"
#include "weft/graph/mapping/schedule.hpp"
#include "weft/graph/runtime.hpp"
#include "weft/graph/trace.hpp"

namespace weft::bench::graph {

namespace wg = weft::graph;

std::string size_label(std::size_t total) {
  return std::to_string((total + 500'000) / 1'000'000) + "m";
}

namespace {
// A CSV field: quoted, inner quotes doubled (labels such as "delta(returns, 1)" hold commas).
std::string csv_quoted(const std::string& s) {
  std::string q = "\"";
  for (char ch : s) {
    if (ch == '"') q += '"';
    q += ch;
  }
  return q + '"';
}
}  // namespace

NodeLog::NodeLog(const std::string& path) : file_(std::fopen(path.c_str(), "w")) {
  if (!file_) throw Error("weft bench graph: cannot write the node log " + path);
  std::fprintf(file_.get(),
               "phase,app,size,policy,run,node,kernel,device,bytes,start_ms,end_ms,ms,"
               "predicted_ms,copy_overlap,run_ms,what,launch_ms,issued_ms\n");
}

void NodeLog::add(const char* phase, const std::string& app, std::size_t total, const char* policy,
                  const wg::Graph& g, const wg::RunReport& r) {
  ++runs_;
  for (const wg::NodeRecord& n : r.nodes) {
    std::fprintf(
        file_.get(), "%s,%s,%s,%s,%zu,%zu,%s,%s,%zu,%.4f,%.4f,%.4f,%.4f,%.3f,%.4f,%s,%.4f,%.4f\n",
        phase, app.c_str(), size_label(total).c_str(), policy, runs_, n.node,
        g.kernel(g.node_at(n.node)).name.c_str(), wg::to_string(n.device), n.size, n.start * 1e3,
        n.end * 1e3, (n.end - n.start) * 1e3, n.predicted * 1e3, n.copy_overlap, r.seconds * 1e3,
        csv_quoted(g.label(g.node_at(n.node))).c_str(), n.launch_seconds * 1e3, n.issued * 1e3);
  }
  for (const wg::TransferRecord& t : r.transfers) {  // node "-": a copy of datum `what`
    std::fprintf(file_.get(), "%s,%s,%s,%s,%zu,-,%s,gpu,%zu,%.4f,%.4f,%.4f,,,%.4f,%s,,\n", phase,
                 app.c_str(), size_label(total).c_str(), policy, runs_,
                 t.to_device ? wg::kTransferToDevice : wg::kTransferToHost, t.bytes, t.start * 1e3,
                 t.end * 1e3, (t.end - t.start) * 1e3, r.seconds * 1e3,
                 csv_quoted(g.name(g.data_at(t.data))).c_str());
  }
}

std::string mapping_string(const std::vector<wg::Device>& m) {
  std::string s;
  for (wg::Device d : m) s += d == wg::Device::gpu ? 'G' : 'C';
  return s;
}

namespace {

const wg::Policy kContenders[] = {wg::Policy::pptm, wg::Policy::a_free, wg::Policy::d_map,
                                  wg::Policy::mincut, wg::Policy::heft};

// Per (device, kernel): |predicted - measured| / measured of every node in the timed runs.
using Errors = std::map<std::string, std::vector<double>>;
// Per (device_kernel, size): measured and predicted seconds, to tell a biased model (medians
// apart) from a noisy machine (measurements spread) in the log.
using Observations = std::map<std::pair<std::string, std::size_t>,
                              std::pair<std::vector<double>, std::vector<double>>>;
// The same per (device_kernel, size, policy), with each run's share beside copies: a CPU
// kernel beside transfers (a mixed mapping) runs slower than alone (CPU-only); its models tell
// the two apart (CostModels::observe_cpu).
struct PolicyRuns {
  std::vector<double> seconds;
  std::vector<double> copy_overlap;
};
using ObservationsByPolicy =
    std::map<std::tuple<std::string, std::size_t, std::string>, PolicyRuns>;

void collect_errors(const wg::Graph& g, const wg::RunReport& r, const char* policy, Errors& errors,
                    Observations& seen, ObservationsByPolicy& by_policy) {
  for (const wg::NodeRecord& n : r.nodes) {
    const double measured = n.end - n.start;
    if (n.predicted <= 0 || measured <= 0) continue;
    const std::string key =
        std::string(wg::to_string(n.device)) + "_" + g.kernel(g.node_at(n.node)).name;
    errors[key].push_back(std::abs(n.predicted - measured) / measured);
    auto& [m, p] = seen[{key, n.size}];
    m.push_back(measured);
    p.push_back(n.predicted);
    PolicyRuns& runs = by_policy[{key, n.size, policy}];
    runs.seconds.push_back(measured);
    runs.copy_overlap.push_back(n.copy_overlap);
  }
}

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
}

void print_by_policy(const ObservationsByPolicy& by_policy) {
  std::fprintf(stderr,
               "[graph] per kernel, size and policy: measured median ms (n, median share of the "
               "time with copies in flight)\n");
  std::string last;
  for (const auto& [key, v] : by_policy) {
    const auto& [kernel, size, policy] = key;
    const std::string row = kernel + " " + std::to_string(size);
    if (row != last) {
      if (!last.empty()) std::fprintf(stderr, "\n");
      std::fprintf(stderr, "[graph]   %-28s %12zu B ", kernel.c_str(), size);
      last = row;
    }
    std::fprintf(stderr, "  %s %.3f (%zu, %.2f)", policy.c_str(), quantile(v.seconds, 0.5) * 1e3,
                 v.seconds.size(), quantile(v.copy_overlap, 0.5));
  }
  if (!last.empty()) std::fprintf(stderr, "\n");
}

void print_observations(const Observations& seen) {
  std::fprintf(stderr,
               "[graph] per kernel and size: measured p10 / median / p90 ms, predicted "
               "median ms, (predicted - measured) / measured of the medians, and the first and "
               "last prediction ms (a model that starts off and converges shows as first far "
               "from last)\n");
  for (const auto& [key, v] : seen) {
    const double med = quantile(v.first, 0.5), pred = quantile(v.second, 0.5);
    std::fprintf(stderr,
                 "[graph]   %-28s %12zu B  n=%3zu  %9.3f %9.3f %9.3f  %9.3f  %+.3f  %9.3f -> "
                 "%9.3f\n",
                 key.first.c_str(), key.second, v.first.size(), quantile(v.first, 0.1) * 1e3,
                 med * 1e3, quantile(v.first, 0.9) * 1e3, pred * 1e3, (pred - med) / med,
                 v.second.front() * 1e3, v.second.back() * 1e3);
  }
}

struct AppResult {
  std::size_t total = 0;      // floats over the five series
  bool pptm_is_dmap = false;  // the same mapping: any difference in time is noise
  std::map<wg::Policy, std::size_t> bytes;
  std::map<wg::Policy, double> median_seconds;
  std::vector<double> best_mapping_samples;  // --exhaustive: the fastest mapping's runs
  // Policies that chose the same mapping ran the same work: their runs pooled per mapping are
  // one sample of it, and a difference between their medians is noise. PPTM's mapping's pooled
  // median, D-Map's, and the fastest mapping's among the policies'.
  double pooled_pptm = 0, pooled_dmap = 0, pooled_best = 0;
  [[nodiscard]] double fastest_policy_seconds() const {
    double t = median_seconds.begin()->second;
    for (const auto& [p, s] : median_seconds) t = std::min(t, s);
    return t;
  }
};

double mean(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m += x / static_cast<double>(v.size());
  return m;
}

// Every mapping of a problem's nodes: bit i of the index puts node i on the GPU; a node with
// one implementation only is on that device in all of them.
std::vector<std::vector<wg::Device>> every_mapping(const wg::MappingProblem& p) {
  std::vector<std::size_t> either;
  std::vector<wg::Device> base(p.nodes.size(), wg::Device::cpu);
  for (std::size_t i = 0; i < p.nodes.size(); ++i) {
    const bool cpu = p.nodes[i].cpu != wg::MappingProblem::kNoImplementation;
    const bool gpu = p.nodes[i].gpu != wg::MappingProblem::kNoImplementation;
    if (cpu && gpu) either.push_back(i);
    if (!cpu) base[i] = wg::Device::gpu;
  }
  if (either.size() > 16) {
    throw InvalidArgument("weft bench graph --exhaustive: " + std::to_string(either.size()) +
                          " nodes could run on either device (at most 16)");
  }
  std::vector<std::vector<wg::Device>> all;
  for (std::size_t mask = 0; mask < (std::size_t{1} << either.size()); ++mask) {
    std::vector<wg::Device> m = base;
    for (std::size_t k = 0; k < either.size(); ++k) {
      if ((mask >> k) & 1u) m[either[k]] = wg::Device::gpu;
    }
    all.push_back(std::move(m));
  }
  return all;
}

// The exhaustive search (GraphSuiteOptions::exhaustive): times every mapping whose simulated
// makespan is within kExhaustivePrune of `fastest_policy` seconds (a warm-up run, then
// `samples` runs, each checked against the reference); returns the fastest one's run times.
std::vector<double> fastest_mapping(wg::Runtime& rt, factors::BuiltApp& built,
                                    const factors::Series& want, double fastest_policy, int samples,
                                    const std::string& name) {
  const wg::MappingProblem problem = rt.problem(*built.graph);
  const auto mappings = every_mapping(problem);
  // These runs teach the models nothing: the policies of the applications after this one map
  // from what the policies' own runs taught, as without --exhaustive.
  rt.set_learning(false);
  struct Relearn {
    wg::Runtime& rt;
    ~Relearn() { rt.set_learning(true); }
  } relearn{rt};
  std::vector<double> best;  // the fastest mapping's runs, and their median
  double best_median = 0;
  std::string best_name;
  std::size_t timed = 0;
  for (const auto& m : mappings) {
    const double simulated = wg::simulate_schedule(problem, m).makespan;
    if (simulated > kExhaustivePrune * fastest_policy) continue;
    ++timed;
    std::vector<double> runs;
    for (int k = 0; k <= samples; ++k) {
      std::fill(built.output.begin(), built.output.end(), -1.0f);
      const wg::RunReport r = rt.run(*built.graph, m);
      if (!factors::compare(built.output, want).ok()) {
        throw InvalidState("weft bench graph --exhaustive: " + name + " mapped " +
                           mapping_string(m) + " does not match the reference");
      }
      if (k > 0) runs.push_back(r.seconds);  // the first run warms up
    }
    const double med = quantile(runs, 0.5);
    std::fprintf(stderr, "[graph]   every mapping: %s %.4f s (simulated %.4f s)\n",
                 mapping_string(m).c_str(), med, simulated);
    if (best.empty() || med < best_median) {
      best = runs;
      best_median = med;
      best_name = mapping_string(m);
    }
  }
  std::fprintf(stderr,
               "[graph]   every mapping: %zu of %zu timed (the rest simulated over %.1fx the "
               "fastest policy), fastest %s %.4f s\n",
               timed, mappings.size(), kExhaustivePrune, best_name.c_str(), best_median);
  return best;
}

}  // namespace

void calibrate(wg::Runtime& rt, const std::vector<std::string>& names,
               std::vector<std::size_t> totals, NodeLog* log) {
  std::sort(totals.begin(), totals.end());
  // Every measurement of the calibration fitted at once (calibration.hpp): learnt run by run,
  // the runs at the last size outweighed the first size's.
  wg::Calibration calibration;
  const bool learning = rt.learning();
  rt.set_learning(false);
  for (std::size_t total : totals) {
    factors::Market market = factors::generate_market(factors::shape_for_total(total), 42);
    for (const auto& app : factors::applications()) {
      if (!names.empty() && std::find(names.begin(), names.end(), app.name) == names.end()) {
        continue;
      }
      factors::BuiltApp built = app.build(market);
      for (wg::Policy p : {wg::Policy::a_free, wg::Policy::d_map}) {
        for (int k = 0; k < 3; ++k) {  // the first (cold) run teaches nothing
          const wg::RunReport r = rt.run(*built.graph, p);
          if (log != nullptr) {
            log->add(k == 0 ? "calibrate-cold" : "calibrate", app.name, total, wg::to_string(p),
                     *built.graph, r);
          }
          if (k > 0) calibration.add(*built.graph, r);
        }
      }
      rt.release(*built.graph);
      std::fprintf(stderr, "[calibrate] %s at %s\n", app.name.c_str(), size_label(total).c_str());
    }
  }
  calibration.fit_into(rt.models());
  rt.set_learning(learning);
}

Suite run_graph_suite(const GraphSuiteOptions& o) {
  SuiteOptions so;
  so.samples = o.samples;
  so.warmups = 1;
  so.settle_ms = 20;
  Suite suite("graph", so);
  suite.record_host_handoff("start");  // which kind of machine instance this run had
  cpu::ExecutorOptions eo;
  eo.pinning = o.pinning;
  if (o.spin_before_sleep_us >= 0) {
    eo.spin_before_sleep = std::chrono::microseconds(o.spin_before_sleep_us);
  }
  cpu::Executor executor(eo);
  if (o.stream_min_bytes) {
    factors::kernels::set_stream_min_bytes(*o.stream_min_bytes);
    std::fprintf(stderr, "[graph] CPU kernels stream outputs going to the GPU%s\n",
                 *o.stream_min_bytes == SIZE_MAX
                     ? " only"
                     : (" and those of calls spanning " + std::to_string(*o.stream_min_bytes) +
                        " bytes or more")
                           .c_str());
  } else {
    std::fprintf(stderr,
                 "[graph] CPU kernels stream outputs going to the GPU and those of calls spanning "
                 "%zu bytes or more (the last-level cache)\n",
                 factors::kernels::stream_min_bytes());
  }
  wg::RuntimeOptions ro;
  ro.device = o.device == "emulated" ? wg::DeviceKind::emulated : wg::DeviceKind::cuda;
  wg::Runtime rt(executor, ro);
  std::fprintf(stderr, "[graph] device: %s, %zu CPU workers (%s)\n", rt.device_name().c_str(),
               executor.num_workers(),
               executor.pinned_units().empty() ? "unbound" : "bound one per hardware thread");
  suite.set_gpu(rt.device_name(), 1);
  std::vector<const factors::Application*> apps;
  for (const auto& a : factors::applications()) {
    if (o.apps.empty() || std::find(o.apps.begin(), o.apps.end(), a.name) != o.apps.end()) {
      apps.push_back(&a);
    }
  }
  std::vector<std::size_t> totals = o.totals;
  std::sort(totals.begin(), totals.end());

  std::unique_ptr<NodeLog> log;
  if (!o.node_log.empty()) log = std::make_unique<NodeLog>(o.node_log);
  calibrate(rt, o.apps, totals, log.get());

  Errors errors;
  Observations seen;
  ObservationsByPolicy by_policy;
  std::map<std::string, AppResult> results;  // by benchmark name
  for (std::size_t total : totals) {
    const factors::Shape shape = factors::shape_for_total(total);
    factors::Market market = factors::generate_market(shape, 7);
    for (const auto* app : apps) {
      const std::string name = app->name + "_" + size_label(total);
      const double t0 = now_seconds();
      const factors::Series want = app->reference(market);
      std::fprintf(stderr, "[graph] %s: %zu stocks x %zu days, reference in %.2f s\n", name.c_str(),
                   shape.stocks, shape.days, now_seconds() - t0);
      factors::BuiltApp built = app->build(market);
      AppResult& result = results[name];
      result.total = total;
      std::vector<Contender> contenders;
      std::map<wg::Policy, std::vector<wg::Device>> mapping_of;
      result.pptm_is_dmap =
          rt.map(*built.graph, wg::Policy::pptm) == rt.map(*built.graph, wg::Policy::d_map);
      for (wg::Policy p : kContenders) {
        const std::vector<wg::Device> mapping = rt.map(*built.graph, p);
        mapping_of[p] = mapping;
        std::fprintf(stderr, "[graph]   %-7s %s (predicted %.4f s)\n", wg::to_string(p),
                     mapping_string(mapping).c_str(),
                     wg::mapping_cost(rt.problem(*built.graph), mapping));
        contenders.push_back(
            {p == wg::Policy::pptm ? "weft" : wg::to_string(p),
             [&, p, mapping, calls = std::make_shared<int>(0)] {
               std::fill(built.output.begin(), built.output.end(), -1.0f);
               const wg::RunReport r = rt.run(*built.graph, mapping);
               if (log) {
                 log->add((*calls)++ < so.warmups ? "warmup" : "sample", app->name, total,
                          wg::to_string(p), *built.graph, r);
               }
               result.bytes[p] = r.bytes_to_device + r.bytes_to_host;
               collect_errors(*built.graph, r, wg::to_string(p), errors, seen, by_policy);
               return Outcome{r.seconds, factors::compare(built.output, want).ok()};
             }});
      }
      suite.compare(name, "s", Better::lower, contenders);
      const auto& cmps = suite.comparisons();
      result.median_seconds[wg::Policy::pptm] = cmps.back().weft;
      std::map<std::vector<wg::Device>, std::vector<double>> runs_by_mapping;
      auto pool = [&](wg::Policy p, const std::vector<double>& samples) {
        auto& runs = runs_by_mapping[mapping_of.at(p)];
        runs.insert(runs.end(), samples.begin(), samples.end());
      };
      pool(wg::Policy::pptm, cmps.back().weft_samples);
      for (auto it = cmps.end() - 4; it != cmps.end(); ++it) {
        result.median_seconds[wg::parse_policy(it->peer)] = it->peer_value;
        pool(wg::parse_policy(it->peer), it->peer_samples);
      }
      result.pooled_pptm = median(runs_by_mapping.at(mapping_of.at(wg::Policy::pptm)));
      result.pooled_dmap = median(runs_by_mapping.at(mapping_of.at(wg::Policy::d_map)));
      result.pooled_best = result.pooled_pptm;
      for (const auto& [mapping, runs] : runs_by_mapping) {
        result.pooled_best = std::min(result.pooled_best, median(runs));
      }
      if (o.exhaustive && total == totals.back()) {
        result.best_mapping_samples = fastest_mapping(
            rt, built, want, result.fastest_policy_seconds(), o.exhaustive_samples, name);
      }
      if (!o.trace_dir.empty()) {
        std::filesystem::create_directories(o.trace_dir);
        for (wg::Policy p : {wg::Policy::pptm, wg::Policy::d_map}) {
          const wg::RunReport r = rt.run(*built.graph, rt.map(*built.graph, p));
          const std::string base = o.trace_dir + "/" + name + "_" + wg::to_string(p);
          wg::write_text_file(base + ".trace.json", wg::chrome_trace(*built.graph, r));
          wg::write_text_file(base + ".svg", wg::svg_timeline(*built.graph, r));
        }
      }
      rt.release(*built.graph);
    }
  }

  // The headline metrics: PPTM against the fastest policy and against D-Map, per application
  // and pooled, and the bytes each moves (the names are the JSON's metric keys).
  const std::string largest = size_label(totals.back());
  std::vector<double> gains, best_gains, pooled_gains;
  std::size_t pptm_bytes = 0, dmap_bytes = 0;
  double worst_over_best = 0, worst_over_best_pooled = 0;
  for (const auto& [name, r] : results) {
    pptm_bytes += r.bytes.at(wg::Policy::pptm);
    dmap_bytes += r.bytes.at(wg::Policy::d_map);
    const double best = r.fastest_policy_seconds();
    const double over_best = r.median_seconds.at(wg::Policy::pptm) / best;
    worst_over_best = std::max(worst_over_best, over_best);
    suite.add_metric({"pptm_over_best_" + name, "x", Better::lower, {over_best}});
    const double over_best_pooled = r.pooled_pptm / r.pooled_best;
    worst_over_best_pooled = std::max(worst_over_best_pooled, over_best_pooled);
    suite.add_metric({"pptm_over_best_pooled_" + name, "x", Better::lower, {over_best_pooled}});
    suite.add_metric(
        {"pptm_same_mapping_as_dmap_" + name, "bool", Better::lower, {r.pptm_is_dmap ? 1.0 : 0.0}});
    suite.add_metric({"transfer_bytes_pptm_" + name,
                      "B",
                      Better::lower,
                      {static_cast<double>(r.bytes.at(wg::Policy::pptm))}});
    suite.add_metric({"transfer_bytes_dmap_" + name,
                      "B",
                      Better::lower,
                      {static_cast<double>(r.bytes.at(wg::Policy::d_map))}});
    if (r.total == totals.back()) {
      const double d = r.median_seconds.at(wg::Policy::d_map);
      gains.push_back((d - r.median_seconds.at(wg::Policy::pptm)) / d);
      pooled_gains.push_back((r.pooled_dmap - r.pooled_pptm) / r.pooled_dmap);
      if (!r.best_mapping_samples.empty()) {
        const double fastest = std::min(best, median(r.best_mapping_samples));
        suite.add_metric({"best_mapping_" + name, "s", Better::lower, r.best_mapping_samples});
        suite.add_metric({"pptm_over_best_mapping_" + name,
                          "x",
                          Better::lower,
                          {r.median_seconds.at(wg::Policy::pptm) / fastest}});
        best_gains.push_back((d - fastest) / d);
      }
    }
  }
  if (!best_gains.empty()) {
    // What any mapping policy could have gained over D-Map on these applications here: the
    // fastest mapping measured, the policies' runs included.
    suite.add_metric(
        {"best_mapping_gain_over_dmap_" + largest, "fraction", Better::higher, {mean(best_gains)}});
  }
  suite.add_metric({"pptm_gain_over_dmap_" + largest, "fraction", Better::higher, {mean(gains)}});
  suite.add_metric({"pptm_gain_over_dmap_" + largest + "_pooled",
                    "fraction",
                    Better::higher,
                    {mean(pooled_gains)}});
  suite.add_metric({"transfer_bytes_ratio_pptm_dmap",
                    "x",
                    Better::lower,
                    {dmap_bytes == 0 ? 0.0 : static_cast<double>(pptm_bytes) / dmap_bytes}});
  suite.add_metric({"pptm_over_best_max", "x", Better::lower, {worst_over_best}});
  suite.add_metric({"pptm_over_best_pooled_max", "x", Better::lower, {worst_over_best_pooled}});
  print_observations(seen);
  print_by_policy(by_policy);
  std::vector<double> all, per_kernel;
  for (const auto& [key, v] : errors) {
    const double m = median(v);
    per_kernel.push_back(m);
    all.insert(all.end(), v.begin(), v.end());
    suite.add_metric({"prediction_error_" + key, "fraction", Better::lower, {m}});
  }
  suite.add_metric({"prediction_error_median", "fraction", Better::lower, {median(all)}});
  suite.add_metric(
      {"prediction_error_worst_kernel",
       "fraction",
       Better::lower,
       {per_kernel.empty() ? 0.0 : *std::max_element(per_kernel.begin(), per_kernel.end())}});
  if (!o.models_db.empty()) {
    wg::ModelStore store(o.models_db);
    rt.models().save(store, o.machine);
  }
  suite.record_host_handoff("end");
  return suite;
}

}  // namespace weft::bench::graph
