// Built instead of device_blocks.cu when weft is configured without CUDA.
#include "weft/error.hpp"
#include "weft/gpu/detail/block_runtime.hpp"

namespace weft::gpu::detail {

std::unique_ptr<BlockRuntime> make_device_blocks(const DeviceProgram&, const std::vector<int>&, int,
                                                 int, std::size_t, std::size_t,
                                                 std::chrono::nanoseconds, bool, bool,
                                                 std::size_t) {
  throw InvalidArgument(
      "weft::gpu::Pool: Backend::device is unavailable: weft was built without CUDA "
      "(configure with WEFT_CUDA=ON where nvcc is installed)");
}

}  // namespace weft::gpu::detail
