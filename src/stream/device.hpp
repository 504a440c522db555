// The devices task streams drive (src/stream only): memory, ordered queues of copies (a CUDA
// stream each), and events between queues. Two implementations: CUDA (cuda_device.cu) and the
// host standing in for a GPU (host_device.cpp), whose "device memory" is a separate host
// allocation and whose queues do each copy at once, so that every copy a region or a message
// makes on a GPU is made, and can be checked, on a machine without one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

struct CUstream_st;
using cudaStream_t = CUstream_st*;

namespace weft::stream::detail {

/// A point in a queue: done once everything enqueued on the queue before it is. Usable from
/// any thread.
class DeviceEvent {
 public:
  virtual ~DeviceEvent() = default;
  [[nodiscard]] virtual bool done() = 0;
  /// Blocks until done; throws weft::CudaError when the queue failed.
  virtual void wait() = 0;
};
using EventPtr = std::shared_ptr<DeviceEvent>;

/// Ordered device work. Calls may come from any thread; each returns once its work is
/// enqueued (on the host device: once it is done).
class Queue {
 public:
  virtual ~Queue() = default;
  [[nodiscard]] virtual cudaStream_t native() const noexcept = 0;
  /// Copies between any two of: host memory, this device's memory (unified addressing).
  virtual void copy(void* dst, const void* src, std::size_t bytes) = 0;
  /// Copies from device `src_device`'s memory to device `dst_device`'s.
  virtual void copy_peer(void* dst, int dst_device, const void* src, int src_device,
                         std::size_t bytes) = 0;
  [[nodiscard]] virtual EventPtr record() = 0;
  /// True when everything enqueued so far has finished (a hint: work may be enqueued after).
  [[nodiscard]] virtual bool idle() = 0;
  /// Later work on this queue waits for `event` (of any queue of any device).
  virtual void wait(const EventPtr& event) = 0;
  virtual void synchronize() = 0;
};

/// What lets another process of the node map a device buffer (CUDA IPC).
struct IpcHandle {
  unsigned char handle[64] = {};
  std::uint64_t offset = 0;  // of the buffer within the allocation the handle maps
};

class Device {
 public:
  virtual ~Device() = default;
  [[nodiscard]] virtual bool is_host() const noexcept = 0;
  [[nodiscard]] virtual int ordinal() const noexcept = 0;  // -1 for the host
  [[nodiscard]] virtual std::string name() const = 0;
  /// Makes this device the calling thread's current one (CUDA), for the kernels it launches.
  virtual void make_current() = 0;
  [[nodiscard]] virtual void* allocate(std::size_t bytes) = 0;
  virtual void release(void* p) noexcept = 0;
  /// Page-locked host memory, for staging.
  [[nodiscard]] virtual void* allocate_pinned(std::size_t bytes) = 0;
  /// How this device's pinned memory is freed (never null): a function that needs no device
  /// object, so that a buffer may outlive it (a region's host buffer while an access to it is
  /// open as its World goes).
  using PinnedRelease = void (*)(void*) noexcept;
  [[nodiscard]] virtual PinnedRelease pinned_release() const noexcept = 0;
  void release_pinned(void* p) noexcept { pinned_release()(p); }
  [[nodiscard]] virtual std::unique_ptr<Queue> make_queue() = 0;
  /// Fills `out` for the device buffer at `p`; false where the device cannot share it.
  [[nodiscard]] virtual bool export_buffer(const void* p, IpcHandle& out) = 0;
  /// Maps another process's buffer (cached: a handle is opened once); nullptr where it cannot.
  [[nodiscard]] virtual const void* import_buffer(const IpcHandle& h) = 0;
};

[[nodiscard]] std::unique_ptr<Device> make_host_device();
/// What a World without GPUs makes its device with: make_host_device, unless a test put a
/// device of its own in (one that fails on demand, to check what a failure partway does). Set
/// it before a World is made, and give make_host_device back after.
using HostDeviceMaker = std::unique_ptr<Device> (*)();
void set_host_device_maker(HostDeviceMaker maker) noexcept;
[[nodiscard]] HostDeviceMaker host_device_maker() noexcept;
/// Throws weft::InvalidState when weft was built without CUDA or there is no such GPU.
[[nodiscard]] std::unique_ptr<Device> make_cuda_device(int ordinal);
/// GPUs this process can use (0 without CUDA or without a driver).
[[nodiscard]] int usable_cuda_devices() noexcept;
/// Lets device `from` reach device `to`'s memory; false where the hardware cannot.
[[nodiscard]] bool enable_peer_access(int from, int to);

}  // namespace weft::stream::detail
