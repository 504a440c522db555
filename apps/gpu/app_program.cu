#include <weft/gpu/device.cuh>

#include "app_pool.hpp"

namespace apps::gpu {

weft::gpu::DeviceProgram app_program() {
  return weft::gpu::device_program<AppTasks, kAppCapacity>();
}

}  // namespace apps::gpu
