// The splitter's CUDA side (weft::split::GpuSide::cuda): a device with a non-blocking stream of
// its own. The feeding thread waits for the stream with cudaStreamSynchronize: that thread's
// core is the one the seed keeps out of the CPU's part, so its spinning takes nothing from the
// cores that compute, and it sees the GPU part end without a sleeper's wake-up delay.
#include <cuda_runtime.h>

#include <string>

#include "weft/error.hpp"
#include "weft/gpu/detail/cuda_check.cuh"
#include "weft/split/splitter.hpp"

namespace weft::split {

namespace {

class CudaSide final : public GpuSide {
 public:
  explicit CudaSide(int ordinal) : ordinal_(ordinal) {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || ordinal < 0 || ordinal >= count) {
      cudaGetLastError();
      throw InvalidState("weft::split::GpuSide::cuda: no CUDA device " + std::to_string(ordinal) +
                         " (" + std::to_string(count) + " usable)");
    }
    WEFT_CUDA_CHECK(cudaSetDevice(ordinal_));
    cudaDeviceProp prop{};
    WEFT_CUDA_CHECK(cudaGetDeviceProperties(&prop, ordinal_));
    int driver = 0;
    WEFT_CUDA_CHECK(cudaDriverGetVersion(&driver));
    description_ = std::string(prop.name) + ", driver " + std::to_string(driver) + ", cc " +
                   std::to_string(prop.major) + "." + std::to_string(prop.minor);
    WEFT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  ~CudaSide() override {
    cudaSetDevice(ordinal_);
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }

  [[nodiscard]] std::string description() const override { return description_; }
  [[nodiscard]] bool is_emulated() const noexcept override { return false; }

  void run(const std::function<void(const GpuContext&)>& part) override {
    WEFT_CUDA_CHECK(cudaSetDevice(ordinal_));
    try {
      part(GpuContext{stream_, ordinal_, false});
    } catch (...) {
      cudaStreamSynchronize(stream_);  // what the part enqueued before it threw still runs
      throw;
    }
    WEFT_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

 private:
  int ordinal_;
  cudaStream_t stream_ = nullptr;
  std::string description_;
};

}  // namespace

std::unique_ptr<GpuSide> GpuSide::cuda(int ordinal) { return std::make_unique<CudaSide>(ordinal); }

}  // namespace weft::split
