#include "cholesky_pool.hpp"

#include "app_pool.hpp"

namespace apps::gpu {

static_assert(sizeof(PotrfTile::Payload) <= kCholeskyCapacity &&
              sizeof(TrsmTile::Payload) <= kCholeskyCapacity &&
              sizeof(UpdateTile::Payload) <= kCholeskyCapacity &&
              sizeof(PotrfBlock::Payload) <= kCholeskyCapacity &&
              sizeof(TrsmBlock::Payload) <= kCholeskyCapacity &&
              sizeof(UpdateBlock::Payload) <= kCholeskyCapacity);

weft::gpu::PoolOptions cholesky_pool_options(std::vector<int> devices, std::size_t graph_capacity) {
  weft::gpu::PoolOptions o = device_pool_options(std::move(devices));
  o.program = cholesky_program();
  o.threads_per_block = UpdateBlockWide::kThreads;
  o.graph_capacity = graph_capacity;
  return o;
}

}  // namespace apps::gpu
