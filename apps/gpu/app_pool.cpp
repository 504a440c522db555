#include "app_pool.hpp"

namespace apps::gpu {

weft::gpu::PoolOptions device_pool_options(std::vector<int> devices) {
  weft::gpu::PoolOptions o;
  o.backend = weft::gpu::Backend::device;
  o.program = app_program();
  o.devices = std::move(devices);
  o.threads_per_block = 128;
  return o;
}

}  // namespace apps::gpu
