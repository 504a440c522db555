// Random mapping problems for the graph tests: node times in [0, 10) on each device, about one
// node in `fence_one_in` without a GPU implementation, transfers in [0, 10 / transfer_divisor).
#pragma once

#include <algorithm>
#include <random>
#include <vector>

#include "weft/graph/mapping/problem.hpp"

namespace weft::graph::testing {

struct RandomProblemShape {
  int fence_one_in = 6;
  double transfer_divisor = 2;
  /// random_dag: about one producer in `share_one_in` sends one datum to all its consumers
  /// (edges grouped by MappingProblem::Edge::datum, one cost each way); 0: none.
  int share_one_in = 0;
  /// random_dag: this many shared graph inputs (MappingProblem::inputs), each read by 2-4
  /// random nodes, copied in once whatever number of its readers is on the GPU.
  int shared_inputs = 0;
};

inline MappingProblem random_nodes(std::mt19937_64& rng, std::size_t n, RandomProblemShape s) {
  std::uniform_real_distribution<double> time(0.0, 10.0);
  std::uniform_int_distribution<int> fence(0, s.fence_one_in - 1);
  MappingProblem p;
  for (std::size_t i = 0; i < n; ++i) {
    MappingProblem::Node v{time(rng), time(rng)};
    if (fence(rng) == 0) v.gpu = MappingProblem::kNoImplementation;
    p.nodes.push_back(v);
  }
  return p;
}

/// A DAG: each pair i < j has an edge i -> j with probability 1/3.
inline MappingProblem random_dag(std::mt19937_64& rng, std::size_t n, RandomProblemShape s = {}) {
  MappingProblem p = random_nodes(rng, n, s);
  std::uniform_real_distribution<double> transfer(0.0, 10.0 / s.transfer_divisor);
  std::uniform_int_distribution<int> third(0, 2);
  std::vector<MappingProblem::Edge> shared(n);  // per producer: its datum's edge, if shared
  for (std::size_t i = 0; i < n; ++i) {
    if (s.share_one_in > 0 && static_cast<int>(rng() % s.share_one_in) == 0) {
      shared[i] = {i, 0, transfer(rng), transfer(rng), i};
    }
  }
  for (std::size_t j = 1; j < n; ++j) {
    for (std::size_t i = 0; i < j; ++i) {
      if (third(rng) != 0) continue;
      if (shared[i].datum != MappingProblem::kNoDatum) {
        MappingProblem::Edge e = shared[i];
        e.to = j;
        p.edges.push_back(e);
      } else {
        p.edges.push_back({i, j, transfer(rng), transfer(rng)});
      }
    }
  }
  for (int k = 0; k < s.shared_inputs && n > 0; ++k) {
    MappingProblem::SharedInput in;
    in.to_gpu = 2 * transfer(rng);  // inputs are larger than most intermediates
    const std::size_t readers = 2 + rng() % 3;
    for (std::size_t r = 0; r < readers; ++r) {
      const std::size_t v = rng() % n;
      if (std::find(in.readers.begin(), in.readers.end(), v) == in.readers.end()) {
        in.readers.push_back(v);
      }
    }
    p.inputs.push_back(in);
  }
  return p;
}

/// A tree toward the last node: node j - 1 feeds one node in [j, n).
inline MappingProblem random_tree(std::mt19937_64& rng, std::size_t n, RandomProblemShape s = {}) {
  MappingProblem p = random_nodes(rng, n, s);
  std::uniform_real_distribution<double> transfer(0.0, 10.0 / s.transfer_divisor);
  for (std::size_t j = 1; j < n; ++j) {
    std::uniform_int_distribution<std::size_t> consumer(j, n - 1);
    p.edges.push_back({j - 1, consumer(rng), transfer(rng), transfer(rng)});
  }
  return p;
}

}  // namespace weft::graph::testing
