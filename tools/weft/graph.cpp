// weft bench graph | weft graph explain | weft graph run | weft calibrate: the graph layer's
// commands, over the five factor pipelines of apps/factors.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "graph/graph_suite.hpp"
#include "pipelines.hpp"
#include "weft/cpu/executor.hpp"
#include "weft/error.hpp"
#include "weft/graph/mapping/model_store.hpp"
#include "weft/graph/mapping/policies.hpp"
#include "weft/graph/mapping/schedule.hpp"
#include "weft/graph/runtime.hpp"
#include "weft/graph/trace.hpp"

namespace weft::tools {

namespace wg = weft::graph;

std::size_t parse_size(const std::string& text) {
  std::size_t pos = 0;
  double value = 0;
  try {
    value = std::stod(text, &pos);
  } catch (const std::exception&) {
    pos = 0;
  }
  const std::string unit = text.substr(pos);
  const double scale = unit == "m" || unit == "M" ? 1e6 : unit == "k" || unit == "K" ? 1e3 : 1;
  if (pos == 0 || !(value > 0) || (unit != "" && scale == 1)) {
    throw InvalidArgument(
        "a size is a number of floats in total, e.g. 32m, 320m or 4000000 (got '" + text + "')");
  }
  return static_cast<std::size_t>(value * scale);
}

std::string default_machine() {
  if (const char* env = std::getenv("WEFT_MACHINE"); env != nullptr && *env != '\0') return env;
  char host[256] = {0};
  if (gethostname(host, sizeof host - 1) == 0 && host[0] != '\0') return host;
  return "this-machine";
}

namespace {

wg::DeviceKind device_kind(const std::string& d) {
  if (d == "auto") return wg::DeviceKind::automatic;
  if (d == "cuda") return wg::DeviceKind::cuda;
  if (d == "emulated") return wg::DeviceKind::emulated;
  if (d == "none") return wg::DeviceKind::none;
  throw InvalidArgument("--device must be auto, cuda, emulated or none (got '" + d + "')");
}

std::unique_ptr<wg::Runtime> make_runtime(cpu::Executor& ex, const std::string& device) {
  wg::RuntimeOptions o;
  o.device = device_kind(device);
  return std::make_unique<wg::Runtime>(ex, o);
}

// Models from the store when it has this machine's, else a calibration here at small sizes.
void ensure_models(wg::Runtime& rt, const GraphArgs& a, const std::string& app) {
  const std::string db = a.db.empty() ? default_models_path() : a.db;
  // A store that does not exist is not created here (opening would): nothing is stored yet.
  if (wg::ModelStore::available() && std::filesystem::exists(db)) {
    try {
      wg::ModelStore store(db);
      const std::size_t n = rt.models().load(store, a.machine);
      if (n > 0) {
        std::printf("models: %zu from %s (machine %s)\n", n, db.c_str(), a.machine.c_str());
        return;
      }
    } catch (const Error& e) {
      std::fprintf(stderr, "weft: the model store is unusable (%s)\n", e.what());
    }
  }
  std::printf(
      "models: none stored for machine %s; calibrating %s here at 1m and 4m floats "
      "(`weft calibrate` stores models for next time)\n",
      a.machine.c_str(), app.c_str());
  std::fflush(stdout);
  bench::graph::calibrate(rt, {app}, {1'000'000, 4'000'000});
}

}  // namespace

int run_graph_explain(const GraphArgs& a) {
  const factors::Application& app = factors::application(a.app);
  cpu::Executor ex;
  auto rt = make_runtime(ex, a.device);
  std::printf("device: %s\n", rt->device_name().c_str());
  std::fflush(stdout);
  ensure_models(*rt, a, app.name);
  const factors::Shape shape = factors::shape_for_total(parse_size(a.size));
  factors::Market market = factors::generate_market(shape, 7);
  factors::BuiltApp built = app.build(market);
  const wg::Graph& g = *built.graph;
  const wg::MappingProblem p = rt->problem(g);
  std::printf("\n%s = %s\n%zu stocks x %zu days (%s floats in the five series)\n\n",
              app.name.c_str(), app.formula.c_str(), shape.stocks, shape.days, a.size.c_str());
  std::printf("%-4s %-32s %12s %12s %12s\n", "node", "label", "cpu ms", "gpu ms", "gain ms");
  for (std::size_t i = 0; i < g.num_nodes(); ++i) {
    const auto& n = p.nodes[i];
    const bool fence = n.gpu == wg::MappingProblem::kNoImplementation;
    if (fence) {
      std::printf("%-4zu %-32s %12.3f %12s %12s\n", i, g.label(g.node_at(i)).c_str(), n.cpu * 1e3,
                  "fence", "-");
    } else {
      std::printf("%-4zu %-32s %12.3f %12.3f %12.3f\n", i, g.label(g.node_at(i)).c_str(),
                  n.cpu * 1e3, n.gpu * 1e3, (n.cpu - n.gpu) * 1e3);
    }
  }
  std::printf("\n%-7s %-12s %16s %16s %14s\n", "policy", "mapping", "additive ms", "schedule ms",
              "bytes moved");
  for (wg::Policy policy : wg::kAllPolicies) {
    const auto m = rt->map(g, policy);
    std::printf("%-7s %-12s %16.3f %16.3f %14zu\n", wg::to_string(policy),
                bench::graph::mapping_string(m).c_str(), wg::mapping_cost(p, m) * 1e3,
                wg::simulate_schedule(p, m).makespan * 1e3, rt->planned_transfer_bytes(g, m));
  }
  std::printf(
      "\n(mapping: one letter per node in the order above, C = CPU, G = GPU; additive = "
      "node times + transfers as the min cut counts them; schedule = the list "
      "scheduler's makespan with the CPU and GPU overlapping)\n");
  return 0;
}

int run_graph_run(const GraphArgs& a) {
  const factors::Application& app = factors::application(a.app);
  const wg::Policy policy = wg::parse_policy(a.policy);
  cpu::Executor ex;
  auto rt = make_runtime(ex, a.device);
  std::printf("device: %s\n", rt->device_name().c_str());
  if (policy != wg::Policy::a_free && policy != wg::Policy::d_map && rt->has_device()) {
    ensure_models(*rt, a, app.name);
  }
  const factors::Shape shape = factors::shape_for_total(parse_size(a.size));
  factors::Market market = factors::generate_market(shape, 7);
  const factors::Series want = app.reference(market);
  factors::BuiltApp built = app.build(market);
  const auto mapping = rt->map(*built.graph, policy);
  rt->set_learning(false);
  (void)rt->run(*built.graph, mapping);  // warm-up: device memory, first touches
  const wg::RunReport r = rt->run(*built.graph, mapping);
  const auto cmp = factors::compare(built.output, want);
  std::printf("%s %s at %s: mapping %s, %.3f ms, %zu B to the GPU, %zu B back, %s\n",
              app.name.c_str(), wg::to_string(policy), a.size.c_str(),
              bench::graph::mapping_string(mapping).c_str(), r.seconds * 1e3, r.bytes_to_device,
              r.bytes_to_host, cmp.ok() ? "matches the reference" : "DOES NOT MATCH");
  for (const wg::NodeRecord& n : r.nodes) {
    std::printf("  %-32s %s lane %2d  %9.3f .. %9.3f ms\n",
                built.graph->label(built.graph->node_at(n.node)).c_str(),
                n.device == wg::Device::gpu ? "GPU" : "CPU", n.lane, n.start * 1e3, n.end * 1e3);
  }
  if (!a.trace.empty()) {
    wg::write_text_file(a.trace, wg::chrome_trace(*built.graph, r));
    std::printf("trace: %s (open in https://ui.perfetto.dev or chrome://tracing)\n",
                a.trace.c_str());
  }
  if (!a.svg.empty()) {
    wg::write_text_file(a.svg, wg::svg_timeline(*built.graph, r));
    std::printf("timeline: %s\n", a.svg.c_str());
  }
  return cmp.ok() ? 0 : 1;
}

int run_calibrate(const GraphArgs& a) {
  cpu::Executor ex;
  auto rt = make_runtime(ex, a.device);
  std::printf("device: %s\n", rt->device_name().c_str());
  std::vector<std::size_t> totals;
  for (const std::string& s : a.sizes) totals.push_back(parse_size(s));
  if (totals.size() < 2) {
    throw InvalidArgument("weft calibrate needs at least two --sizes (a line needs two points)");
  }
  bench::graph::calibrate(*rt, a.apps, totals);
  std::printf("%-6s %-22s %14s %16s %8s\n", "device", "kernel", "intercept s", "slope s/B", "runs");
  for (const auto& [key, m] : rt->models().list()) {
    std::printf("%-6s %-22s %14.3e %16.3e %8zu\n", key.first.c_str(), key.second.c_str(),
                m.intercept(), m.slope(), m.observations());
  }
  const std::string db = a.db.empty() ? default_models_path() : a.db;
  // The store's directory is made as `mkdir -p` would (on a fresh machine the default,
  // $XDG_DATA_HOME/weft or ~/.local/share/weft, does not exist yet).
  if (const auto dir = std::filesystem::path(db).parent_path(); !dir.empty()) {
    std::filesystem::create_directories(dir);
  }
  wg::ModelStore store(db);  // throws InvalidState without SQLite
  rt->models().save(store, a.machine);
  std::printf("stored under machine '%s' in %s\n", a.machine.c_str(), db.c_str());
  return 0;
}

int run_bench_graph(const GraphArgs& a) {
  bench::graph::GraphSuiteOptions o;
  o.device = a.device == "emulated" ? "emulated" : "auto";
  o.samples = a.samples > 0 ? a.samples : (a.quick ? 3 : 7);
  o.pinning = a.pinning;
  o.spin_before_sleep_us = a.spin_before_sleep_us;
  if (a.stream_min_bytes == "gpu-only") {
    o.stream_min_bytes = SIZE_MAX;
  } else if (!a.stream_min_bytes.empty()) {
    o.stream_min_bytes = std::stoull(a.stream_min_bytes);  // CLI11 checked it is a number
  }
  if (a.quick) o.totals = {1'000'000, 4'000'000};
  if (!a.sizes.empty()) {
    o.totals.clear();
    for (const std::string& s : a.sizes) o.totals.push_back(parse_size(s));
  }
  o.apps = a.apps;
  o.trace_dir = a.trace_dir;
  o.machine = a.machine;
  o.exhaustive = a.exhaustive;
  o.node_log = a.node_log;
  // The JSON's machine and the models' key are one name (--machine, else $WEFT_MACHINE, else the
  // host name: default_machine()).
  setenv("WEFT_MACHINE", a.machine.c_str(), 1);
  const bench::Suite suite = bench::graph::run_graph_suite(o);
  std::printf("%s", suite.to_markdown(a.command).c_str());
  if (!a.json_path.empty()) {
    suite.write(a.json_path, a.command);
    std::fprintf(stderr, "[bench] wrote %s and its .md table\n", a.json_path.c_str());
  }
  for (const auto& c : suite.comparisons()) {
    if (!c.verified) return 1;
  }
  return 0;
}

}  // namespace weft::tools

