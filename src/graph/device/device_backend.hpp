// The device a graph runtime drives (src/graph only): memory, streams of ordered operations,
// events between them, and host callbacks. Two implementations: CUDA (cuda_device.cu) and an
// emulated device whose memory is host memory and whose streams are threads (CI's GPU path:
// every copy, event and dependency of the real one is exercised, with the node's CPU
// implementation standing in for its GPU one).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "weft/graph/device/bfc_allocator.hpp"
#include "weft/graph/graph.hpp"

namespace weft::cpu {
class Executor;
}

namespace weft::graph::detail {

/// A device's ordered work. Operations on one stream run in order; `wait` orders a stream after
/// an event of another. Every call returns at once except `synchronize` and `copy_to_host_now`.
/// One thread (the runtime's dispatcher) calls everything but the callbacks given to `on_host`.
class DeviceBackend {
 public:
  using Event = std::size_t;  // valid until reset_events()

  virtual ~DeviceBackend() = default;
  [[nodiscard]] virtual std::string name() const = 0;
  [[nodiscard]] virtual bool emulated() const noexcept = 0;
  [[nodiscard]] virtual int ordinal() const noexcept = 0;
  /// Where the BFC allocator's regions come from.
  [[nodiscard]] virtual BackingAllocator backing() = 0;
  [[nodiscard]] virtual int streams() const noexcept = 0;

  virtual void copy_to_device(int stream, void* device, const void* host, std::size_t bytes) = 0;
  virtual void copy_to_host(int stream, void* host, const void* device, std::size_t bytes) = 0;
  /// Enqueues `kernel`'s GPU implementation (the emulated device: its CPU implementation, run
  /// with `executor`) on `stream` with `pointers` (device memory) and `bytes`.
  virtual void launch(int stream, const Kernel& kernel, std::vector<void*> pointers,
                      std::vector<std::size_t> bytes, cpu::Executor* executor) = 0;
  /// An event completed when everything enqueued on `stream` so far has.
  virtual Event record(int stream) = 0;
  /// Later work on `stream` waits for `event`.
  virtual void wait(int stream, Event event) = 0;
  /// `callback` runs on some host thread once `stream` reaches this point. On CUDA later work
  /// on `stream` does not wait for it (it goes on a notify stream beside it); the emulated
  /// device runs it in order on the stream's own thread. It must not call the backend. An exception
  /// a GPU implementation threw on the emulated device, or an error of the stream, is passed to it
  /// (nullptr when all went well).
  virtual void on_host(int stream, std::function<void(std::exception_ptr)> callback) = 0;
  /// Milliseconds between two completed events.
  [[nodiscard]] virtual double elapsed_ms(Event from, Event to) = 0;
  /// Throws (CudaError) when a stream has failed asynchronously: the dispatcher calls it while it
  /// waits, since a failed device may never run the callbacks it waits for.
  virtual void check() = 0;
  /// Waits for every stream to finish what it was given.
  virtual void synchronize() = 0;
  /// Forgets every event (after synchronize; the next run records new ones).
  virtual void reset_events() = 0;
  /// Page-locks a host buffer so that copies to and from it are DMA transfers that run
  /// asynchronously (pageable copies are staged by the driver and block the calling thread).
  /// Returns false when the buffer was not pinned by this call (already registered by its
  /// owner, or the system refused): copies still work, only slower. Not during a run.
  virtual bool pin(void* host, std::size_t bytes) = 0;
  /// What undoes a pin() that returned true: a function that does not need this backend (a
  /// graph may outlive its runtime, and unpins its buffers when it dies).
  [[nodiscard]] virtual std::function<void(void* host)> unpinner() const = 0;
  /// A synchronous copy back (Graph::fetch, after a run).
  virtual void copy_to_host_now(void* host, const void* device, std::size_t bytes) = 0;
};

/// The emulated device with `streams` streams.
std::unique_ptr<DeviceBackend> make_emulated_device(int streams);
/// CUDA device `ordinal` with `streams` streams; nullptr when weft was built without CUDA or the
/// device is not usable (`why` then says why).
std::unique_ptr<DeviceBackend> make_cuda_device(int ordinal, int streams, std::string& why);

}  // namespace weft::graph::detail
