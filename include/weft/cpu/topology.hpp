// weft/cpu/topology.hpp - what the CPU looks like, and pinning threads to it (hwloc).
#pragma once

#include <cstddef>
#include <string>

namespace weft::cpu {

struct CpuTopology {
  std::size_t packages = 0;
  std::size_t numa_nodes = 0;
  std::size_t cores = 0;
  std::size_t processing_units = 0;  // hardware threads
  std::string model;                 // CPU model name, when known
  bool from_hwloc = false;           // false: only std::thread::hardware_concurrency() was known
};

/// Describes the machine's CPUs. Any thread; never throws (falls back to what the C++ runtime
/// knows when weft was built without hwloc).
CpuTopology describe_cpu_topology() noexcept;

/// Binds the calling thread to processing unit `index` modulo their number. Returns false (and
/// changes nothing) without hwloc or when the OS refuses.
bool pin_this_thread_to_pu(std::size_t index) noexcept;

}  // namespace weft::cpu
