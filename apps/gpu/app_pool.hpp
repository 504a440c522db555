// apps/gpu/app_pool.hpp - the pool the GPU applications share (docs/apps.md): their task types,
// its payload capacity, and the resident kernel of those types (app_program(), compiled in
// app_program.cu where the build has CUDA).
#pragma once

#include <weft/gpu/pool.hpp>

#include "cholesky_tiles.hpp"
#include "gemm_tile.hpp"
#include "kmeans.hpp"
#include "multi_gpu_gemm.hpp"
#include "spmv_bs.hpp"

namespace apps::gpu {

// SpmvRows and BlackScholes have a pool of their own (SpmvBsPool, spmv_bs.hpp).
using AppTasks =
    weft::gpu::TaskTypes<DgemmTile, SgemmTile, PotrfTile, TrsmTile, UpdateTile, PotrfBlock,
                         TrsmBlock, UpdateBlock, KmeansAssign, ReplicatedGemmTile>;
inline constexpr std::size_t kAppCapacity = 128;
using AppPool = weft::gpu::Pool<AppTasks, kAppCapacity>;

/// The resident kernel of AppTasks, for PoolOptions::program (an invalid program in a build
/// without CUDA: a device pool then says so).
weft::gpu::DeviceProgram app_program();

/// Options of a pool on the GPUs (`devices`: empty, every one), 128 task threads per block.
weft::gpu::PoolOptions device_pool_options(std::vector<int> devices = {});

}  // namespace apps::gpu
