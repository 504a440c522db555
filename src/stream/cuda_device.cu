// CUDA devices for task streams: cudaMalloc'd memory, non-blocking streams, and events taken
// from a pool per device (creating an event costs more than the small message it would mark).
#include <cuda.h>
#include <cuda_runtime.h>

#include <array>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "stream/device.hpp"
#include "weft/error.hpp"
#include "weft/gpu/detail/cuda_check.cuh"

namespace weft::stream::detail {

namespace {

/// Makes `ordinal` current for a scope, and the thread's previous device current again after:
/// a thread completing another stream's transfer must not move its own stream's device.
class DeviceScope {
 public:
  explicit DeviceScope(int ordinal) {
    WEFT_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != ordinal) WEFT_CUDA_CHECK(cudaSetDevice(ordinal));
  }
  ~DeviceScope() { cudaSetDevice(previous_); }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = 0;
};

class EventPool {
 public:
  explicit EventPool(int ordinal) : ordinal_(ordinal) {}
  ~EventPool() {
    for (cudaEvent_t e : free_) cudaEventDestroy(e);
  }
  cudaEvent_t take() {
    {
      std::lock_guard lock(mutex_);
      if (!free_.empty()) {
        cudaEvent_t e = free_.back();
        free_.pop_back();
        return e;
      }
    }
    DeviceScope scope(ordinal_);
    cudaEvent_t e = nullptr;
    WEFT_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    return e;
  }
  void give_back(cudaEvent_t e) noexcept {
    std::lock_guard lock(mutex_);
    free_.push_back(e);
  }

 private:
  int ordinal_;
  std::mutex mutex_;
  std::vector<cudaEvent_t> free_;
};

class CudaEvent final : public DeviceEvent {
 public:
  CudaEvent(std::shared_ptr<EventPool> pool, cudaEvent_t event)
      : pool_(std::move(pool)), event_(event) {}
  ~CudaEvent() override { pool_->give_back(event_); }
  bool done() override {
    const cudaError_t e = cudaEventQuery(event_);
    if (e == cudaErrorNotReady) return false;
    WEFT_CUDA_CHECK(e);
    return true;
  }
  void wait() override { WEFT_CUDA_CHECK(cudaEventSynchronize(event_)); }
  [[nodiscard]] cudaEvent_t native() const noexcept { return event_; }

 private:
  std::shared_ptr<EventPool> pool_;
  cudaEvent_t event_;
};

class CudaQueue final : public Queue {
 public:
  CudaQueue(int ordinal, std::shared_ptr<EventPool> pool)
      : ordinal_(ordinal), pool_(std::move(pool)) {
    DeviceScope scope(ordinal_);
    WEFT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  ~CudaQueue() override {
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }
  [[nodiscard]] cudaStream_t native() const noexcept override { return stream_; }
  void copy(void* dst, const void* src, std::size_t bytes) override {
    if (bytes == 0) return;
    DeviceScope scope(ordinal_);
    WEFT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_));
  }
  void copy_peer(void* dst, int dst_device, const void* src, int src_device,
                 std::size_t bytes) override {
    if (bytes == 0) return;
    DeviceScope scope(ordinal_);
    WEFT_CUDA_CHECK(cudaMemcpyPeerAsync(dst, dst_device, src, src_device, bytes, stream_));
  }
  EventPtr record() override {
    auto event = std::make_shared<CudaEvent>(pool_, pool_->take());
    DeviceScope scope(ordinal_);
    WEFT_CUDA_CHECK(cudaEventRecord(event->native(), stream_));
    return event;
  }
  void wait(const EventPtr& event) override {
    const auto* cuda = dynamic_cast<const CudaEvent*>(event.get());
    if (cuda == nullptr) return;  // a host event is done when it exists
    DeviceScope scope(ordinal_);
    WEFT_CUDA_CHECK(cudaStreamWaitEvent(stream_, cuda->native(), 0));
  }
  void synchronize() override { WEFT_CUDA_CHECK(cudaStreamSynchronize(stream_)); }
  bool idle() override {
    const cudaError_t e = cudaStreamQuery(stream_);
    if (e == cudaErrorNotReady) return false;
    WEFT_CUDA_CHECK(e);
    return true;
  }

 private:
  int ordinal_;
  std::shared_ptr<EventPool> pool_;
  cudaStream_t stream_ = nullptr;
};

// cuPointerGetAttribute, the one driver call the layer makes (where an allocation starts, for
// CUDA IPC), taken through the runtime: linking the driver library itself would keep weft's
// programs from starting on machines without a GPU driver.
using PointerAttributeFn = CUresult (*)(void*, CUpointer_attribute, CUdeviceptr);
PointerAttributeFn pointer_attribute() {
  static const PointerAttributeFn fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult status{};
    if (cudaGetDriverEntryPointByVersion("cuPointerGetAttribute", &p, 12000, cudaEnableDefault,
                                         &status) != cudaSuccess ||
        status != cudaDriverEntryPointSuccess) {
      cudaGetLastError();
      return PointerAttributeFn{nullptr};
    }
    return reinterpret_cast<PointerAttributeFn>(p);
  }();
  return fn;
}

