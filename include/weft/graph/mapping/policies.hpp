// weft/graph/mapping/policies.hpp - mapping policies for a graph's nodes: CPU only (A-Free),
// accelerator first (D-Map), and PPTM, a proactive mapping from predicted gains. The names are
// those of the literature these policies come from, and of the CLI and benchmark outputs
// (Policy::a_free, d_map, pptm); each function says what it does. They work on the same
// MappingProblem as the exact mapper (mincut.hpp): node times
// per device and directional transfer costs per edge, from the cost models.
#pragma once

#include <vector>

#include "weft/graph/mapping/mincut.hpp"

namespace weft::graph {

/// Every node on the CPU (A-Free). Throws InvalidArgument for a node without a CPU
/// implementation. Each of these throws InvalidArgument for a bad cost (problem.hpp).
std::vector<Device> map_a_free(const MappingProblem& problem);

/// Every node that has a GPU implementation on the GPU, the rest (fences) on the CPU (D-Map).
std::vector<Device> map_d_map(const MappingProblem& problem);

/// PPTM: a node's gain is its CPU time minus its GPU time; gains accumulate
/// from the graph's inputs toward its outputs along chains of GPU-capable nodes (the
/// accumulated gain of a producer that feeds only this node is added to its own; a shared
/// producer's is passed to none of its consumers; data coming from a fence subtracts its
/// host-to-device transfer). Then, consumers first: a fence goes to the CPU; a node whose
/// consumers all went to the GPU stays with them (the chain); an output goes to the GPU when its
/// accumulated gain is positive (its read-back belongs in its GPU time); a node feeding a
/// CPU-mapped consumer goes to the GPU only if its accumulated gain covers the device-to-host
/// transfers to those consumers, else to the CPU, and its producers are then decided against
/// a CPU consumer in turn (a node moved to the CPU re-maps its chain). Throws InvalidArgument for a
/// cycle or an edge naming a node that does not exist.
std::vector<Device> map_pptm(const MappingProblem& problem);

}  // namespace weft::graph
