// weft/graph/mapping/problem.hpp - what every mapper and scheduler of the graph layer works on:
// the two devices a node can run on, and a graph reduced to numbers (each node's time on each
// device, each data flow's transfer cost each way). Runtime::problem builds one from a graph
// and the cost models; the policies (policies.hpp), the exact mapper (mincut.hpp) and the
// schedulers (schedule.hpp) only read it, so they can be tested on made-up problems.
#pragma once

#include <cstddef>
#include <limits>
#include <vector>

namespace weft::graph {

enum class Device { cpu, gpu };

/// "cpu" or "gpu" (also the device part of a cost model's key).
[[nodiscard]] constexpr const char* to_string(Device d) noexcept {
  return d == Device::gpu ? "gpu" : "cpu";
}

/// A two-device mapping problem. Costs are seconds (any non-negative unit works). Every mapper
/// (policies.hpp, mincut.hpp, schedule.hpp) throws InvalidArgument, naming the cost, for a NaN or
/// negative one, or an infinite transfer: only a node's time may be infinite.
struct MappingProblem {
  /// Per node: its time on the CPU and on the GPU. A node without a GPU implementation (a
  /// fence) has gpu = kNoImplementation; likewise cpu for a node that cannot run on the CPU.
  /// Costs of moving a node's external inputs to the GPU and its final outputs back belong in
  /// its gpu cost.
  struct Node {
    double cpu = 0;
    double gpu = 0;
  };
  /// Data flowing from node `from` to node `to`: `to_gpu` is paid when `from` is on the CPU and
  /// `to` on the GPU (host to device), `to_cpu` in the other case (device to host).
  /// Edges with the same `from` and the same `datum` (not kNoDatum) carry one piece of data to
  /// several consumers: each direction is paid once for the group (the largest of its edges'
  /// costs), as the runtime copies a datum once however many nodes on the other device read it.
  struct Edge {
    std::size_t from = 0;
    std::size_t to = 0;
    double to_gpu = 0;
    double to_cpu = 0;
    std::size_t datum = static_cast<std::size_t>(-1);
  };
  /// A graph input (data on the host that no node produces) read by several nodes: its
  /// host-to-device copy, `to_gpu`, is paid once when any of `readers` is on the GPU, as the
  /// runtime copies it once for all of them. An input with one reader may instead be part of
  /// that reader's gpu cost.
  struct SharedInput {
    std::vector<std::size_t> readers;
    double to_gpu = 0;
  };
  static constexpr double kNoImplementation = std::numeric_limits<double>::infinity();
  static constexpr std::size_t kNoDatum = static_cast<std::size_t>(-1);

  std::vector<Node> nodes;
  std::vector<Edge> edges;
  std::vector<SharedInput> inputs;
};

}  // namespace weft::graph
