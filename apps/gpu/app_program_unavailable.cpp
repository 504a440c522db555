#include "app_pool.hpp"

namespace apps::gpu {

weft::gpu::DeviceProgram app_program() { return {}; }

}  // namespace apps::gpu
