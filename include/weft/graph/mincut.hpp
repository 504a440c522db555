// weft/graph/mincut.hpp - the exact two-device mapper (DESIGN.md §3): under the additive cost
// model (each node costs its time on the device it is mapped to, each edge whose ends are on
// different devices costs its transfer), the cheapest CPU/GPU assignment of a graph's nodes is a
// minimum s-t cut (H. S. Stone, "Multiprocessor scheduling with the aid of network flow
// algorithms", IEEE TSE 3(1), 1977). It ignores concurrency: it is what PPTM and the list
// scheduler are held against, not a schedule.
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

/// A two-device mapping problem. Costs are seconds (any non-negative unit works).
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

struct Mapping {
  std::vector<Device> device;  // per node
  double cost = 0;             // the additive cost of this mapping
};

/// The additive cost of `device` for `problem` (infinity when a node is mapped to a device it
/// has no implementation for). Throws InvalidArgument when the sizes do not match.
double mapping_cost(const MappingProblem& problem, const std::vector<Device>& device);

/// The cheapest mapping under the additive model (a minimum cut; among equally cheap mappings,
/// the one with the fewest nodes on the CPU: the residual graph's smallest source side). Throws
/// InvalidArgument for an edge naming a node that does not exist, a negative or NaN cost, or a node
/// with no implementation on either device.
Mapping min_cut_mapping(const MappingProblem& problem);

}  // namespace weft::graph
