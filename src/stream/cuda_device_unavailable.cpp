// Built instead of cuda_device.cu when weft is configured without CUDA.
#include <string>

#include "stream/device.hpp"
#include "weft/error.hpp"

namespace weft::stream::detail {

std::unique_ptr<Device> make_cuda_device(int ordinal) {
  throw InvalidState("task streams: CUDA device " + std::to_string(ordinal) +
                     " asked for, but weft was built without CUDA");
}

int usable_cuda_devices() noexcept { return 0; }

bool enable_peer_access(int, int) { return false; }

}  // namespace weft::stream::detail
