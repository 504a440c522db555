// The device backend: resident kernels on one or more GPUs serving slots in pinned,
// host-mapped memory (seed 000 §3.2.3: one slot per resident block).
#include <cuda_runtime.h>

#include <cstring>
#include <string>
#include <vector>

#include "weft/error.hpp"
#include "weft/gpu/detail/block_runtime.hpp"
#include "weft/gpu/detail/slot.hpp"

namespace weft::gpu::detail {

namespace {

[[noreturn]] void throw_cuda(const char* call, cudaError_t e, const char* file, int line) {
  throw CudaError(call, static_cast<int>(e),
                  std::string(call) + " failed: " + cudaGetErrorName(e) + " (" +
                      cudaGetErrorString(e) + ") at " + file + ":" + std::to_string(line));
}
#define WEFT_CUDA_CHECK(call)                                                       \
  do {                                                                              \
    const cudaError_t weft_err_ = (call);                                           \
    if (weft_err_ != cudaSuccess) throw_cuda(#call, weft_err_, __FILE__, __LINE__); \
  } while (0)

struct DeviceLaunch {
  int device = 0;
  int first_slot = 0;
  int blocks = 0;
  cudaStream_t stream = nullptr;
  std::string name;
  int sms = 0;
};

class DeviceBlocks final : public BlockRuntime {
 public:
  DeviceBlocks(const DeviceProgram& program, std::vector<int> devices, int blocks_per_sm,
               int threads, std::size_t capacity)
      : program_(program), threads_(threads), stride_(slot_stride(capacity)) {
    if (!program.valid() || program.max_blocks_per_sm == nullptr) {
      throw InvalidArgument(
          "weft::gpu::Pool: Backend::device needs PoolOptions::program (from "
          "weft::gpu::device_program<Types, Capacity>() in a CUDA translation unit)");
    }
    if (program.payload_capacity != capacity) {
      throw InvalidArgument(
          "weft::gpu::Pool: the DeviceProgram was made for a payload capacity of " +
          std::to_string(program.payload_capacity) + " bytes, the pool has " +
          std::to_string(capacity));
    }
    if (threads < 32 || threads > 1024 || threads % 32 != 0) {
      throw InvalidArgument(
          "weft::gpu::PoolOptions::threads_per_block must be a multiple of 32 "
          "in [32, 1024] (got " +
          std::to_string(threads) + ")");
    }
    if (blocks_per_sm < 0) {
      throw InvalidArgument("weft::gpu::PoolOptions::blocks_per_sm must be >= 0 (got " +
                            std::to_string(blocks_per_sm) + ")");
    }
    int count = 0;
    WEFT_CUDA_CHECK(cudaGetDeviceCount(&count));
    if (devices.empty()) {
      for (int d = 0; d < count; ++d) devices.push_back(d);
    }
    if (devices.empty()) throw InvalidArgument("weft::gpu::Pool: no GPU is visible");
    int total = 0;
    for (int d : devices) {
      if (d < 0 || d >= count) {
        throw InvalidArgument("weft::gpu::Pool: device " + std::to_string(d) + " does not exist (" +
                              std::to_string(count) + " visible)");
      }
      WEFT_CUDA_CHECK(cudaSetDevice(d));
      cudaDeviceProp prop{};
      WEFT_CUDA_CHECK(cudaGetDeviceProperties(&prop, d));
      int fit = 0;
      WEFT_CUDA_CHECK(
          static_cast<cudaError_t>(program.max_blocks_per_sm(threads, program.shared_bytes, &fit)));
      if (fit < 1) {
        throw InvalidArgument("weft::gpu::Pool: the resident kernel does not fit on " +
                              std::string(prop.name) + " with " + std::to_string(threads) +
                              " threads and " + std::to_string(program.shared_bytes) +
                              " bytes of shared memory per block");
      }
      // Every resident block must be co-resident: more than fit per SM would never start.
      const int per_sm = blocks_per_sm == 0 ? fit : blocks_per_sm;
      if (per_sm > fit) {
        throw InvalidArgument("weft::gpu::PoolOptions::blocks_per_sm " +
                              std::to_string(blocks_per_sm) + " exceeds what fits on " + prop.name +
                              " (" + std::to_string(fit) + ")");
      }
      DeviceLaunch l;
      l.device = d;
      l.first_slot = total;
      l.blocks = per_sm * prop.multiProcessorCount;
      l.name = prop.name;
      l.sms = prop.multiProcessorCount;
      total += l.blocks;
      launches_.push_back(l);
    }
    slots_ = total;
    WEFT_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&host_), stride_ * slots_,
                                  cudaHostAllocMapped | cudaHostAllocPortable));
    std::memset(host_, 0, stride_ * slots_);  // every slot IDLE
    for (auto& l : launches_) {
      WEFT_CUDA_CHECK(cudaSetDevice(l.device));
      WEFT_CUDA_CHECK(cudaStreamCreateWithFlags(&l.stream, cudaStreamNonBlocking));
    }
  }

