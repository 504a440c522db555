// Built instead of cuda_device.cu when weft is configured without CUDA.
#include "device_backend.hpp"

namespace weft::graph::detail {

std::unique_ptr<DeviceBackend> make_cuda_device(int, int, std::string& why) {
  why = "weft was built without CUDA";
  return nullptr;
}

}  // namespace weft::graph::detail
