#include "weft/graph/graph.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <sstream>

#include "graph_impl.hpp"
#include "weft/error.hpp"
#include "weft/graph/mapping/cost_models.hpp"

namespace weft::graph {

namespace detail {

namespace {
// Graph identities, so that a handle of one graph is refused by another. 0 is "no graph".
std::atomic<std::uint64_t> next_graph_id{1};
}  // namespace

GraphImpl::GraphImpl() : id(next_graph_id.fetch_add(1, std::memory_order_relaxed)) {}
// relaxed: the id only has to be unique; nothing is published through it.

GraphImpl::~GraphImpl() {
  if (!memory) return;
  for (DataEntry& d : data) {
    if (d.device != nullptr) memory->allocator->deallocate(d.device);
    if (d.pinned) memory->unpin(d.host);  // before an owned buffer is freed
  }
}

void GraphImpl::pin_host_buffers() {
  for (DataEntry& d : data) {
    if (!d.pinned) d.pinned = memory->pin(d.host, d.bytes);
  }
}

DataEntry& GraphImpl::entry(Data d, const std::string& who) {
  if (d.graph_ != id || d.index_ >= data.size()) {
    throw InvalidArgument(who + ": " +
                          (d.graph_ == 0 ? std::string("a default-constructed data handle")
                                         : std::string("a data handle of another graph")));
  }
  return data[d.index_];
}

std::size_t GraphImpl::node_index(NodeId n, const char* who) const {
  const std::string prefix = std::string("weft::graph::Graph::") + who + ": ";
  if (n.graph_ != id) {
    throw InvalidArgument(
        prefix + (n.graph_ == 0 ? "a default-constructed node id" : "a node id of another graph"));
  }
  if (n.index_ >= nodes.size()) {  // node_at(index) past the last node
    throw InvalidArgument(prefix + "node " + std::to_string(n.index_) +
                          " does not exist (the graph has " + std::to_string(nodes.size()) + ")");
  }
  return n.index_;
}

std::string GraphImpl::describe(std::size_t node) const {
  const NodeEntry& n = nodes[node];
  if (n.label != n.kernel.name) return "node '" + n.label + "' (" + std::to_string(node) + ")";
  return "node " + std::to_string(node) + " ('" + n.kernel.name + "')";
}

bool GraphImpl::reaches(std::size_t from, std::size_t to) const {
  std::vector<std::size_t> stack{from};
  std::vector<bool> seen(nodes.size(), false);
  while (!stack.empty()) {
    const std::size_t n = stack.back();
    stack.pop_back();
    if (n == to) return true;
    for (std::size_t c : consumers[n]) {
      if (!seen[c]) {
        seen[c] = true;
        stack.push_back(c);
      }
    }
  }
  return false;
}

void GraphImpl::release_device_copies() {
  if (!memory) return;
  for (DataEntry& d : data) {
    if (d.device != nullptr) {
      if (!d.copies.valid(Coherence::kHost) && d.copies.valid(1)) {
        memory->copy_to_host(d.host, d.device, d.bytes);
        d.copies.reset_to(Coherence::kHost);
      }
      memory->allocator->deallocate(d.device);
      d.device = nullptr;
      if (d.copies.valid(Coherence::kHost)) d.copies.reset_to(Coherence::kHost);
    }
    if (d.pinned) memory->unpin(d.host);
    d.pinned = false;
  }
}

}  // namespace detail

namespace {

void add_unique(std::vector<std::size_t>& v, std::size_t x) {
  if (std::find(v.begin(), v.end(), x) == v.end())
    v.insert(std::upper_bound(v.begin(), v.end(), x), x);
}

// A graph changes only between runs: a node or datum added during one would not be in the
// run's dispatcher (never run), and its vectors would move under it. acquire: pairs with the
// release that ends a run.
void check_not_running(const detail::GraphImpl& g, const char* call) {
  if (g.running.load(std::memory_order_acquire)) {
    throw InvalidState(std::string("weft::graph::Graph::") + call +
                       ": the graph is running (build it before or after a run)");
  }
}

// "[0x1000, 0x1040)": the bytes of a buffer, as an overlap's message names them.
std::string byte_range(const void* host, std::size_t bytes) {
  std::ostringstream s;
  s << '[' << host << ", " << static_cast<const void*>(static_cast<const std::byte*>(host) + bytes)
    << ')';
  return s.str();
}

bool overlap(const void* host, std::size_t bytes, const detail::DataEntry& d) {
  const auto begin = reinterpret_cast<std::uintptr_t>(host);
  const auto other = reinterpret_cast<std::uintptr_t>(d.host);
  return begin < other + d.bytes && other < begin + bytes;
}

// Written bytes, one datum: each datum orders its own last writer and readers (add_node), so a
// node reading a byte through one datum would not wait for a node writing it through another.
// Data that only nodes' reads reach may overlap (two views of one input).
const char* const kOverlapWhy =
    " (its readers and writers would not be ordered with the other's: pass one handle)";

void check_overlap_on_add(const detail::GraphImpl& g, const std::string& name, const void* host,
                          std::size_t bytes) {
  const auto begin = reinterpret_cast<std::uintptr_t>(host);
  if (bytes > UINTPTR_MAX - begin) {
    throw InvalidArgument("weft::graph::Graph::add_data: data '" + name + "' (" +
                          std::to_string(bytes) + " bytes at " + byte_range(host, 0) +
                          ") runs past the end of memory");
  }
  for (const detail::DataEntry& d : g.data) {
    if (d.written && overlap(host, bytes, d)) {
      throw InvalidArgument("weft::graph::Graph::add_data: data '" + name + "' " +
                            byte_range(host, bytes) + " overlaps data '" + d.name + "' " +
                            byte_range(d.host, d.bytes) + ", which a node writes" + kOverlapWhy);
    }
  }
}

// A node that writes datum `w` (index in g.data): no other datum may reach its bytes.
void check_overlap_on_write(const detail::GraphImpl& g, const std::string& who, std::size_t w) {
  const detail::DataEntry& e = g.data[w];
  for (std::size_t i = 0; i < g.data.size(); ++i) {
    const detail::DataEntry& d = g.data[i];
    if (i != w && overlap(e.host, e.bytes, d)) {
      throw InvalidArgument(who + ": it writes data '" + e.name + "' " +
                            byte_range(e.host, e.bytes) + ", which overlaps data '" + d.name +
                            "' " + byte_range(d.host, d.bytes) + kOverlapWhy);
    }
  }
}

}  // namespace

Graph::Graph() : impl_(std::make_unique<detail::GraphImpl>()) {}

Graph::~Graph() {
  // A run holds the graph's nodes and data: destroying it then would leave the run reading
  // freed memory, which no error could be returned from.
  if (impl_ && impl_->running.load(std::memory_order_acquire)) {
    std::fputs("weft::graph::Graph destroyed while a run of it is in progress\n", stderr);
    std::terminate();
  }
}

Data Graph::add_data(std::string name, void* host, std::size_t bytes) {
  check_not_running(*impl_, "add_data");
  if (name.empty()) throw InvalidArgument("weft::graph::Graph::add_data: an empty name");
  if (host == nullptr) {
    throw InvalidArgument("weft::graph::Graph::add_data: data '" + name + "' has a null buffer");
  }
  if (bytes == 0) {
    throw InvalidArgument("weft::graph::Graph::add_data: data '" + name + "' has 0 bytes");
  }
  check_overlap_on_add(*impl_, name, host, bytes);
  detail::DataEntry e;
  e.name = std::move(name);
  e.bytes = bytes;
  e.host = host;
  e.copies.reset_to(detail::Coherence::kHost);
  impl_->data.push_back(std::move(e));
  return Data(impl_->id, impl_->data.size() - 1);
}

Data Graph::add_data(std::string name, std::size_t bytes) {
  if (bytes == 0) {
    throw InvalidArgument("weft::graph::Graph::add_data: data '" + name + "' has 0 bytes");
  }
  auto owned = std::make_unique<std::byte[]>(bytes);  // value-initialised: zeroed
  Data d = add_data(std::move(name), owned.get(), bytes);
  impl_->data.back().owned = std::move(owned);
  return d;
}

NodeId Graph::add_node(Kernel kernel, std::vector<Arg> args, std::string label) {
  check_not_running(*impl_, "add_node");
  auto& g = *impl_;
  const std::size_t index = g.nodes.size();
  if (label.empty()) label = kernel.name;
  const std::string who = "weft::graph::Graph::add_node: node " + std::to_string(index) +
                          (label.empty() ? "" : " ('" + label + "')");
  if (kernel.name.empty()) throw InvalidArgument(who + ": the kernel has no name");
  if (is_reserved_model_key(kernel.name)) {
    throw InvalidArgument(who + ": the kernel name '" + kernel.name +
                          "' is reserved for the cost models' own keys (names starting with "
                          "\"transfer:\" or ending with \"" +
                          kBesideCopies + "\")");
  }
  if (!kernel.cpu && !kernel.gpu) {
    throw InvalidArgument(who + ": kernel '" + kernel.name + "' has no implementation");
  }
  std::vector<std::size_t> bytes;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const detail::DataEntry& e = g.entry(args[i].data, who + ", argument " + std::to_string(i));
    for (std::size_t j = 0; j < i; ++j) {
      if (args[j].data == args[i].data) {
        throw InvalidArgument(who + ": data '" + e.name + "' is argument " + std::to_string(j) +
                              " and " + std::to_string(i) +
                              " (pass it once, with read_write to update it; two reads of one "
                              "buffer take a second datum over it)");
      }
    }
    if (args[i].access != Access::read) check_overlap_on_write(g, who, args[i].data.index());
    bytes.push_back(e.bytes);
  }
  if (kernel.check) {
    try {
      kernel.check(bytes);
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(who + ": " + e.what());
    }
  }
  detail::NodeEntry n;
  n.label = std::move(label);
  for (std::size_t b : bytes) n.bytes += b;
  for (const Arg& a : args) {
    detail::DataEntry& e = g.data[a.data.index()];
    if (a.access != Access::write) {  // reads after the last writer
      if (e.last_writer >= 0) {
        const auto w = static_cast<std::size_t>(e.last_writer);
        add_unique(n.producers, w);
        n.flows.emplace_back(w, a.data.index());
      } else if (!e.written) {
        e.read_before_written = true;
      }
    }
    if (a.access != Access::read) {  // writes after the readers since, and the last writer
      if (e.last_writer >= 0) add_unique(n.producers, static_cast<std::size_t>(e.last_writer));
      for (std::size_t r : e.readers_since_write) {
        if (r != index) add_unique(n.producers, r);
      }
    }
  }
  for (const Arg& a : args) {
    detail::DataEntry& e = g.data[a.data.index()];
    if (a.access == Access::read) {
      e.readers_since_write.push_back(index);
    } else {
      e.last_writer = static_cast<std::ptrdiff_t>(index);
      e.readers_since_write.clear();
      e.written = true;
    }
  }
  n.kernel = std::move(kernel);
  n.args = std::move(args);
  g.nodes.push_back(std::move(n));
  g.overlap_by_mapping.clear();
  g.consumers.emplace_back();
  for (std::size_t p : g.nodes.back().producers) g.consumers[p].push_back(index);
  return NodeId(g.id, index);
}

