// apps/stream/stream_kernels.hpp - the kernels of the stream applications: CUDA versions
// (stream_kernels.cu, enqueued on a task stream's CUDA stream; without CUDA they throw) and
// host versions (stream_kernels_host.cpp, run at once on the calling thread: what a task
// stream on the host device runs).
#pragma once

#include <cstddef>

struct CUstream_st;
using cudaStream_t = CUstream_st*;

namespace apps::stream::kernels {

/// c (rows x cols) = a (rows x k) b (k x cols), all row-major, dense.
void sgemm_cuda(cudaStream_t s, const float* a, const float* b, float* c, int rows, int k,
                int cols);
void sgemm_host(const float* a, const float* b, float* c, int rows, int k, int cols);

/// One N-body step of bodies [first, first + count) of `all` (x, y, z, mass each): their
/// velocities `vel` gain the acceleration from every body of `all` times dt, and `next`
/// receives their moved positions (mass kept).
void nbody_step_cuda(cudaStream_t s, const float* all, std::size_t bodies, std::size_t first,
                     std::size_t count, float* vel, float* next, float dt, float softening);
void nbody_step_host(const float* all, std::size_t bodies, std::size_t first, std::size_t count,
                     float* vel, float* next, float dt, float softening);

/// Copies `bytes` within the device, on `s`.
void copy_cuda(cudaStream_t s, void* dst, const void* src, std::size_t bytes);

}  // namespace apps::stream::kernels
