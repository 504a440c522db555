// weft/gpu/device_program.hpp - the handle a CUDA translation unit gives the pool so that it
// can launch the resident kernel of a task-type list (plain C++: no CUDA types here).
#pragma once

#include <cstddef>
#include <cstdint>

namespace weft::gpu {

/// Made by weft::gpu::device_program<Types, Capacity>() in a .cu file (weft/gpu/device.cuh).
struct DeviceProgram {
  /// Launches the resident kernel: `blocks` blocks of `threads` threads serving slots
  /// [first_slot, first_slot + blocks) of the slot array at device address `slots`. `stream` is
  /// a cudaStream_t. Returns a cudaError_t (0 = success).
  int (*launch)(void* slots, std::size_t stride, int first_slot, int blocks, int threads,
                std::size_t shared_bytes, void* stream) = nullptr;
  /// Resident blocks per SM for this block shape (cudaOccupancyMaxActiveBlocksPerMultiprocessor)
  /// on the current device; returns a cudaError_t, the count in *blocks.
  int (*max_blocks_per_sm)(int threads, std::size_t shared_bytes, int* blocks) = nullptr;
  std::size_t payload_capacity = 0;  // must equal the pool's Capacity
  std::size_t shared_bytes = 0;      // dynamic shared memory the kernel needs per block
  [[nodiscard]] bool valid() const noexcept { return launch != nullptr; }
};

}  // namespace weft::gpu
