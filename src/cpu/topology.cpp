#include "weft/cpu/topology.hpp"

#include <pthread.h>
#include <sched.h>

#include <fstream>
#include <thread>
#include <vector>

#if WEFT_HAVE_HWLOC
#include <hwloc.h>
#endif

namespace weft::cpu {

namespace {

std::string read_cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  return {};
}

#if WEFT_HAVE_HWLOC
// One topology per process, loaded on first use (hwloc_topology_load reads sysfs: slow).
struct HwlocTopology {
  hwloc_topology_t topo = nullptr;
  bool ok = false;
  HwlocTopology() {
    if (hwloc_topology_init(&topo) == 0 && hwloc_topology_load(topo) == 0) ok = true;
  }
  ~HwlocTopology() {
    if (topo != nullptr) hwloc_topology_destroy(topo);
  }
};
HwlocTopology& hwloc_topology() {
  static HwlocTopology t;
  return t;
}

// The deepest data or unified cache level present, its caches' sizes summed.
std::size_t last_level_cache_bytes(hwloc_topology_t topo) {
  for (const hwloc_obj_type_t type : {HWLOC_OBJ_L5CACHE, HWLOC_OBJ_L4CACHE, HWLOC_OBJ_L3CACHE,
                                      HWLOC_OBJ_L2CACHE, HWLOC_OBJ_L1CACHE}) {
    std::size_t total = 0;
    for (hwloc_obj_t c = hwloc_get_next_obj_by_type(topo, type, nullptr); c != nullptr;
         c = hwloc_get_next_obj_by_type(topo, type, c)) {
      if (c->attr != nullptr && c->attr->cache.type != HWLOC_OBJ_CACHE_INSTRUCTION) {
        total += static_cast<std::size_t>(c->attr->cache.size);
      }
    }
    if (total > 0) return total;
  }
  return 0;
}
#endif

}  // namespace

CpuTopology describe_cpu_topology() noexcept {
  CpuTopology t;
  try {
    t.model = read_cpu_model();
  } catch (...) {
    t.model.clear();  // /proc unreadable: the model stays unknown
  }
#if WEFT_HAVE_HWLOC
  HwlocTopology& h = hwloc_topology();
  if (h.ok) {
    auto count = [&](hwloc_obj_type_t type) {
      const int n = hwloc_get_nbobjs_by_type(h.topo, type);
      return n < 0 ? std::size_t{0} : static_cast<std::size_t>(n);
    };
    t.packages = count(HWLOC_OBJ_PACKAGE);
    t.numa_nodes = count(HWLOC_OBJ_NUMANODE);
    t.cores = count(HWLOC_OBJ_CORE);
    t.processing_units = count(HWLOC_OBJ_PU);
    t.last_level_cache_bytes = last_level_cache_bytes(h.topo);
    t.from_hwloc = true;
    return t;
  }
#endif
  const unsigned hw = std::thread::hardware_concurrency();
  t.processing_units = hw;
  t.cores = hw;
  t.packages = 1;
  t.numa_nodes = 1;
  return t;
}

std::size_t allowed_hardware_threads() noexcept {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return static_cast<std::size_t>(n);
  }
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : hw;
}

namespace {

bool pin_native_to_pu(pthread_t thread, std::size_t index) noexcept {
#if WEFT_HAVE_HWLOC
  HwlocTopology& h = hwloc_topology();
  if (!h.ok) return false;
  const int n = hwloc_get_nbobjs_by_type(h.topo, HWLOC_OBJ_PU);
  if (n <= 0) return false;
  hwloc_obj_t pu = hwloc_get_obj_by_type(
      h.topo, HWLOC_OBJ_PU, static_cast<unsigned>(index % static_cast<std::size_t>(n)));
  return pu != nullptr && hwloc_set_thread_cpubind(h.topo, thread, pu->cpuset, 0) == 0;
#else
  (void)thread;
  (void)index;
  return false;
#endif
}

}  // namespace

bool pin_thread_to_pu(std::thread& thread, std::size_t index) noexcept {
  return pin_native_to_pu(thread.native_handle(), index);
}

bool pin_this_thread_to_pu(std::size_t index) noexcept {
  return pin_native_to_pu(pthread_self(), index);
}

std::vector<bool> shares_cache_with(std::size_t with,
                                    const std::vector<std::size_t>& pus) noexcept {
  std::vector<bool> shared;
  try {
    shared.assign(pus.size(), false);
  } catch (...) {
    return {};  // out of memory: nothing known
  }
#if WEFT_HAVE_HWLOC
  HwlocTopology& h = hwloc_topology();
  if (!h.ok) return shared;
  hwloc_obj_t pu = hwloc_get_obj_by_type(h.topo, HWLOC_OBJ_PU, static_cast<unsigned>(with));
  if (pu == nullptr) return shared;
  hwloc_obj_t outermost = nullptr;  // the last cache on the way up from `with`
  for (hwloc_obj_t o = pu->parent; o != nullptr; o = o->parent) {
    if (hwloc_obj_type_is_dcache(o->type)) outermost = o;  // data or unified
  }
  if (outermost == nullptr) return shared;
  for (std::size_t i = 0; i < pus.size(); ++i) {
    const hwloc_obj_t other =
        hwloc_get_obj_by_type(h.topo, HWLOC_OBJ_PU, static_cast<unsigned>(pus[i]));
    shared[i] = other != nullptr && hwloc_bitmap_isincluded(other->cpuset, outermost->cpuset);
  }
#else
  (void)with;
#endif
  return shared;
}

std::vector<std::size_t> allowed_processing_units() noexcept {
  std::vector<std::size_t> units;
#if WEFT_HAVE_HWLOC
  HwlocTopology& h = hwloc_topology();
  if (!h.ok) return units;
  hwloc_bitmap_t mask = hwloc_bitmap_alloc();
  if (mask == nullptr) return units;
  if (hwloc_get_cpubind(h.topo, mask, HWLOC_CPUBIND_THREAD) == 0) {
    try {
      for (hwloc_obj_t pu = hwloc_get_next_obj_by_type(h.topo, HWLOC_OBJ_PU, nullptr);
           pu != nullptr; pu = hwloc_get_next_obj_by_type(h.topo, HWLOC_OBJ_PU, pu)) {
        if (hwloc_bitmap_isincluded(pu->cpuset, mask)) units.push_back(pu->logical_index);
      }
    } catch (...) {
      units.clear();  // out of memory: report the mask as unreadable
    }
  }
  hwloc_bitmap_free(mask);
#endif
  return units;
}

}  // namespace weft::cpu
