// weft/gpu/device_program.hpp - the handle a CUDA translation unit gives the pool so that it
// can launch the resident kernel of a task-type list (plain C++: no CUDA types here).
#pragma once

#include <cstddef>
#include <cstdint>

namespace weft::gpu {

/// Everything the resident kernel of one GPU gets (addresses are device addresses).
struct ResidentArgs {
  void* slots = nullptr;                // the pool's slot array (pinned host memory, mapped)
  std::size_t stride = 0;               // bytes between slots
  int first_slot = 0;                   // this GPU serves slots [first_slot, first_slot + blocks)
  std::uint32_t* doorbell = nullptr;    // host word the scheduler bumps after loading slots
  void* idle = nullptr;                 // this GPU's DeviceIdle (device memory, zeroed, watcher -1)
  unsigned long long* polls = nullptr;  // per block: reads of host memory (device memory)
  unsigned long long warm_idle_ns = 0;  // a block idle this long stops polling its slot
  bool watchdog = false;  // FINISHED by CAS (an EXIT stored over a lost task must stay)
};

/// Made by weft::gpu::device_program<Types, Capacity>() in a .cu file (weft/gpu/device.cuh).
struct DeviceProgram {
  /// Launches the resident kernel: `blocks` blocks of `threads` threads serving slots
  /// [args.first_slot, args.first_slot + blocks). `stream` is a cudaStream_t. Returns a
  /// cudaError_t (0 = success).
  int (*launch)(const ResidentArgs& args, int blocks, int threads, std::size_t shared_bytes,
                void* stream) = nullptr;
  /// Resident blocks per SM for this block shape (cudaOccupancyMaxActiveBlocksPerMultiprocessor)
  /// on the current device; returns a cudaError_t, the count in *blocks.
  int (*max_blocks_per_sm)(int threads, std::size_t shared_bytes, int* blocks) = nullptr;
  std::size_t payload_capacity = 0;  // must equal the pool's Capacity
  std::size_t shared_bytes = 0;      // dynamic shared memory the kernel needs per block
  std::size_t idle_bytes = 0;        // device memory per GPU for ResidentArgs::idle
  [[nodiscard]] bool valid() const noexcept { return launch != nullptr; }
};

}  // namespace weft::gpu