class CudaDevice final : public Device {
 public:
  explicit CudaDevice(int ordinal)
      : ordinal_(ordinal), pool_(std::make_shared<EventPool>(ordinal)) {
    cudaDeviceProp prop{};
    WEFT_CUDA_CHECK(cudaGetDeviceProperties(&prop, ordinal_));
    name_ = prop.name;
  }
  [[nodiscard]] bool is_host() const noexcept override { return false; }
  [[nodiscard]] int ordinal() const noexcept override { return ordinal_; }
  [[nodiscard]] std::string name() const override { return name_; }
  void make_current() override { WEFT_CUDA_CHECK(cudaSetDevice(ordinal_)); }
  void* allocate(std::size_t bytes) override {
    DeviceScope scope(ordinal_);
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, bytes == 0 ? 1 : bytes);
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      throw OutOfMemory("task stream device " + std::to_string(ordinal_) + ": cudaMalloc of " +
                        std::to_string(bytes) + " bytes failed");
    }
    WEFT_CUDA_CHECK(e);
    return p;
  }
  void release(void* p) noexcept override {
    int previous = 0;  // no DeviceScope: it throws, and this must not
    cudaGetDevice(&previous);
    cudaSetDevice(ordinal_);
    cudaFree(p);
    cudaSetDevice(previous);
  }
  void* allocate_pinned(std::size_t bytes) override {
    void* p = nullptr;
    WEFT_CUDA_CHECK(cudaMallocHost(&p, bytes == 0 ? 1 : bytes));
    return p;
  }
  // cudaFreeHost needs no current device, and the World does not reset the device as it goes.
  PinnedRelease pinned_release() const noexcept override {
    return [](void* p) noexcept { cudaFreeHost(p); };
  }
  std::unique_ptr<Queue> make_queue() override {
    return std::make_unique<CudaQueue>(ordinal_, pool_);
  }

  bool export_buffer(const void* p, IpcHandle& out) override {
    DeviceScope scope(ordinal_);
    CUdeviceptr base = 0;
    const auto range_start = pointer_attribute();
    if (range_start == nullptr || range_start(&base, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                              reinterpret_cast<CUdeviceptr>(p)) != CUDA_SUCCESS) {
      return false;
    }
    cudaIpcMemHandle_t h{};
    if (cudaIpcGetMemHandle(&h, reinterpret_cast<void*>(base)) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    static_assert(sizeof h == sizeof out.handle);
    std::memcpy(out.handle, &h, sizeof h);
    out.offset = reinterpret_cast<CUdeviceptr>(p) - base;
    return true;
  }

  const void* import_buffer(const IpcHandle& in) override {
    std::array<unsigned char, 64> key{};
    std::memcpy(key.data(), in.handle, key.size());
    std::lock_guard lock(imports_mutex_);
    auto it = imports_.find(key);
    if (it == imports_.end()) {
      DeviceScope scope(ordinal_);
      cudaIpcMemHandle_t h{};
      std::memcpy(&h, in.handle, sizeof h);
      void* base = nullptr;
      if (cudaIpcOpenMemHandle(&base, h, cudaIpcMemLazyEnablePeerAccess) != cudaSuccess) {
        cudaGetLastError();
        return nullptr;
      }
      it = imports_.emplace(key, base).first;
    }
    return static_cast<const unsigned char*>(it->second) + in.offset;
  }

  ~CudaDevice() override {
    // No DeviceScope here: it throws on a failed device, and a destructor must not.
    int previous = 0;
    cudaGetDevice(&previous);
    cudaSetDevice(ordinal_);
    for (auto& [key, base] : imports_) cudaIpcCloseMemHandle(base);
    cudaSetDevice(previous);
  }

 private:
  int ordinal_;
  std::shared_ptr<EventPool> pool_;
  std::string name_;
  // Buffers of other processes mapped here, by handle: opening one takes long, so each is
  // opened once and kept until the device goes.
  std::mutex imports_mutex_;
  std::map<std::array<unsigned char, 64>, void*> imports_;
};

}  // namespace

std::unique_ptr<Device> make_cuda_device(int ordinal) {
  const int count = usable_cuda_devices();
  if (ordinal < 0 || ordinal >= count) {
    throw InvalidState("task streams: no CUDA device " + std::to_string(ordinal) + " (" +
                       std::to_string(count) + " usable)");
  }
  return std::make_unique<CudaDevice>(ordinal);
}

int usable_cuda_devices() noexcept {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

bool enable_peer_access(int from, int to) {
  if (from == to) return true;
  // Enabled once per process and pair: enabling it again is an error CUDA reports (and the
  // sanitizer with it), and a World made after another finds it on.
  static std::mutex mutex;
  static std::map<std::pair<int, int>, bool> known;
  std::lock_guard lock(mutex);
  if (const auto it = known.find({from, to}); it != known.end()) return it->second;
  int can = 0;
  WEFT_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, from, to));
  if (can != 0) {
    DeviceScope scope(from);
    const cudaError_t e = cudaDeviceEnablePeerAccess(to, 0);
    if (e == cudaErrorPeerAccessAlreadyEnabled) {
      cudaGetLastError();  // enabled by the program itself before the World
    } else {
      WEFT_CUDA_CHECK(e);
    }
  }
  known[{from, to}] = can != 0;
  return can != 0;
}

}  // namespace weft::stream::detail
