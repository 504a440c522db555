// weft/stream/buffer.hpp - what a message carries: a span of bytes in host or device memory,
// and the path a transfer took.
//
//   ts.send(weft::stream::host(values.data(), values.size()), /*dest=*/1, /*tag=*/7);
//   ts.recv(weft::stream::device(d_values, n), /*source=*/0, /*tag=*/7);
//
// A device buffer lives on the device of the task stream that names it: its logical GPU's
// physical GPU, or, on a machine without one, host memory standing in for it.
// A message of a device buffer is ordered after the work enqueued on its task stream before
// it (kernels that write what is sent, or read what a receive overwrites); work of other
// streams on the buffer must be finished (or waited for) before the send or receive is posted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace weft::stream {

/// Where a buffer's bytes are.
enum class Memory : std::uint8_t { Host, Device };

/// A contiguous span of `bytes` bytes at `data`. Sends read it; receives write it.
struct Buffer {
  void* data = nullptr;
  std::size_t bytes = 0;
  Memory memory = Memory::Host;
};

/// `count` elements of host memory.
template <class T>
[[nodiscard]] Buffer host(T* data, std::size_t count) noexcept {
  return Buffer{const_cast<void*>(static_cast<const void*>(data)), count * sizeof(T), Memory::Host};
}

/// `count` elements of the calling task stream's device memory.
template <class T>
[[nodiscard]] Buffer device(T* data, std::size_t count) noexcept {
  return Buffer{const_cast<void*>(static_cast<const void*>(data)), count * sizeof(T),
                Memory::Device};
}

/// The way a transfer's bytes went. Every completed request reports one, so that traffic that
/// took a slower path than expected shows.
enum class Path : std::uint8_t {
  None,          // not completed yet, or failed
  HostCopy,      // host to host inside a process: one memcpy
  DeviceCopy,    // device to device on one physical device (or the host standing in for it)
  PeerCopy,      // between two GPUs of a process, over peer access (NVLink or PCIe)
  StagedCopy,    // between two GPUs of a process without peer access: through pinned chunks
  HostToDevice,  // a host buffer into a device buffer inside a process
  DeviceToHost,  // a device buffer into a host buffer inside a process
  Mpi,           // host buffers between processes, over MPI
  MpiStaged,     // a device buffer between processes: pinned chunks over MPI, pipelined
  MpiCudaAware,  // a device buffer handed to a CUDA-aware MPI as it is
  MpiIpc,        // a device buffer between processes of one node: GPU to GPU over CUDA IPC
};
inline constexpr int kPaths = 11;

[[nodiscard]] std::string_view to_string(Path path) noexcept;

}  // namespace weft::stream
