// What the `weft bench` commands share: a suite's table and files, and starting the tool again
// with an environment variable that a library reads when it is loaded.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "commands.hpp"
#include "harness/harness.hpp"

namespace weft::tools {

SuiteCharts charts_of(const std::string& suite) {
  if (suite == "gpu-apps") {  // a speed-up chart per application, beside the suite's
    return {true,
            {{"batched_gemm", {"batched_", "vbatched_"}},
             {"cholesky", {"cholesky_"}},
             {"tnn", {"tnn_"}},
             {"kmeans", {"kmeans_"}},
             {"spmv_bs", {"spmv_bs"}}}};
  }
  if (suite == "split") {
    return {true,
            {{"gemm_rows", {"gemm_rows"}},
             {"triad_host", {"triad_host"}},
             {"spmv_host", {"spmv_host"}},
             {"hpl_lu", {"hpl_lu"}},
             {"percore", {"percore_"}}}};
  }
  if (suite == "streams") return {true, {}};
  return {};  // gpu-pool: its comparisons differ in kind (empty tasks, latency, spread)
}

namespace {

// <json_path> without its extension: the charts' names start with it.
std::string json_stem(const std::string& json_path) {
  return std::filesystem::path(json_path).replace_extension().string();
}

// The suite's charts beside its JSON. A chart with no bar is not written, and an earlier run's
// chart at its path is removed (an application not run now, or a run with metrics only).
// Returns whether every chart was written.
bool write_charts(const bench::Suite& suite, const std::string& json_path) {
  const std::string stem = json_stem(json_path);
  bool ok = true;
  auto write_svg = [&ok](const std::string& path, const std::string& svg) {
    if (svg.empty()) {
      std::error_code ignored;
      std::filesystem::remove(path, ignored);
      return;
    }
    std::ofstream out(path);
    out << svg;
    out.flush();
    if (!out) {
      std::fprintf(stderr, "[bench] cannot write %s\n", path.c_str());
      ok = false;
      return;
    }
    std::fprintf(stderr, "[bench] wrote %s\n", path.c_str());
  };
  const SuiteCharts charts = charts_of(suite.name());
  if (charts.suite_chart) write_svg(stem + ".svg", suite.to_speedup_svg());
  for (const ChartGroup& g : charts.groups) {
    write_svg(stem + "-" + g.name + ".svg", suite.to_speedup_svg(g.name, g.prefixes));
  }
  return ok;
}

}  // namespace

int finish_suite(const bench::Suite& suite, const std::string& json_path,
                 const std::string& command) {
  std::printf("%s", suite.to_markdown(command).c_str());
  if (!json_path.empty()) {
    suite.write(json_path, command);
    std::fprintf(stderr, "[bench] wrote %s and its .md table\n", json_path.c_str());
    if (!write_charts(suite, json_path)) return 1;
  }
  for (const auto& c : suite.comparisons()) {
    if (!c.verified) return 1;
  }
  return 0;
}

int render_suite(const std::string& json_path) {
  // The table and charts are named from the JSON's: FILE.json -> FILE.md, FILE*.svg (any other
  // name could make the table's path the JSON's own, or the charts another run's).
  if (std::filesystem::path(json_path).extension() != ".json") {
    std::fprintf(stderr, "weft bench render: %s: expected a suite's .json file\n",
                 json_path.c_str());
    return 1;
  }
  std::ifstream in(json_path);
  if (!in) {
    std::fprintf(stderr, "weft bench render: cannot read %s\n", json_path.c_str());
    return 1;
  }
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  try {
    const bench::Suite suite = bench::Suite::from_json(text);
    suite.write_markdown(json_path, suite.recorded_command());
    std::fprintf(stderr, "[bench] wrote the .md table of %s\n", json_path.c_str());
    if (!write_charts(suite, json_path)) return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "weft bench render: %s: %s\n", json_path.c_str(), e.what());
    return 1;
  }
  return 0;
}

void restart_with_env(char** argv, const char* name, const char* value, const char* what) {
  if (std::getenv(name) != nullptr) return;  // set by the user, or by the restart itself
  setenv(name, value, 1);
  std::fprintf(stderr, "[bench] %s: restarting with %s=%s\n", what, name, value);
  execv("/proc/self/exe", argv);
  std::fprintf(stderr, "[bench] %s: could not restart (%s); going on without %s=%s\n", what,
               std::strerror(errno), name, value);
}

}  // namespace weft::tools
