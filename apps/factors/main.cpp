// The factor pipelines end to end on a small market: each application runs CPU-only and with
// every GPU-capable node on the device (a real GPU when there is one, else the emulated device),
// and is checked against its sequential reference. `weft demo` and `weft bench graph` run the
// same pipelines at 32m and 320m floats.
#include <cstdio>

#include "pipelines.hpp"
#include "weft/weft.hpp"

int main() {
  weft::cpu::Executor executor;
  weft::graph::RuntimeOptions options;
  options.device = weft::graph::DeviceKind::automatic;
  weft::graph::Runtime probe(executor, options);
  if (!probe.has_device()) options.device = weft::graph::DeviceKind::emulated;
  weft::graph::Runtime runtime(executor, options);
  std::printf("device: %s\n", runtime.device_name().c_str());
  factors::Market market = factors::generate_market({300, 120}, 1);
  int failures = 0;
  for (const factors::Application& app : factors::applications()) {
    const factors::Series want = app.reference(market);
    factors::BuiltApp built = app.build(market);
    for (weft::graph::Policy policy : {weft::graph::Policy::a_free, weft::graph::Policy::d_map}) {
      const auto report = runtime.run(*built.graph, policy);
      const auto cmp = factors::compare(built.output, want);
      std::printf("%-8s %-7s %8.3f ms  %9zu bytes moved  mismatched %zu  %s\n", app.name.c_str(),
                  weft::graph::to_string(policy), report.seconds * 1e3,
                  report.bytes_to_device + report.bytes_to_host, cmp.mismatched,
                  cmp.ok() ? "ok" : "WRONG");
      failures += cmp.ok() ? 0 : 1;
    }
  }
  return failures == 0 ? 0 : 1;
}
