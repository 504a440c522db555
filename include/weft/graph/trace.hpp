// weft/graph/trace.hpp - what a graph run did, as pictures: Chrome trace-event JSON
// (opens in Perfetto or chrome://tracing) and a self-contained SVG timeline, one row per CPU
// worker (the dispatcher's own row for nodes it ran inline: lane -1) and per GPU stream, with
// every node (device, start, end, bytes it spans) and every copy between host and device.
#pragma once

#include <string>

#include "weft/graph/graph.hpp"
#include "weft/graph/runtime.hpp"

namespace weft::graph {

/// The run as Chrome trace-event JSON ("X" events in microseconds; pid 1 the CPU, pid 2 the
/// GPU; copies on their stream's row, named "h2d <data>" / "d2h <data>").
[[nodiscard]] std::string chrome_trace(const Graph& graph, const RunReport& report);
/// The run as an SVG timeline (rows as above, nodes labelled, copies hatched).
[[nodiscard]] std::string svg_timeline(const Graph& graph, const RunReport& report);
/// Writes `text` to `path`. Throws Error naming the path when it cannot.
void write_text_file(const std::string& path, const std::string& text);

}  // namespace weft::graph