  ~DeviceBlocks() override {
    for (auto& l : launches_) {
      if (l.stream != nullptr) {
        cudaSetDevice(l.device);
        cudaStreamDestroy(l.stream);  // errors here cannot be reported from a destructor
      }
    }
    if (host_ != nullptr) cudaFreeHost(host_);
  }

  unsigned char* slot(std::size_t i) noexcept override { return host_ + i * stride_; }
  [[nodiscard]] std::size_t num_slots() const noexcept override {
    return static_cast<std::size_t>(slots_);
  }

  void start() override {
    void* device_slots = nullptr;
    WEFT_CUDA_CHECK(cudaHostGetDevicePointer(&device_slots, host_, 0));
    for (auto& l : launches_) {
      WEFT_CUDA_CHECK(cudaSetDevice(l.device));
      const auto e =
          static_cast<cudaError_t>(program_.launch(device_slots, stride_, l.first_slot, l.blocks,
                                                   threads_, program_.shared_bytes, l.stream));
      if (e != cudaSuccess) throw_cuda("resident kernel launch", e, __FILE__, __LINE__);
    }
  }

  void join() override {
    for (auto& l : launches_) {
      cudaSetDevice(l.device);
      const cudaError_t e = cudaStreamSynchronize(l.stream);
      if (e != cudaSuccess && first_error_.empty()) {
        first_error_ = describe_error(l, e);
      }
    }
  }

  std::string failure() override {
    if (!first_error_.empty()) return first_error_;
    for (auto& l : launches_) {
      cudaSetDevice(l.device);
      const cudaError_t e = cudaStreamQuery(l.stream);
      if (e != cudaSuccess && e != cudaErrorNotReady) {
        first_error_ = describe_error(l, e);
        return first_error_;
      }
    }
    return {};
  }

  [[nodiscard]] std::string describe() const override {
    std::string s;
    for (const auto& l : launches_) {
      if (!s.empty()) s += "; ";
      s += "GPU " + std::to_string(l.device) + " " + l.name + ": " + std::to_string(l.sms) +
           " SMs x " + std::to_string(l.blocks / l.sms) + " blocks of " + std::to_string(threads_) +
           " threads";
    }
    return s;
  }

 private:
  static std::string describe_error(const DeviceLaunch& l, cudaError_t e) {
    return "the resident kernel on GPU " + std::to_string(l.device) + " (" + l.name +
           ") failed: " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
  }

  DeviceProgram program_;
  int threads_;
  std::size_t stride_;
  int slots_ = 0;
  unsigned char* host_ = nullptr;
  std::vector<DeviceLaunch> launches_;
  std::string first_error_;
};

}  // namespace

std::unique_ptr<BlockRuntime> make_device_blocks(const DeviceProgram& program,
                                                 const std::vector<int>& devices, int blocks_per_sm,
                                                 int threads, std::size_t payload_capacity) {
  return std::make_unique<DeviceBlocks>(program, devices, blocks_per_sm, threads, payload_capacity);
}

}  // namespace weft::gpu::detail
