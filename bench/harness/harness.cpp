#include "harness.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>

#include "weft/cpu/topology.hpp"

namespace weft::bench {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double Metric::median() const { return weft::bench::median(samples); }

void Suite::compare(const std::string& benchmark, const std::string& unit, Better better,
                    std::vector<Contender> contenders, int samples_override) {
  const int rounds = samples_override > 0 ? samples_override : options_.samples;
  const std::size_t n = contenders.size();
  std::vector<std::vector<double>> samples(n);
  std::vector<bool> verified(n, true);
  if (!options_.quiet) std::fprintf(stderr, "[bench] %-16s", benchmark.c_str());
  auto settle = [&] {
    if (options_.settle_ms > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(options_.settle_ms));
    }
  };
  for (std::size_t c = 0; c < n; ++c) {
    for (int w = 0; w < options_.warmups; ++w) {
      settle();
      const Outcome o = contenders[c].run();
      verified[c] = verified[c] && o.verified;
    }
  }
  for (int s = 0; s < rounds; ++s) {
    for (std::size_t k = 0; k < n; ++k) {
      const std::size_t c = (k + static_cast<std::size_t>(s)) % n;  // rotate the order
      settle();
      const Outcome o = contenders[c].run();
      samples[c].push_back(o.value);
      verified[c] = verified[c] && o.verified;
    }
    if (!options_.quiet) std::fputc('.', stderr);
  }
  const double weft_median = median(samples[0]);
  if (!options_.quiet) {
    std::fprintf(stderr, " weft %.4g %s%s", weft_median, unit.c_str(),
                 verified[0] ? "" : " (UNVERIFIED)");
  }
  metrics_.push_back(Metric{benchmark, unit, better, samples[0]});
  for (std::size_t c = 1; c < n; ++c) {
    Comparison cmp;
    cmp.benchmark = benchmark;
    cmp.peer = contenders[c].name;
    cmp.weft = weft_median;
    cmp.peer_value = median(samples[c]);
    cmp.unit = unit;
    cmp.better = better;
    cmp.verified = verified[0] && verified[c];
    cmp.weft_samples = samples[0];
    cmp.peer_samples = samples[c];
    if (!options_.quiet) {
      std::fprintf(stderr, " | %s %.4g (x%.2f)%s", cmp.peer.c_str(), cmp.peer_value, cmp.ratio(),
                   verified[c] ? "" : " (UNVERIFIED)");
    }
    comparisons_.push_back(std::move(cmp));
  }
  if (!options_.quiet) std::fputc('\n', stderr);
}

void Suite::measure(const std::string& name, const std::string& unit, Better better,
                    const Runner& run) {
  for (int w = 0; w < options_.warmups; ++w) (void)run();
  Metric m{name, unit, better, {}};
  bool ok = true;
  for (int s = 0; s < options_.samples; ++s) {
    const Outcome o = run();
    ok = ok && o.verified;
    m.samples.push_back(o.value);
  }
  if (!options_.quiet) {
    std::fprintf(stderr, "[bench] %-28s %.4g %s%s\n", name.c_str(), m.median(), unit.c_str(),
                 ok ? "" : " (UNVERIFIED)");
  }
  metrics_.push_back(std::move(m));
}

namespace {
const char* better_name(Better b) { return b == Better::lower ? "lower" : "higher"; }

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}
}  // namespace

MachineInfo describe_machine(const std::string& name) {
  MachineInfo m;
  m.name = name;
  const cpu::CpuTopology topo = cpu::describe_cpu_topology();
  m.cpu = topo.model;
  m.cores = static_cast<int>(topo.processing_units);
  return m;
}

std::string current_commit() {
  // A copy of the tree without .git (the GPU machine gets one) names its commit here.
  if (const char* env = std::getenv("WEFT_COMMIT"); env != nullptr && *env != '\0') return env;
  FILE* p = popen("git rev-parse --short HEAD 2>/dev/null", "r");
  if (p == nullptr) return "unknown";
  char buf[64] = {0};
  const bool got = std::fgets(buf, sizeof buf, p) != nullptr;
  pclose(p);
  if (!got) return "unknown";
  std::string s(buf);
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  if (s.empty()) return "unknown";
  // Tracked files that differ from that commit: the results are not that commit's. (A copy of
  // the tree with an older .git, as a machine that was sent the tree may hold, shows so too.)
  if (std::system("git diff --quiet HEAD -- 2>/dev/null") != 0) s += "+dirty";
  return s;
}

