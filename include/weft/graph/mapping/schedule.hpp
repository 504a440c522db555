// weft/graph/mapping/schedule.hpp - schedules on one CPU and one GPU, which the additive model of
// mincut.hpp ignores: two independent nodes on different devices run at the same time. A
// list-scheduling simulator that gives any mapping its makespan, and a HEFT-style scheduler
// (H. Topcuoglu, S. Hariri, M.-Y. Wu, "Performance-effective and low-complexity task
// scheduling for heterogeneous computing", IEEE TPDS 13(3), 2002) that maps nodes as it
// schedules them.
#pragma once

#include <vector>

#include "weft/graph/mapping/mincut.hpp"

namespace weft::graph {

/// When each node runs. The model: the CPU and the GPU each run one node at a time (a node uses
/// its whole device: the executor's workers, or the GPU); a transfer delays its consumer by its
/// cost and occupies neither device; nodes are taken in decreasing upward rank (the length of
/// the longest path from the node to an output, with each node's mean time over its devices and
/// each edge's mean transfer), among those whose producers are scheduled.
struct Schedule {
  std::vector<Device> device;
  std::vector<double> start;
  std::vector<double> finish;
  double makespan = 0;
};

/// The schedule of a given mapping under the model above. Throws InvalidArgument for a cycle,
/// a bad edge, a bad cost (problem.hpp), a size mismatch or a node mapped to a device it cannot
/// run on.
Schedule simulate_schedule(const MappingProblem& problem, const std::vector<Device>& device);

/// HEFT: in the same order, each node goes to the device where it would finish first (earliest
/// finish time, without insertion into gaps). Throws like simulate_schedule.
Schedule heft_schedule(const MappingProblem& problem);

}  // namespace weft::graph
