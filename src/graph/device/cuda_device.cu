// The graph runtime's CUDA device: non-blocking streams, timing events from a pool reused across
// runs, host callbacks through cudaLaunchHostFunc on a notify stream beside each stream (so that
// the stream's next kernel or copy never waits for the host function), regions for the BFC
// allocator from cudaMalloc.
#include <cuda_runtime.h>

#include <memory>
#include <vector>

#include "device_backend.hpp"
#include "weft/error.hpp"
#include "weft/gpu/detail/cuda_check.cuh"

namespace weft::graph::detail {

namespace {

class CudaDevice final : public DeviceBackend {
 public:
  CudaDevice(int ordinal, int streams) : ordinal_(ordinal) {
    if (streams < 1) throw InvalidArgument("weft::graph: a CUDA device needs >= 1 stream");
    WEFT_CUDA_CHECK(cudaSetDevice(ordinal));
    cudaDeviceProp prop{};
    WEFT_CUDA_CHECK(cudaGetDeviceProperties(&prop, ordinal));
    name_ = "cuda:" + std::to_string(ordinal) + " " + prop.name;
    for (int i = 0; i < streams; ++i) {
      cudaStream_t s = nullptr;
      WEFT_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
      streams_.push_back(s);
      WEFT_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
      notify_.push_back(s);
    }
  }
  ~CudaDevice() override {
    cudaSetDevice(ordinal_);
    cudaDeviceSynchronize();  // no error can be reported from a destructor; callbacks must end
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
    for (cudaStream_t s : streams_) cudaStreamDestroy(s);
    for (cudaStream_t s : notify_) cudaStreamDestroy(s);
  }

  [[nodiscard]] std::string name() const override { return name_; }
  [[nodiscard]] bool emulated() const noexcept override { return false; }
  [[nodiscard]] int ordinal() const noexcept override { return ordinal_; }
  [[nodiscard]] BackingAllocator backing() override {
    const int d = ordinal_;
    return {[d](std::size_t n) -> void* {
              void* p = nullptr;
              cudaSetDevice(d);
              if (cudaMalloc(&p, n) != cudaSuccess) {
                cudaGetLastError();  // out of memory is not sticky: clear it, report nullptr
                return nullptr;
              }
              return p;
            },
            [d](void* p) {
              cudaSetDevice(d);
              cudaFree(p);
            },
            name_};
  }
  [[nodiscard]] int streams() const noexcept override { return static_cast<int>(streams_.size()); }

