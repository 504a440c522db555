// The CPU suite's benchmark names, apart from the suite (suite.cpp): the `weft` tool checks
// `weft bench cpu --only` against them without linking the peers the suite runs.
#include "suite.hpp"

namespace weft::bench::cpu {

std::vector<std::string> cpu_benchmark_names() {
  return {"fib32",        "nqueens12",    "nqueens13",      "uts",          "sparselu",
          "multisort",    "alignment",    "stream_copy",    "stream_scale", "stream_add",
          "stream_triad", "empty_tasks",  "task_chain",     "pipeline_is",  "pipeline_lu",
          "spawn_policy", "wake_latency", "external_spawns"};
}

}  // namespace weft::bench::cpu