namespace weft::tools {

bool run_graph_demo(cpu::Executor& ex, bool quick, const std::string& trace) {
  wg::RuntimeOptions o;
  auto rt = std::make_unique<wg::Runtime>(ex, o);
  if (!rt->has_device()) {
    std::printf("no GPU here (%s): the emulated device stands in (its times mean nothing)\n",
                rt->device_name().c_str());
    o.device = wg::DeviceKind::emulated;
    rt = std::make_unique<wg::Runtime>(ex, o);
  }
  const factors::Application& app = factors::application("factor5");
  const std::size_t total = quick ? 2'000'000 : 32'000'000;
  std::printf("%s = %s\non %s, %s floats; calibrating its kernels first:\n", app.name.c_str(),
              app.formula.c_str(), rt->device_name().c_str(),
              bench::graph::size_label(total).c_str());
  std::fflush(stdout);
  bench::graph::calibrate(*rt, {app.name}, {total / 4, total});
  factors::Market market = factors::generate_market(factors::shape_for_total(total), 7);
  const factors::Series want = app.reference(market);
  factors::BuiltApp built = app.build(market);
  const wg::Graph& g = *built.graph;
  const wg::MappingProblem p = rt->problem(g);
  const auto pptm = rt->map(g, wg::Policy::pptm);
  const auto d_map = rt->map(g, wg::Policy::d_map);
  std::printf("\nPPTM's mapping, node by node (predicted times from the models):\n");
  for (std::size_t i = 0; i < g.num_nodes(); ++i) {
    const auto& n = p.nodes[i];
    std::string why;
    if (n.gpu == wg::MappingProblem::kNoImplementation) {
      why = "a fence: no GPU implementation";
    } else {
      double crossing = 0;  // transfers this node's edges pay in PPTM's mapping
      for (const auto& e : p.edges) {
        if (e.from != i && e.to != i) continue;
        if (pptm[e.from] == pptm[e.to]) continue;
        crossing += pptm[e.from] == wg::Device::cpu ? e.to_gpu : e.to_cpu;
      }
      char buf[240];
      const double gain = (n.cpu - n.gpu) * 1e3;
      const std::string edges =
          crossing > 0 ? ", edges crossing devices: " + std::to_string(crossing * 1e3) + " ms" : "";
      if (pptm[i] == wg::Device::gpu && gain <= 0) {
        std::snprintf(buf, sizeof buf,
                      "%.2f ms slower on the GPU, but its data are there: it stays with its "
                      "chain%s",
                      -gain, edges.c_str());
      } else if (pptm[i] == wg::Device::gpu) {
        std::snprintf(buf, sizeof buf, "%.2f ms faster on the GPU%s", gain, edges.c_str());
      } else if (gain <= 0) {
        std::snprintf(buf, sizeof buf, "%.2f ms slower on the GPU", -gain);
      } else {
        std::snprintf(buf, sizeof buf,
                      "%.2f ms faster on the GPU, but with its chain not enough to pay for "
                      "moving its data%s",
                      gain, edges.c_str());
      }
      why = buf;
    }
    std::printf("  %-32s -> %s  (%s)\n", g.label(g.node_at(i)).c_str(),
                pptm[i] == wg::Device::gpu ? "GPU" : "CPU", why.c_str());
  }
  rt->set_learning(false);
  bool ok = true;
  // One warm-up run per mapping, then the median of kTimed runs: a single run of a few
  // milliseconds is mostly noise (one run of a mapping can take twice another's), and the
  // median of five is not moved by one or two outliers.
  constexpr int kTimed = 5;
  std::printf("\nmedian of %d runs after a warm-up, learning off:\n", kTimed);
  for (const auto& [name, m] : {std::pair{"PPTM", pptm}, std::pair{"D-Map", d_map}}) {
    (void)rt->run(*built.graph, m);
    std::vector<wg::RunReport> runs;
    for (int k = 0; k < kTimed; ++k) runs.push_back(rt->run(*built.graph, m));
    std::sort(runs.begin(), runs.end(),
              [](const wg::RunReport& a, const wg::RunReport& b) { return a.seconds < b.seconds; });
    const wg::RunReport& r = runs[kTimed / 2];
    const auto cmp = factors::compare(built.output, want);
    ok = ok && cmp.ok();
    std::printf("%-6s %s: %8.2f ms (%.2f-%.2f), %6.1f MB moved (predicted %.2f ms)  %s\n", name,
                bench::graph::mapping_string(m).c_str(), r.seconds * 1e3,
                runs.front().seconds * 1e3, runs.back().seconds * 1e3,
                static_cast<double>(r.bytes_to_device + r.bytes_to_host) / 1e6,
                wg::mapping_cost(p, m) * 1e3, cmp.ok() ? "verified" : "WRONG");
    if (!trace.empty() && m == pptm) {
      wg::write_text_file(trace, wg::chrome_trace(g, r));
      wg::write_text_file(trace + ".svg", wg::svg_timeline(g, r));
      std::printf("       trace: %s (Perfetto / chrome://tracing), timeline: %s.svg\n",
                  trace.c_str(), trace.c_str());
    }
  }
  return ok;
}

}  // namespace weft::tools