  void copy_to_device(int s, void* device, const void* host, std::size_t bytes) override {
    WEFT_CUDA_CHECK(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream(s)));
  }
  void copy_to_host(int s, void* host, const void* device, std::size_t bytes) override {
    WEFT_CUDA_CHECK(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, stream(s)));
  }
  void launch(int s, const Kernel& kernel, std::vector<void*> pointers,
              std::vector<std::size_t> bytes, cpu::Executor*) override {
    GpuCall call;
    call.pointers = pointers;
    call.bytes = bytes;
    call.stream = stream(s);
    call.device = ordinal_;
    kernel.gpu(call);
    WEFT_CUDA_CHECK(cudaGetLastError());  // the implementation's launch
  }
  Event record(int s) override {
    if (used_ == events_.size()) {
      cudaEvent_t e = nullptr;
      WEFT_CUDA_CHECK(cudaEventCreate(&e));
      events_.push_back(e);
    }
    WEFT_CUDA_CHECK(cudaEventRecord(events_[used_], stream(s)));
    return used_++;
  }
  void wait(int s, Event e) override {
    WEFT_CUDA_CHECK(cudaStreamWaitEvent(stream(s), events_.at(e), 0));
  }
  // The host function goes on stream s's notify stream, after an event recorded on s: it runs
  // once s's work so far is done, as it would on s, but s itself goes on without waiting for it.
  // A host function in a stream holds the stream until CUDA's callback thread has run it, and
  // that thread waits for a core when the executor's workers are all busy: a GPU chain's next
  // kernel would wait for a CPU node beside it to leave a core free
  // (docs/decisions/026-host-callbacks-wait-beside-the-stream.md).
  void on_host(int s, std::function<void(std::exception_ptr)> callback) override {
    const Event done = record(s);
    WEFT_CUDA_CHECK(cudaStreamWaitEvent(notify(s), events_.at(done), 0));
    auto* cb = new std::function<void(std::exception_ptr)>(std::move(callback));
    const cudaError_t e = cudaLaunchHostFunc(
        notify(s),
        [](void* p) {
          std::unique_ptr<std::function<void(std::exception_ptr)>> f(
              static_cast<std::function<void(std::exception_ptr)>*>(p));
          (*f)(nullptr);
        },
        cb);
    if (e != cudaSuccess) {
      delete cb;
      gpu::detail::throw_cuda("cudaLaunchHostFunc", e, __FILE__, __LINE__);
    }
  }
  [[nodiscard]] double elapsed_ms(Event from, Event to) override {
    float ms = 0;
    WEFT_CUDA_CHECK(cudaEventElapsedTime(&ms, events_.at(from), events_.at(to)));
    return ms;
  }
  void check() override {
    for (cudaStream_t s : streams_) {
      const cudaError_t e = cudaStreamQuery(s);
      if (e != cudaSuccess && e != cudaErrorNotReady) {
        gpu::detail::throw_cuda("cudaStreamQuery (a graph node's kernel or copy)", e, __FILE__,
                                __LINE__);
      }
    }
  }
  void synchronize() override {
    WEFT_CUDA_CHECK(cudaSetDevice(ordinal_));
    for (cudaStream_t s : streams_) WEFT_CUDA_CHECK(cudaStreamSynchronize(s));
    for (cudaStream_t s : notify_) WEFT_CUDA_CHECK(cudaStreamSynchronize(s));  // callbacks ran
  }
  void reset_events() override { used_ = 0; }
  bool pin(void* host, std::size_t bytes) override {
    WEFT_CUDA_CHECK(cudaSetDevice(ordinal_));
    if (cudaHostRegister(host, bytes, cudaHostRegisterPortable) != cudaSuccess) {
      cudaGetLastError();  // already registered by its owner, or refused: not sticky
      return false;
    }
    return true;
  }
  [[nodiscard]] std::function<void(void*)> unpinner() const override {
    return [](void* host) { cudaHostUnregister(host); };  // a clean-up path: nothing to report
  }
  void copy_to_host_now(void* host, const void* device, std::size_t bytes) override {
    WEFT_CUDA_CHECK(cudaSetDevice(ordinal_));
    WEFT_CUDA_CHECK(cudaMemcpy(host, device, bytes, cudaMemcpyDeviceToHost));
  }

 private:
  cudaStream_t stream(int s) const {
    if (s < 0 || s >= streams())
      throw InvalidArgument("weft::graph: no stream " + std::to_string(s));
    return streams_[static_cast<std::size_t>(s)];
  }
  cudaStream_t notify(int s) const {
    (void)stream(s);  // checks s
    return notify_[static_cast<std::size_t>(s)];
  }

  int ordinal_;
  std::string name_;
  std::vector<cudaStream_t> streams_;
  std::vector<cudaStream_t> notify_;  // notify_[s]: stream s's host callbacks (on_host)
  std::vector<cudaEvent_t> events_;   // events_[0, used_) are this run's
  std::size_t used_ = 0;
};

}  // namespace

std::unique_ptr<DeviceBackend> make_cuda_device(int ordinal, int streams, std::string& why) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    why = e != cudaSuccess ? std::string("no usable CUDA device (") + cudaGetErrorString(e) + ")"
                           : "no CUDA device is visible";
    cudaGetLastError();
    return nullptr;
  }
  if (ordinal < 0 || ordinal >= count) {
    throw InvalidArgument("weft::graph: CUDA device " + std::to_string(ordinal) +
                          " does not exist (" + std::to_string(count) + " visible)");
  }
  return std::make_unique<CudaDevice>(ordinal, streams);
}

}  // namespace weft::graph::detail
