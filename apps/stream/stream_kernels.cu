// The stream applications' CUDA kernels (see stream_kernels.hpp): cuBLAS for the GEMM (one
// handle per host thread, set to the caller's stream), and a tiled all-pairs N-body step.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "stream_kernels.hpp"

namespace apps::stream::kernels {

namespace {

cublasHandle_t handle_of_this_thread() {
  thread_local struct Handle {
    cublasHandle_t h = nullptr;
    int device = -1;
    ~Handle() {
      if (h != nullptr) cublasDestroy(h);
    }
  } handle;
  int device = 0;
  cudaGetDevice(&device);
  if (handle.h == nullptr || handle.device != device) {
    if (handle.h != nullptr) cublasDestroy(handle.h);
    if (cublasCreate(&handle.h) != CUBLAS_STATUS_SUCCESS)
      throw std::runtime_error("cublasCreate failed");
    handle.device = device;
  }
  return handle.h;
}

// 64 threads a block: a GPU's share of 65536 bodies split two ways still makes several
// blocks per SM to hide latency with (256 left one block, eight warps, on each SM).
constexpr int kTile = 64;

__global__ void nbody_step(const float4* all, int bodies, int first, int count, float4* vel,
                           float4* next, float dt, float eps2) {
  __shared__ float4 tile[kTile];
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const float4 pi = i < count ? all[first + i] : make_float4(0, 0, 0, 0);
  float ax = 0, ay = 0, az = 0;
  for (int base = 0; base < bodies; base += kTile) {
    const int j = base + threadIdx.x;
    tile[threadIdx.x] = j < bodies ? all[j] : make_float4(0, 0, 0, 0);
    __syncthreads();
#pragma unroll 8
    for (int t = 0; t < kTile; ++t) {
      const float4 pj = tile[t];
      const float dx = pj.x - pi.x, dy = pj.y - pi.y, dz = pj.z - pi.z;
      const float r2 = dx * dx + dy * dy + dz * dz + eps2;
      const float inv = rsqrtf(r2);
      const float s = pj.w * inv * inv * inv;
      ax += dx * s;
      ay += dy * s;
      az += dz * s;
    }
    __syncthreads();
  }
  if (i < count) {
    float4 v = vel[i];
    v.x += ax * dt;
    v.y += ay * dt;
    v.z += az * dt;
    vel[i] = v;
    next[i] = make_float4(pi.x + v.x * dt, pi.y + v.y * dt, pi.z + v.z * dt, pi.w);
  }
}

}  // namespace

void sgemm_cuda(cudaStream_t s, const float* a, const float* b, float* c, int rows, int k,
                int cols) {
  // Row-major C = A B is column-major C^T = B^T A^T.
  cublasHandle_t h = handle_of_this_thread();
  cublasSetStream(h, s);
  const float one = 1.0F;
  const float zero = 0.0F;
  const cublasStatus_t st =
      cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, cols, rows, k, &one, b, cols, a, k, &zero, c, cols);
  if (st != CUBLAS_STATUS_SUCCESS) {
    throw std::runtime_error("cublasSgemm failed: status " + std::to_string(static_cast<int>(st)));
  }
}

void nbody_step_cuda(cudaStream_t s, const float* all, std::size_t bodies, std::size_t first,
                     std::size_t count, float* vel, float* next, float dt, float softening) {
  const int blocks = static_cast<int>((count + kTile - 1) / kTile);
  nbody_step<<<blocks, kTile, 0, s>>>(reinterpret_cast<const float4*>(all),
                                      static_cast<int>(bodies), static_cast<int>(first),
                                      static_cast<int>(count), reinterpret_cast<float4*>(vel),
                                      reinterpret_cast<float4*>(next), dt, softening * softening);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("nbody_step launch: ") + cudaGetErrorString(e));
}

void copy_cuda(cudaStream_t s, void* dst, const void* src, std::size_t bytes) {
  const cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s);
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("cudaMemcpyAsync: ") + cudaGetErrorString(e));
}

}  // namespace apps::stream::kernels
