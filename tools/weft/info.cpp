#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "commands.hpp"
#include "weft/cpu/topology.hpp"

#if WEFT_TOOL_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "gpu/pool_demo.hpp"
#endif

namespace weft::tools {

namespace {
struct GpuInfo {
  std::string name;
  int sms = 0;
  double memory_gib = 0;
  int cc_major = 0, cc_minor = 0;
};

std::vector<GpuInfo> list_gpus(std::string& status) {
  std::vector<GpuInfo> gpus;
#if WEFT_TOOL_HAVE_CUDA
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    status = std::string("no usable GPU (") + cudaGetErrorString(err) + ")";
    return gpus;
  }
  for (int d = 0; d < n; ++d) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, d) != cudaSuccess) continue;
    gpus.push_back(GpuInfo{p.name, p.multiProcessorCount,
                           static_cast<double>(p.totalGlobalMem) / (1024.0 * 1024 * 1024), p.major,
                           p.minor});
  }
  status = n == 0 ? "no GPU found" : "ok";
#else
  status = "weft was built without CUDA";
#endif
  return gpus;
}
}  // namespace

int run_info(bool json) {
  const cpu::CpuTopology t = cpu::describe_cpu_topology();
  // What Pinning::automatic does for an executor with the default worker count (one per
  // hardware thread of the affinity mask): it binds them when hwloc sees that many allowed
  // units.
  const std::size_t allowed = cpu::allowed_processing_units().size();
  const std::size_t default_workers = cpu::allowed_hardware_threads();
  const bool default_pinned = allowed != 0 && allowed == default_workers;
  std::string gpu_status;
  const auto gpus = list_gpus(gpu_status);
  // The pool `weft demo` starts with default options (started and stopped here to describe
  // it: blocks per SM from occupancy, ring depth, scheduler lanes).
  std::string pool, pool_why = "no GPU";
#if WEFT_TOOL_HAVE_CUDA
  if (!gpus.empty()) pool = bench::gpu::describe_default_pool(pool_why);
#endif
#if WEFT_TOOL_HAVE_MPI
  const char* mpi = "available (built with MPI)";
#else
  const char* mpi = "not built in";
#endif
  if (json) {
    nlohmann::json j;
    j["cpu"] = {{"model", t.model},
                {"packages", t.packages},
                {"numa_nodes", t.numa_nodes},
                {"cores", t.cores},
                {"processing_units", t.processing_units},
                {"last_level_cache_bytes", t.last_level_cache_bytes},
                {"allowed_processing_units", allowed},
                {"default_executor_pinned", default_pinned},
                {"source", t.from_hwloc ? "hwloc" : "c++ runtime"}};
    j["gpus"] = nlohmann::json::array();
    for (const auto& g : gpus) {
      j["gpus"].push_back(
          {{"name", g.name},
           {"sms", g.sms},
           {"memory_gib", g.memory_gib},
           {"compute_capability", std::to_string(g.cc_major) + "." + std::to_string(g.cc_minor)}});
    }
    j["gpu_status"] = gpu_status;
    j["gpu_pool"] = pool.empty() ? "unavailable: " + pool_why : pool;
    j["mpi"] = mpi;
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("CPU     %s\n", t.model.empty() ? "(unknown model)" : t.model.c_str());
  std::printf("        %zu package(s), %zu NUMA node(s), %zu core(s), %zu hardware thread(s)%s\n",
              t.packages, t.numa_nodes, t.cores, t.processing_units,
              t.from_hwloc ? " [hwloc]" : " [no hwloc: counts from the C++ runtime]");
  if (t.last_level_cache_bytes > 0) {
    std::printf("        last-level cache %.1f MiB in all\n",
                static_cast<double>(t.last_level_cache_bytes) / (1 << 20));
  } else {
    std::printf("        last-level cache unknown\n");
  }
  if (allowed == 0) {
    std::printf(
        "        workers unbound: no hwloc, or this process's affinity mask is unreadable\n");
  } else {
    std::printf("        %zu allowed to this process; a default executor (%zu worker(s)) %s\n",
                allowed, default_workers,
                default_pinned ? "binds one worker to each"
                               : "leaves its workers unbound (not one worker per allowed unit)");
  }
  if (gpus.empty()) {
    std::printf("GPUs    none: %s\n", gpu_status.c_str());
  } else {
    for (std::size_t d = 0; d < gpus.size(); ++d) {
      const auto& g = gpus[d];
      std::printf("GPU %zu   %s, %d SMs, %.1f GiB, compute capability %d.%d\n", d, g.name.c_str(),
                  g.sms, g.memory_gib, g.cc_major, g.cc_minor);
    }
    std::printf("Pool    %s\n", pool.empty() ? ("unavailable: " + pool_why).c_str() : pool.c_str());
  }
  std::printf("MPI     %s\n", mpi);
  return 0;
}

}  // namespace weft::tools
