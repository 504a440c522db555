// weft/cpu/topology.hpp - what the CPU looks like, and pinning threads to it (hwloc).
#pragma once

#include <cstddef>
#include <string>
#include <thread>
#include <vector>

namespace weft::cpu {

struct CpuTopology {
  std::size_t packages = 0;
  std::size_t numa_nodes = 0;
  std::size_t cores = 0;
  std::size_t processing_units = 0;  // hardware threads
  std::string model;                 // CPU model name, when known
  /// Bytes of the last-level cache over the whole machine (the sum over the caches of the
  /// deepest level hwloc reports, e.g. every L3); 0 when unknown (no hwloc, or a VM that hides
  /// its caches).
  std::size_t last_level_cache_bytes = 0;
  bool from_hwloc = false;  // false: only std::thread::hardware_concurrency() was known
};

/// Describes the machine's CPUs. Any thread; never throws (falls back to what the C++ runtime
/// knows when weft was built without hwloc).
CpuTopology describe_cpu_topology() noexcept;

/// How many hardware threads the calling thread may run on (its affinity mask: taskset,
/// cgroups' cpusets, an MPI launcher's binding), as OpenMP and TBB count their default threads;
/// std::thread::hardware_concurrency() where the mask cannot be read; at least 1.
std::size_t allowed_hardware_threads() noexcept;

/// Binds `thread` to processing unit `index` (hwloc's logical index) modulo their number. Returns
/// false (and changes nothing) without hwloc or when the OS refuses. Any thread.
bool pin_thread_to_pu(std::thread& thread, std::size_t index) noexcept;
/// As pin_thread_to_pu, for the calling thread.
bool pin_this_thread_to_pu(std::size_t index) noexcept;

/// For each of `pus`, whether it shares a cache with processing unit `with` (hwloc logical
/// indices): whether the outermost cache above `with` (its last level, e.g. an L3 or a shared
/// L2) holds it too. The seed of the splitter's core classes: a core that shares a cache with
/// the core feeding the GPU is slowed by that core's traffic. All false without hwloc, when
/// `with` is not a unit of the machine or has no cache above it; false for a unit that is not.
std::vector<bool> shares_cache_with(std::size_t with, const std::vector<std::size_t>& pus) noexcept;
/// Logical indices of the processing units the calling thread may run on (its affinity mask:
/// taskset, cgroups, an MPI launcher's binding), in order; empty without hwloc or when the
/// mask cannot be read. Threads the caller starts inherit this mask.
std::vector<std::size_t> allowed_processing_units() noexcept;

}  // namespace weft::cpu
