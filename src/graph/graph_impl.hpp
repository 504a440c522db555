// What a Graph holds (src/graph only): its data with their copies, its nodes with their
// dependencies. The runtime reads and updates it through detail::GraphAccess.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "weft/graph/detail/coherence.hpp"
#include "weft/graph/device/bfc_allocator.hpp"
#include "weft/graph/graph.hpp"
#include "weft/graph/mapping/problem.hpp"

namespace weft::graph::detail {

/// A device's memory as a graph's data copies see it: where copies are allocated, and how one
/// is brought back synchronously (Graph::fetch).
struct DeviceMemory {
  std::shared_ptr<BfcAllocator> allocator;
  std::function<void(void* host, const void* device, std::size_t bytes)> copy_to_host;
  std::function<bool(void* host, std::size_t bytes)> pin;  // see DeviceBackend::pin
  std::function<void(void* host)> unpin;
};

struct DataEntry {
  std::string name;
  std::size_t bytes = 0;
  void* host = nullptr;
  std::unique_ptr<std::byte[]> owned;  // set for data the graph owns
  Coherence copies{2};                 // host, device 0
  void* device = nullptr;              // device 0's copy, from memory->allocator
  bool pinned = false;                 // the host buffer was page-locked by memory->pin
  // Build-time dependency tracking (sequential semantics).
  std::ptrdiff_t last_writer = -1;
  std::vector<std::size_t> readers_since_write;
  // Derived: whether any node writes it, and whether some node reads it before any writes it.
  bool written = false;
  bool read_before_written = false;
};

struct NodeEntry {
  Kernel kernel;
  std::vector<Arg> args;
  std::string label;
  std::size_t bytes = 0;               // what its arguments span: the cost models' size
  std::vector<std::size_t> producers;  // ascending, unique
  // Producers whose output this node reads: (producer, data index), for transfer costs.
  std::vector<std::pair<std::size_t, std::size_t>> flows;
};

struct GraphImpl {
  GraphImpl();
  ~GraphImpl();

  [[nodiscard]] DataEntry& entry(Data d, const std::string& who);
  [[nodiscard]] std::size_t node_index(NodeId n, const char* who) const;
  [[nodiscard]] std::string describe(std::size_t node) const;
  [[nodiscard]] bool reaches(std::size_t from, std::size_t to) const;
  /// Frees every device copy (their values on the device are lost: a copy that was the only
  /// valid one is first brought back to the host) and unpins the host buffers.
  void release_device_copies();
  /// Page-locks every host buffer not yet pinned (before a run that uses the device).
  void pin_host_buffers();

  std::uint64_t id;
  std::vector<DataEntry> data;
  std::vector<NodeEntry> nodes;
  std::vector<std::vector<std::size_t>> consumers;  // inverse of producers
  std::shared_ptr<DeviceMemory> memory;             // set by the first run on a device
  // Per mapping run before: each node's share of its time beside copies (NodeRecord::
  // copy_overlap), averaged over its runs with weight 1/2 for the last; what the next run of
  // that mapping expects when it predicts a CPU node's time (CostModels::predict_cpu). Cleared
  // when nodes or edges are added, and when it holds kOverlapMappings mappings.
  static constexpr std::size_t kOverlapMappings = 64;
  std::map<std::vector<Device>, std::vector<double>> overlap_by_mapping;
  // Set while a run of the graph is in progress (Runtime::execute claims it with an acq_rel
  // exchange and clears it with a release store); read by the graph's own members to refuse
  // changes during a run (acquire).
  std::atomic<bool> running{false};
};

struct GraphAccess {
  static GraphImpl& impl(Graph& g) { return *g.impl_; }
  static const GraphImpl& impl(const Graph& g) { return *g.impl_; }
};

}  // namespace weft::graph::detail
