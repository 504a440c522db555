// The host standing in for a GPU: device memory is host memory of its own, copies happen at
// once on the calling thread, and every event is done when it is recorded.
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <string>

#include "stream/device.hpp"
#include "weft/error.hpp"

namespace weft::stream::detail {

namespace {

class DoneEvent final : public DeviceEvent {
 public:
  bool done() override { return true; }
  void wait() override {}
};

class HostQueue final : public Queue {
 public:
  [[nodiscard]] cudaStream_t native() const noexcept override { return nullptr; }
  void copy(void* dst, const void* src, std::size_t bytes) override {
    if (bytes != 0) std::memcpy(dst, src, bytes);
  }
  void copy_peer(void* dst, int, const void* src, int, std::size_t bytes) override {
    copy(dst, src, bytes);
  }
  EventPtr record() override { return std::make_shared<DoneEvent>(); }
  bool idle() override { return true; }
  void wait(const EventPtr&) override {}
  void synchronize() override {}
};

// Page-aligned, as cudaMalloc's memory is, so that code tested here sees the same alignment.
constexpr std::size_t kAlignment = 4096;

void* aligned_bytes(std::size_t bytes) {
  if (bytes > std::numeric_limits<std::size_t>::max() - kAlignment) {
    throw InvalidArgument("weft::stream host device: cannot allocate " + std::to_string(bytes) +
                          " bytes");
  }
  const std::size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* p = std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

class HostDevice final : public Device {
 public:
  [[nodiscard]] bool is_host() const noexcept override { return true; }
  [[nodiscard]] int ordinal() const noexcept override { return -1; }
  [[nodiscard]] std::string name() const override { return "host"; }
  void make_current() override {}
  void* allocate(std::size_t bytes) override { return aligned_bytes(bytes); }
  void release(void* p) noexcept override { std::free(p); }
  void* allocate_pinned(std::size_t bytes) override { return aligned_bytes(bytes); }
  PinnedRelease pinned_release() const noexcept override {
    return [](void* p) noexcept { std::free(p); };
  }
  std::unique_ptr<Queue> make_queue() override { return std::make_unique<HostQueue>(); }
  bool export_buffer(const void*, IpcHandle&) override { return false; }
  const void* import_buffer(const IpcHandle&) override { return nullptr; }
};

}  // namespace

std::unique_ptr<Device> make_host_device() { return std::make_unique<HostDevice>(); }

namespace {
std::atomic<HostDeviceMaker> maker{&make_host_device};
}  // namespace

// Relaxed: a test sets it before it makes a World, on the thread that makes it.
void set_host_device_maker(HostDeviceMaker m) noexcept {
  maker.store(m, std::memory_order_relaxed);
}
HostDeviceMaker host_device_maker() noexcept { return maker.load(std::memory_order_relaxed); }

}  // namespace weft::stream::detail
