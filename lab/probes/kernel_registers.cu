// The registers a resident kernel of a few applications' task types needs on its own, without
// the applications' shared kernel's -maxrregcount=168 (decision 018, "Fourth round"). Compile
// only; ptxas prints each kernel's count (Graphs=0 and Graphs=1 in the kernel's name):
//   nvcc -O3 -std=c++20 -gencode=arch=compute_90,code=sm_90 -Iinclude -Iapps/gpu -Xptxas -v \
//     -c lab/probes/kernel_registers.cu -o /tmp/kr.o 2>&1 | grep -A2 "for _Z.*resident_kernel" |
//     grep -E "properties|Used"
#include <weft/gpu/device.cuh>

#include "gemm_tile.hpp"
#include "kmeans.hpp"
#include "spmv_bs.hpp"

using SpmvBs = weft::gpu::TaskTypes<apps::gpu::SpmvRows, apps::gpu::BlackScholes>;
using GemmTiles = weft::gpu::TaskTypes<apps::gpu::DgemmTile, apps::gpu::SgemmTile>;
using Kmeans = weft::gpu::TaskTypes<apps::gpu::SgemmTile, apps::gpu::KmeansAssign>;
weft::gpu::DeviceProgram spmv_bs_kernel() { return weft::gpu::device_program<SpmvBs, 128>(); }
weft::gpu::DeviceProgram gemm_kernel() { return weft::gpu::device_program<GemmTiles, 128>(); }
weft::gpu::DeviceProgram kmeans_kernel() { return weft::gpu::device_program<Kmeans, 128>(); }
