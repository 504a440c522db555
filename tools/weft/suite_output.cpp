// What the `weft bench` commands share: a suite's table and files, and starting the tool again
// with an environment variable that a library reads when it is loaded.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "commands.hpp"
#include "harness/harness.hpp"

namespace weft::tools {

int finish_suite(const bench::Suite& suite, const std::string& json_path,
                 const std::string& command, bool chart, const std::vector<ChartGroup>& groups) {
  std::printf("%s", suite.to_markdown(command).c_str());
  if (!json_path.empty()) {
    suite.write(json_path, command);
    std::fprintf(stderr, "[bench] wrote %s and its .md table\n", json_path.c_str());
    std::string stem = json_path;
    if (const auto dot = stem.rfind(".json"); dot != std::string::npos) stem.erase(dot);
    // A chart with no bar is not written, and an earlier run's chart at its path is removed
    // (an application not run now, or a run with metrics only).
    auto write_svg = [](const std::string& path, const std::string& svg) {
      if (svg.empty()) {
        std::error_code ignored;
        std::filesystem::remove(path, ignored);
        return;
      }
      std::ofstream(path) << svg;
      std::fprintf(stderr, "[bench] wrote %s\n", path.c_str());
    };
    if (chart) write_svg(stem + ".svg", suite.to_speedup_svg());
    for (const ChartGroup& g : groups) {
      write_svg(stem + "-" + g.name + ".svg", suite.to_speedup_svg(g.name, g.prefixes));
    }
  }
  for (const auto& c : suite.comparisons()) {
    if (!c.verified) return 1;
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
