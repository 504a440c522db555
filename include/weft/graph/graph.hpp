// weft/graph/graph.hpp - the graph API: registered data over host buffers, nodes that run a kernel
// on some of that data, and the dependencies that follow from what each node reads and writes. A
// Graph is built once and run many times (weft::graph::Runtime) with new data in the same buffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "weft/error.hpp"

namespace weft::cpu {
class Executor;
}

namespace weft::graph {

class Graph;

namespace detail {
struct GraphImpl;
struct GraphAccess;
}  // namespace detail

/// A handle to data registered with one Graph (cheap to copy). A default-constructed handle, or
/// one of another graph, is refused by the graph with InvalidArgument.
class Data {
 public:
  Data() = default;
  [[nodiscard]] std::size_t index() const noexcept { return index_; }
  friend bool operator==(const Data&, const Data&) = default;

 private:
  friend struct detail::GraphImpl;
  friend class Graph;
  Data(std::uint64_t graph, std::size_t index) : graph_(graph), index_(index) {}
  std::uint64_t graph_ = 0;
  std::size_t index_ = 0;
};

/// A node of one Graph (cheap to copy): its index in the order nodes were added, and the graph
/// it belongs to. A default-constructed id, or one of another graph, is refused by the graph
/// with InvalidArgument: a bare index would name whichever node another graph has there.
class NodeId {
 public:
  NodeId() = default;
  [[nodiscard]] std::size_t index() const noexcept { return index_; }
  friend bool operator==(const NodeId&, const NodeId&) = default;

 private:
  friend struct detail::GraphImpl;
  friend class Graph;
  NodeId(std::uint64_t graph, std::size_t index) : graph_(graph), index_(index) {}
  std::uint64_t graph_ = 0;
  std::size_t index_ = 0;
};

/// How a node uses a piece of data. `write` overwrites all of it (nothing is copied in first);
/// `read_write` updates it in place.
enum class Access : std::uint8_t { read, write, read_write };

struct Arg {
  Data data;
  Access access = Access::read;
};
inline Arg read(Data d) { return {d, Access::read}; }
inline Arg write(Data d) { return {d, Access::write}; }
inline Arg read_write(Data d) { return {d, Access::read_write}; }

/// What an implementation receives: one pointer per argument, in the node's order, to memory on
/// the device the node runs on, and each argument's size in bytes.
/// get and count throw weft::InvalidArgument for an argument the node does not have.
struct KernelArgs {
  std::span<void* const> pointers;
  std::span<const std::size_t> bytes;
  template <class T>
  [[nodiscard]] T* get(std::size_t i) const {
    check_argument(i);
    return static_cast<T*>(pointers[i]);
  }
  template <class T>
  [[nodiscard]] std::size_t count(std::size_t i) const {
    check_argument(i);
    return bytes[i] / sizeof(T);
  }
  void check_argument(std::size_t i) const {
    if (i >= pointers.size() || i >= bytes.size()) {
      throw InvalidArgument("weft::graph::KernelArgs: argument " + std::to_string(i) + " of " +
                            std::to_string(pointers.size()));
    }
  }
};

/// A CPU implementation's call: host pointers, and the executor it may run parallel loops on
/// (it runs on one of that executor's workers, or on a thread that may wait on it).
struct CpuCall : KernelArgs {
  cpu::Executor* executor = nullptr;
  /// Per argument (shorter or empty: false): the node writes it and a GPU node reads it next,
  /// so the run copies it to the device as soon as this node ends. Such an output is best
  /// written with stream_copy (weft/graph/stream_copy.hpp): left in the cores' caches, it is
  /// copied at a fraction of the bandwidth. Only a hint: the values are the same either way.
  std::span<const unsigned char> to_device;
  [[nodiscard]] bool copied_to_device(std::size_t i) const {
    return i < to_device.size() && to_device[i] != 0;
  }
};

/// A GPU implementation's call: device pointers, the CUDA stream (a cudaStream_t) to launch on
/// and the device ordinal. The implementation only enqueues work on `stream`; it must not
/// synchronise. On the emulated device (CI's), `stream` is null and the node's CPU
/// implementation runs instead.
struct GpuCall : KernelArgs {
  void* stream = nullptr;
  int device = 0;
};

/// A registered kernel: `name` keys its cost models (so nodes of one kernel share them), `cpu`
/// and `gpu` are its implementations; a kernel without `gpu` is a fence (it runs on the host,
/// and data must cross there). `check`, if set, throws InvalidArgument when the arguments'
/// sizes do not suit the kernel; add_node calls it.
using CpuCallFn = std::function<void(const CpuCall&)>;
using GpuCallFn = std::function<void(const GpuCall&)>;

struct Kernel {
  std::string name;
  CpuCallFn cpu;
  GpuCallFn gpu;
  std::function<void(std::span<const std::size_t> bytes)> check;
};

/// A dataflow graph. Build it on one thread; a Runtime runs it (one run at a time). Data handles
/// stay valid for the graph's life.
///
/// @code
///   weft::graph::Graph g;
///   auto x = g.add_data("close", close.data(), close.size() * sizeof(float));
///   auto m = g.add_data("mean10", close.size() * sizeof(float));  // owned by the graph
///   g.add_node(moving_mean_kernel(stocks, 10), {read(x), write(m)});
/// @endcode
class Graph {
 public:
  Graph();
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  /// Registers a host buffer the caller owns (it must outlive the graph). Before every run the
  /// runtime takes what the buffer holds as the data's value; after a run, data that nodes wrote
  /// are back in it. Throws InvalidArgument for a null buffer, 0 bytes, an empty name, or a
  /// buffer that overlaps data a node writes, naming both ranges: each datum orders its own
  /// readers and writers, so two over one written byte would not be ordered. Data that nodes
  /// only read may overlap (two views of one input).
  Data add_data(std::string name, void* host, std::size_t bytes);
  /// Registers data the graph owns (a zeroed host buffer; intermediates). After a run its value
  /// may live on a device only: fetch() brings it to the host.
  Data add_data(std::string name, std::size_t bytes);

