// weft/graph/mapping/mincut.hpp - the exact two-device mapper: under the additive
// cost model (each node costs its time on the device it is mapped to, each edge whose ends are on
// different devices costs its transfer), the cheapest CPU/GPU assignment of a graph's nodes is a
// minimum s-t cut (H. S. Stone, "Multiprocessor scheduling with the aid of network flow
// algorithms", IEEE TSE 3(1), 1977). It ignores concurrency: it is what PPTM and the list
// scheduler are held against, not a schedule.
#pragma once

#include <vector>

#include "weft/graph/mapping/problem.hpp"

namespace weft::graph {

struct Mapping {
  std::vector<Device> device;  // per node
  double cost = 0;             // the additive cost of this mapping
};

/// The additive cost of `device` for `problem` (infinity when a node is mapped to a device it
/// has no implementation for). Throws InvalidArgument when the sizes do not match, and for a bad
/// cost (problem.hpp).
double mapping_cost(const MappingProblem& problem, const std::vector<Device>& device);

/// The cheapest mapping under the additive model (a minimum cut; among equally cheap mappings,
/// the one with the fewest nodes on the CPU: the residual graph's smallest source side). Throws
/// InvalidArgument for an edge naming a node that does not exist, a NaN or negative cost or an
/// infinite transfer (problem.hpp), or a node with no implementation on either device.
Mapping min_cut_mapping(const MappingProblem& problem);

}  // namespace weft::graph
