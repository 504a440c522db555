#include <weft/gpu/device.cuh>

#include "cholesky_pool.hpp"

namespace apps::gpu {

weft::gpu::DeviceProgram cholesky_program() {
  return weft::gpu::device_program<CholeskyTasks, kCholeskyCapacity>();
}

}  // namespace apps::gpu
