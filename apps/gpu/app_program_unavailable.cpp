#include "app_pool.hpp"
#include "cholesky_pool.hpp"

namespace apps::gpu {

weft::gpu::DeviceProgram app_program() { return {}; }
weft::gpu::DeviceProgram spmv_bs_program() { return {}; }
weft::gpu::DeviceProgram cholesky_program() { return {}; }

}  // namespace apps::gpu
