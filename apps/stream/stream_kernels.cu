// The stream applications' CUDA kernels (see stream_kernels.hpp): cuBLAS for the GEMM (one
// handle per host thread, set to the caller's stream), and a tiled all-pairs N-body step.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
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

// Each body's sum over all bodies is cut into slices, one block row each, so that a GPU's
// share of the bodies gives its SMs enough warps to hide latency whether it holds all the
// bodies or a fraction of them; a second kernel adds the slices and moves the bodies.
constexpr int kTile = 128;

__global__ void nbody_partial(const float4* all, int bodies, int first, int count, int span,
                              float4* partial, float eps2) {
  __shared__ float4 tile[kTile];
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const float4 pi = i < count ? all[first + i] : make_float4(0, 0, 0, 0);
  const int from = blockIdx.y * span;
  const int to = min(bodies, from + span);
  float ax = 0, ay = 0, az = 0;
  for (int base = from; base < to; base += kTile) {
    const int j = base + threadIdx.x;
    tile[threadIdx.x] = j < to ? all[j] : make_float4(0, 0, 0, 0);  // mass 0 beyond: no pull
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
  if (i < count)
    partial[static_cast<std::size_t>(blockIdx.y) * count + i] = make_float4(ax, ay, az, 0);
}

__global__ void nbody_move(const float4* all, int first, int count, int slices,
                           const float4* partial, float4* vel, float4* next, float dt) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= count) return;
  float ax = 0, ay = 0, az = 0;
  for (int s = 0; s < slices; ++s) {
    const float4 a = partial[static_cast<std::size_t>(s) * count + i];
    ax += a.x;
    ay += a.y;
    az += a.z;
  }
  const float4 pi = all[first + i];
  float4 v = vel[i];
  v.x += ax * dt;
  v.y += ay * dt;
  v.z += az * dt;
  vel[i] = v;
  next[i] = make_float4(pi.x + v.x * dt, pi.y + v.y * dt, pi.z + v.z * dt, pi.w);
}

// The partial sums' buffer of this thread's current device, kept from step to step: an
// allocation per step (even stream-ordered) costs time the step does not have. One thread
// drives one task stream, whose steps are ordered on its CUDA stream, so the buffer is never
// in use by two steps at once.
void* partial_sums(std::size_t bytes) {
  thread_local struct Scratch {
    void* p = nullptr;
    std::size_t bytes = 0;
    int device = -1;
    ~Scratch() {
      if (p != nullptr) cudaFree(p);
    }
  } scratch;
  int device = 0;
  cudaGetDevice(&device);
  if (scratch.p == nullptr || scratch.bytes < bytes || scratch.device != device) {
    if (scratch.p != nullptr) {
      cudaDeviceSynchronize();  // the old buffer may still be read by a step in flight
      cudaFree(scratch.p);
    }
    scratch.p = nullptr;
    if (cudaMalloc(&scratch.p, bytes) != cudaSuccess) {
      throw std::runtime_error("cudaMalloc of the N-body partial sums failed");
    }
    scratch.bytes = bytes;
    scratch.device = device;
  }
  return scratch.p;
}

int multiprocessors() {
  int device = 0;
  int sms = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  return sms > 0 ? sms : 1;
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
  auto check = [](cudaError_t e, const char* what) {
    if (e != cudaSuccess)
      throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
  };
  const int blocks = static_cast<int>((count + kTile - 1) / kTile);
  // About eight blocks per SM, in slices of whole tiles.
  const int slices = std::max(1, std::min(32, (8 * multiprocessors() + blocks - 1) / blocks));
  const int tiles = static_cast<int>((bodies + kTile - 1) / kTile);
  const int span = (tiles + slices - 1) / slices * kTile;
  void* partial = partial_sums(sizeof(float4) * count * static_cast<std::size_t>(slices));
  nbody_partial<<<dim3(blocks, slices), kTile, 0, s>>>(
      reinterpret_cast<const float4*>(all), static_cast<int>(bodies), static_cast<int>(first),
      static_cast<int>(count), span, static_cast<float4*>(partial), softening * softening);
  nbody_move<<<blocks, kTile, 0, s>>>(
      reinterpret_cast<const float4*>(all), static_cast<int>(first), static_cast<int>(count),
      slices, static_cast<const float4*>(partial), reinterpret_cast<float4*>(vel),
      reinterpret_cast<float4*>(next), dt);
  check(cudaGetLastError(), "nbody kernels' launch");
}

void copy_cuda(cudaStream_t s, void* dst, const void* src, std::size_t bytes) {
  const cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s);
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("cudaMemcpyAsync: ") + cudaGetErrorString(e));
}

}  // namespace apps::stream::kernels
