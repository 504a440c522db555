#include "app_pool.hpp"

namespace apps::gpu {

weft::gpu::DeviceProgram app_program() { return {}; }
weft::gpu::DeviceProgram spmv_bs_program() { return {}; }

}  // namespace apps::gpu