std::string Suite::to_json(const std::string& command) const {
  // Ordered: the metrics keep the order they were recorded in, as the .md table lists them
  // (and from_json reads them back in).
  using json = nlohmann::ordered_json;
  const char* env_machine = std::getenv("WEFT_MACHINE");
  MachineInfo mi = describe_machine(env_machine != nullptr ? env_machine : "unknown");
  mi.gpu = gpu_name_;
  mi.gpus = gpu_count_;
  json j;
  j["suite"] = name_;
  j["machine"] = {
      {"name", mi.name}, {"cpu", mi.cpu}, {"cores", mi.cores}, {"gpu", mi.gpu}, {"gpus", mi.gpus}};
  j["date"] = utc_now();
  j["commit"] = current_commit();
  j["command"] = command;
  j["samples_per_contender"] = options_.samples;
  j["warmups_per_contender"] = options_.warmups;
  json metrics = json::object();
  for (const Metric& m : metrics_) {
    metrics[m.name] = {{"value", m.median()},
                       {"unit", m.unit},
                       {"better", better_name(m.better)},
                       {"samples", m.samples}};
  }
  j["metrics"] = metrics;
  json comps = json::array();
  for (const Comparison& c : comparisons_) {
    comps.push_back({{"benchmark", c.benchmark},
                     {"peer", c.peer},
                     {"weft", c.weft},
                     {"peer_value", c.peer_value},
                     {"unit", c.unit},
                     {"ratio", c.ratio()},
                     {"better", better_name(c.better)},
                     {"verified", c.verified},
                     {"weft_samples", c.weft_samples},
                     {"peer_samples", c.peer_samples}});
  }
  j["comparisons"] = comps;
  return j.dump(2);
}

namespace {
// A metric's or comparison's "better", as to_json writes it.
Better better_from(const nlohmann::ordered_json& j, const std::string& where) {
  const std::string b = j.at("better").get<std::string>();
  if (b != "lower" && b != "higher") {
    throw std::runtime_error(where + ": \"better\" is \"" + b + "\" (lower or higher)");
  }
  return b == "lower" ? Better::lower : Better::higher;
}

// A number as to_json writes it: a value that was not finite (NaN, an infinity) is written as
// null, and reads back as NaN.
double number_from(const nlohmann::ordered_json& v) {
  return v.is_null() ? std::numeric_limits<double>::quiet_NaN() : v.get<double>();
}

std::vector<double> numbers_from(const nlohmann::ordered_json& v) {
  if (!v.is_array()) throw std::runtime_error("samples that are not a list: " + v.dump());
  std::vector<double> out;
  for (const auto& x : v) out.push_back(number_from(x));
  return out;
}
}  // namespace

Suite Suite::from_json(const std::string& text) {
  using json = nlohmann::ordered_json;
  json j;
  try {
    j = json::parse(text);
    SuiteOptions options;
    options.samples = j.at("samples_per_contender").get<int>();
    options.warmups = j.at("warmups_per_contender").get<int>();
    Suite suite(j.at("suite").get<std::string>(), options);
    suite.recorded_commit_ = j.at("commit").get<std::string>();
    suite.recorded_command_ = j.at("command").get<std::string>();
    const json& machine = j.at("machine");
    suite.set_gpu(machine.value("gpu", std::string()), machine.value("gpus", 0));
    for (const auto& [name, m] : j.at("metrics").items()) {
      suite.metrics_.push_back(Metric{name, m.at("unit").get<std::string>(),
                                      better_from(m, "metric " + name),
                                      numbers_from(m.at("samples"))});
    }
    for (const json& c : j.at("comparisons")) {
      Comparison r;
      r.benchmark = c.at("benchmark").get<std::string>();
      r.peer = c.at("peer").get<std::string>();
      r.weft = number_from(c.at("weft"));
      r.peer_value = number_from(c.at("peer_value"));
      r.unit = c.at("unit").get<std::string>();
      r.better = better_from(c, "comparison " + r.benchmark + "/" + r.peer);
      r.verified = c.at("verified").get<bool>();
      r.weft_samples = numbers_from(c.at("weft_samples"));
      r.peer_samples = numbers_from(c.at("peer_samples"));
      suite.comparisons_.push_back(std::move(r));
    }
    return suite;
  } catch (const json::exception& e) {
    throw std::runtime_error(std::string("not a weft bench JSON file: ") + e.what());
  }
}

