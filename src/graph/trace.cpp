#include "weft/graph/trace.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "weft/error.hpp"

namespace weft::graph {

namespace {

std::string escaped(const std::string& s, bool xml) {
  std::string out;
  for (char c : s) {
    if (xml && c == '<') {
      out += "&lt;";
    } else if (xml && c == '>') {
      out += "&gt;";
    } else if (xml && c == '&') {
      out += "&amp;";
    } else if (!xml && (c == '"' || c == '\\')) {
      out += '\\';
      out += c;
    } else if (!xml && static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

// One row of the timeline.
struct Row {
  int pid;  // 1 CPU, 2 GPU
  int tid;
  [[nodiscard]] std::string name() const {
    if (pid == 2) return "GPU stream " + std::to_string(tid);
    return tid < 0 ? "CPU dispatcher" : "CPU worker " + std::to_string(tid);
  }
  friend bool operator<(const Row& a, const Row& b) {
    return a.pid != b.pid ? a.pid < b.pid : a.tid < b.tid;
  }
};

struct Span {
  Row row;
  std::string name;
  double start, end;
  bool copy;
  std::size_t bytes;
};

std::vector<Span> spans(const Graph& graph, const RunReport& report) {
  if (report.graph != 0 && report.graph != graph.id()) {  // its nodes are another's indices
    throw InvalidArgument("weft::graph::trace: the report is of another graph");
  }
  std::vector<Span> out;
  for (const NodeRecord& n : report.nodes) {
    out.push_back({{n.device == Device::gpu ? 2 : 1, n.lane},
                   graph.label(graph.node_at(n.node)),
                   n.start,
                   n.end,
                   false,
                   n.size});
  }
  for (const TransferRecord& t : report.transfers) {
    out.push_back({{2, t.stream},
                   std::string(t.to_device ? "h2d " : "d2h ") + graph.name(graph.data_at(t.data)),
                   t.start,
                   t.end,
                   true,
                   t.bytes});
  }
  return out;
}

}  // namespace

std::string chrome_trace(const Graph& graph, const RunReport& report) {
  const std::vector<Span> all = spans(graph, report);
  std::ostringstream o;
  o << "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"policy\":\"" << escaped(report.policy, false)
    << "\",\"seconds\":" << report.seconds << ",\"bytes_to_device\":" << report.bytes_to_device
    << ",\"bytes_to_host\":" << report.bytes_to_host << "},\"traceEvents\":[";
  o << "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"args\":{\"name\":\"CPU\"}},"
    << "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":2,\"args\":{\"name\":\"GPU\"}}";
  std::map<Row, bool> rows;
  for (const Span& s : all) rows[s.row] = true;
  for (const auto& [row, unused] : rows) {
    o << ",{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" << row.pid << ",\"tid\":" << row.tid
      << ",\"args\":{\"name\":\"" << row.name() << "\"}}";
  }
  for (const Span& s : all) {
    o << ",{\"name\":\"" << escaped(s.name, false) << "\",\"cat\":\"" << (s.copy ? "copy" : "node")
      << "\",\"ph\":\"X\",\"pid\":" << s.row.pid << ",\"tid\":" << s.row.tid
      << ",\"ts\":" << s.start * 1e6 << ",\"dur\":" << std::max(0.0, s.end - s.start) * 1e6
      << ",\"args\":{\"bytes\":" << s.bytes << "}}";
  }
  o << "]}\n";
  return o.str();
}

std::string svg_timeline(const Graph& graph, const RunReport& report) {
  const std::vector<Span> all = spans(graph, report);
  std::map<Row, int> rows;
  for (const Span& s : all) rows[s.row] = 0;
  int index = 0;
  for (auto& [row, i] : rows) i = index++;
  const double width = 1000, left = 140, row_h = 28, top = 40;
  const double span = std::max(report.seconds, 1e-9);
  const double height = top + row_h * static_cast<double>(rows.size()) + 30;
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << left + width + 20 << "\" height=\""
    << height << "\" font-family=\"sans-serif\" font-size=\"11\">\n";
  o << "<text x=\"10\" y=\"20\" font-size=\"14\">" << escaped(report.policy, true) << ": "
    << report.seconds * 1e3 << " ms, " << report.bytes_to_device << " B to the GPU, "
    << report.bytes_to_host << " B back</text>\n";
  for (const auto& [row, i] : rows) {
    o << "<text x=\"10\" y=\"" << top + row_h * i + 18 << "\">" << row.name() << "</text>\n";
  }
  for (const Span& s : all) {
    const double x = left + width * s.start / span;
    const double w = std::max(1.0, width * (s.end - s.start) / span);
    const double y = top + row_h * rows[s.row] + 3;
    const char* fill = s.copy ? "#e0a030" : (s.row.pid == 2 ? "#4a8f4a" : "#4a6fa5");
    o << "<g><title>" << escaped(s.name, true) << " (" << (s.end - s.start) * 1e3 << " ms, "
      << s.bytes << " B)</title><rect x=\"" << x << "\" y=\"" << y << "\" width=\"" << w
      << "\" height=\"" << row_h - 6 << "\" fill=\"" << fill << "\" stroke=\"white\"/>";
    if (w > 40) {
      o << "<text x=\"" << x + 3 << "\" y=\"" << y + 15 << "\" fill=\"white\">"
        << escaped(s.name.substr(0, static_cast<std::size_t>(w / 6)), true) << "</text>";
    }
    o << "</g>\n";
  }
  o << "<text x=\"" << left << "\" y=\"" << height - 8 << "\">0</text><text x=\""
    << left + width - 60 << "\" y=\"" << height - 8 << "\">" << report.seconds * 1e3
    << " ms</text>\n</svg>\n";
  return o.str();
}

void write_text_file(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  if (!out) throw Error("weft::graph: cannot write '" + path + "'");
}

}  // namespace weft::graph