void Graph::add_edge(NodeId before, NodeId after) {
  check_not_running(*impl_, "add_edge");
  auto& g = *impl_;
  const std::size_t b = g.node_index(before, "add_edge");
  const std::size_t a = g.node_index(after, "add_edge");
  if (a == b) {
    throw InvalidArgument("weft::graph::Graph::add_edge: an edge from " + g.describe(a) +
                          " to itself");
  }
  auto& producers = g.nodes[a].producers;
  if (std::find(producers.begin(), producers.end(), b) != producers.end()) return;
  if (g.reaches(a, b)) {
    throw InvalidArgument("weft::graph::Graph::add_edge: an edge from " + g.describe(b) + " to " +
                          g.describe(a) + " closes a cycle (" + g.describe(a) +
                          " already runs before " + g.describe(b) + ")");
  }
  add_unique(producers, b);
  g.consumers[b].push_back(a);
  g.overlap_by_mapping.clear();  // the runs it holds had other dependencies
}

std::size_t Graph::num_nodes() const noexcept { return impl_->nodes.size(); }
std::size_t Graph::num_data() const noexcept { return impl_->data.size(); }
std::uint64_t Graph::id() const noexcept { return impl_->id; }
NodeId Graph::node_at(std::size_t index) const {
  const NodeId n(impl_->id, index);
  (void)impl_->node_index(n, "node_at");  // refuses an index past the last node
  return n;
}
const std::string& Graph::label(NodeId n) const {
  return impl_->nodes[impl_->node_index(n, "label")].label;
}
const Kernel& Graph::kernel(NodeId n) const {
  return impl_->nodes[impl_->node_index(n, "kernel")].kernel;
}
const std::vector<Arg>& Graph::args(NodeId n) const {
  return impl_->nodes[impl_->node_index(n, "args")].args;
}
const std::vector<std::size_t>& Graph::producers(NodeId n) const {
  return impl_->nodes[impl_->node_index(n, "producers")].producers;
}
Data Graph::data_at(std::size_t index) const {
  if (index >= impl_->data.size()) {
    throw InvalidArgument("weft::graph::Graph::data_at: data " + std::to_string(index) +
                          " does not exist (the graph has " + std::to_string(impl_->data.size()) +
                          ")");
  }
  return Data(impl_->id, index);
}
const std::string& Graph::name(Data d) const {
  return impl_->entry(d, "weft::graph::Graph::name").name;
}
std::size_t Graph::bytes(Data d) const {
  return impl_->entry(d, "weft::graph::Graph::bytes").bytes;
}

void* Graph::fetch(Data d) {
  detail::DataEntry& e = impl_->entry(d, "weft::graph::Graph::fetch");
  if (impl_->running) throw InvalidState("weft::graph::Graph::fetch: a run is in progress");
  if (!e.copies.valid(detail::Coherence::kHost)) {
    const std::size_t source = e.copies.read_at(detail::Coherence::kHost, "data '" + e.name + "'");
    if (source != detail::Coherence::kNone) impl_->memory->copy_to_host(e.host, e.device, e.bytes);
  }
  return e.host;
}

}  // namespace weft::graph