  /// Adds a node running `kernel` on `args`. It depends on the last earlier writer of each datum
  /// it reads, and a writer also on the earlier readers since that writer (sequential
  /// semantics). Throws InvalidArgument for a kernel without a name or any implementation, a
  /// datum it writes that overlaps another datum (see add_data), a
  /// kernel name the cost models keep for themselves (is_reserved_model_key), a handle not of
  /// this graph, a datum named twice, or sizes the kernel's check refuses; the message names the
  /// node (label, else kernel name and index).
  NodeId add_node(Kernel kernel, std::vector<Arg> args, std::string label = {});

  /// An explicit dependency: `after` runs after `before`. Throws InvalidArgument for an id not
  /// of this graph, an edge from a node to itself, or an edge that closes a cycle (naming it).
  void add_edge(NodeId before, NodeId after);

  [[nodiscard]] std::size_t num_nodes() const noexcept;
  [[nodiscard]] std::size_t num_data() const noexcept;
  /// A number no other Graph of this process has (RunReport::graph names the graph it ran).
  [[nodiscard]] std::uint64_t id() const noexcept;
  /// The id of the node added `index`-th (as RunReport records name nodes). Throws
  /// InvalidArgument when there is no such node.
  [[nodiscard]] NodeId node_at(std::size_t index) const;
  /// The node's label (its kernel's name when none was given), kernel name, and arguments.
  [[nodiscard]] const std::string& label(NodeId n) const;
  [[nodiscard]] const Kernel& kernel(NodeId n) const;
  [[nodiscard]] const std::vector<Arg>& args(NodeId n) const;
  /// The nodes `n` depends on (from data and explicit edges), each once, ascending.
  [[nodiscard]] const std::vector<std::size_t>& producers(NodeId n) const;
  /// The handle of the data registered `index`-th (as RunReport records name data). Throws
  /// InvalidArgument when there is no such data.
  [[nodiscard]] Data data_at(std::size_t index) const;
  [[nodiscard]] const std::string& name(Data d) const;
  [[nodiscard]] std::size_t bytes(Data d) const;

  /// The host buffer of `d`, holding its current value: copies it back from a device first if
  /// the only valid copy is there (synchronously). Not while a run is in progress.
  void* fetch(Data d);

 private:
  friend struct detail::GraphAccess;
  std::unique_ptr<detail::GraphImpl> impl_;
};

}  // namespace weft::graph
