// Built instead of stream_kernels.cu without CUDA: a task stream is then on the host device,
// whose launches take the host kernels; reaching these is a bug, said as such.
#include <stdexcept>

#include "stream_kernels.hpp"

namespace apps::stream::kernels {

void sgemm_cuda(cudaStream_t, const float*, const float*, float*, int, int, int) {
  throw std::logic_error("apps::stream: a CUDA kernel asked for in a build without CUDA");
}

void nbody_step_cuda(cudaStream_t, const float*, std::size_t, std::size_t, std::size_t, float*,
                     float*, float, float) {
  throw std::logic_error("apps::stream: a CUDA kernel asked for in a build without CUDA");
}

void copy_cuda(cudaStream_t, void*, const void*, std::size_t) {
  throw std::logic_error("apps::stream: a CUDA copy asked for in a build without CUDA");
}

}  // namespace apps::stream::kernels
