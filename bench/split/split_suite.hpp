// bench/split/split_suite.hpp - `weft bench split`: the adaptive CPU/GPU splitter (seed 002) on
// host-resident GEMM by rows, STREAM triad and SpMV, against the same region run GPU-only,
// CPU-only, at the static split from peak rates and at the best static split of a sweep, every
// result checked.
#pragma once

#include <string>
#include <vector>

#include "../harness/harness.hpp"

namespace weft::bench::split {

struct SplitSuiteOptions {
  bool quick = false;
  int samples = 5;
  /// Applications to run (split_app_names()); empty: all of them.
  std::vector<std::string> only;
  /// Where to save the learned tables for `weft split show` (empty: not saved).
  std::string db;
  std::string machine;
  /// The rates' median window (1: the seed's overwrite).
  int window = 5;
  /// DB2 kept equal (one class) instead of learned per core.
  bool equal_core_shares = false;
  /// DB2 learned per class of the seed (ws::seed_core_classes: the workers that share a cache
  /// with the feeding thread's unit, and the others) instead of per core.
  bool seed_core_classes = false;
  /// Idle cores take pieces of the ranges still running (SplitOptions::take_tail).
  bool take_tail = true;
  /// The LU factors the next panel beside each trailing update (HplLu::set_look_ahead).
  bool lu_look_ahead = true;
  /// Also the per-core case (a slowed core) after the triad.
  bool percore = true;
  /// The LU's orders (empty: 16384, 1024 with quick). Above 16384 `cpu_only` is left out: it
  /// takes minutes a run there, and at 16384 it already takes 7x the GPU alone.
  std::vector<int> lu_sizes;
};

/// The applications `weft bench split --only` selects from.
std::vector<std::string> split_app_names();

Suite run_split_suite(const SplitSuiteOptions& options);

}  // namespace weft::bench::split
