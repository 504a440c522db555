#include <weft/gpu/device.cuh>

#include "spmv_bs.hpp"

namespace apps::gpu {

weft::gpu::DeviceProgram spmv_bs_program() {
  return weft::gpu::device_program<SpmvBsTasks, kSpmvBsCapacity>();
}

}  // namespace apps::gpu
