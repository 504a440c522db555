// Why a task body runs slower on the pool's payload than on a copy (decision 038), in the PTX:
// the apps' DGEMM tile body on a payload in shared memory (as the pool hands it over) and on a
// register copy of it. Count each kernel's shared-memory loads of non-FP64 values (the
// payload's pointers, sizes and flags; the tile's operands are FP64):
//   nvcc -std=c++20 -O3 -arch=sm_90 -maxrregcount=168 -Iinclude -Iapps/gpu -ptx \
//     lab/probes/payload_alias_ptx.cu -o /tmp/alias.ptx
//   for k in on_shared on_copy; do awk -v k=$k '/^\.visible \.entry/{f=($0 ~ k)} f' \
//     /tmp/alias.ptx | grep -cE 'ld.shared.(u32|u64|s32|u8|b32|b64)'; done
// CUDA 13.0 gives 366 and 1: on the shared payload each use of a field after one of the body's
// stores is a load again.
#include <weft/gpu/task.hpp>
#include "gemm_tile.hpp"
using apps::gpu::DgemmTile;
// The body on the payload in shared memory (as the pool hands it over) and on a copy.
__global__ void on_shared(const DgemmTile::Payload* in) {
  extern __shared__ __align__(16) unsigned char smem[];
  auto* p = reinterpret_cast<DgemmTile::Payload*>(smem);
  if (threadIdx.x == 0) *p = in[blockIdx.x];
  __syncthreads();
  DgemmTile::run(*p, weft::gpu::BlockContext(threadIdx.x, blockDim.x, blockIdx.x, smem + 256));
}
__global__ void on_copy(const DgemmTile::Payload* in) {
  extern __shared__ __align__(16) unsigned char smem[];
  auto* p = reinterpret_cast<DgemmTile::Payload*>(smem);
  if (threadIdx.x == 0) *p = in[blockIdx.x];
  __syncthreads();
  DgemmTile::Payload local = *p;
  DgemmTile::run(local, weft::gpu::BlockContext(threadIdx.x, blockDim.x, blockIdx.x, smem + 256));
}