std::string Suite::to_markdown(const std::string& command) const {
  std::string out = fmt::format(
      "# {} benchmarks\n\nCommand: `{}`  \nCommit: {}  \n"
      "Medians of {} samples per contender (column n where a benchmark took more) after {} "
      "warm-up run(s); ratio = weft / peer.\n\n",
      name_, command, recorded_commit_.empty() ? current_commit() : recorded_commit_,
      options_.samples, options_.warmups);
  out += "| benchmark | peer | weft | peer | unit | ratio | better | verified | n |\n";
  out += "|---|---|---:|---:|---|---:|---|---|---:|\n";
  for (const Comparison& c : comparisons_) {
    out += fmt::format("| {} | {} | {:.4g} | {:.4g} | {} | {:.3f} | {} | {} | {} |\n", c.benchmark,
                       c.peer, c.weft, c.peer_value, c.unit, c.ratio(), better_name(c.better),
                       c.verified ? "yes" : "NO", c.weft_samples.size());
  }
  out += "\n| metric | value | unit | better |\n|---|---:|---|---|\n";
  for (const Metric& m : metrics_) {
    out += fmt::format("| {} | {:.4g} | {} | {} |\n", m.name, m.median(), m.unit,
                       better_name(m.better));
  }
  return out;
}

// Hand-written: a bar chart is a few dozen lines of SVG text, and no charting library in
// Debian's packages writes SVG from C++.
std::string Suite::to_speedup_svg() const {
  if (comparisons_.empty()) return {};  // metrics only: no bar to draw
  std::vector<const Comparison*> all;
  for (const Comparison& c : comparisons_) all.push_back(&c);
  return speedup_svg(name_, all);
}

std::string Suite::to_speedup_svg(const std::string& title,
                                  const std::vector<std::string>& prefixes) const {
  std::vector<const Comparison*> rows;
  for (const Comparison& c : comparisons_) {
    const bool kept = std::any_of(prefixes.begin(), prefixes.end(), [&c](const std::string& p) {
      return c.benchmark.compare(0, p.size(), p) == 0;
    });
    if (kept) rows.push_back(&c);
  }
  return rows.empty() ? std::string() : speedup_svg(name_ + ", " + title, rows);
}

std::string Suite::speedup_svg(const std::string& title,
                               const std::vector<const Comparison*>& chart) const {
  constexpr int kBar = 18, kGap = 6, kLabel = 330, kWidth = 420, kRight = 90;
  const int rows = static_cast<int>(chart.size());
  double most = 1.0;
  for (const Comparison* c : chart) {
    const double r = c->ratio();
    if (r > 0) most = std::max(most, c->better == Better::lower ? 1.0 / r : r);
  }
  const int height = 40 + rows * (kBar + kGap) + 30;
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n"
      "<text x=\"10\" y=\"20\" font-size=\"14\">{}: weft's speed-up over each peer "
      "(peer time / weft time; right of the line: weft faster)</text>\n",
      kLabel + kWidth + kRight, height, title);
  auto x_of = [&](double v) { return kLabel + static_cast<int>(kWidth * v / most); };
  for (int i = 0; i < rows; ++i) {
    const Comparison& c = *chart[static_cast<std::size_t>(i)];
    const double r = c.ratio();
    const double up = r <= 0 ? 0 : (c.better == Better::lower ? 1.0 / r : r);
    const int y = 40 + i * (kBar + kGap);
    svg += fmt::format(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{} vs {}</text>\n"
        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"/>\n"
        "<text x=\"{}\" y=\"{}\">{:.2f}x{}</text>\n",
        kLabel - 6, y + kBar - 5, c.benchmark, c.peer, kLabel, y, std::max(1, x_of(up) - kLabel),
        kBar, up >= 1.0 ? "#2b8a3e" : "#c92a2a", x_of(up) + 4, y + kBar - 5, up,
        c.verified ? "" : " (unverified)");
  }
  svg += fmt::format(
      "<line x1=\"{0}\" y1=\"32\" x2=\"{0}\" y2=\"{1}\" stroke=\"black\" "
      "stroke-dasharray=\"4 3\"/>\n<text x=\"{0}\" y=\"{2}\" text-anchor=\"middle\">1x</text>\n"
      "</svg>\n",
      x_of(1.0), height - 25, height - 10);
  return svg;
}

void Suite::write(const std::string& json_path, const std::string& command) const {
  const std::filesystem::path p(json_path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  {
    std::ofstream out(p);
    out << to_json(command) << '\n';
    out.flush();
    if (!out) throw std::runtime_error("cannot write " + p.string());
  }
  write_markdown(json_path, command);
}

void Suite::write_markdown(const std::string& json_path, const std::string& command) const {
  std::filesystem::path md(json_path);
  md.replace_extension(".md");
  std::ofstream out(md);
  out << to_markdown(command);
  out.flush();
  if (!out) throw std::runtime_error("cannot write " + md.string());
}

}  // namespace weft::bench
