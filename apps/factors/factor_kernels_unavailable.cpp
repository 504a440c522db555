// Built instead of factor_kernels.cu without CUDA (WEFT_CUDA=OFF, or no nvcc): the kernels keep a
// GPU implementation (mappings and the emulated device treat them as GPU-capable), which
// refuses to run.
#include "factor_gpu.hpp"
#include "weft/error.hpp"

namespace factors::detail::gpu {

using weft::InvalidState;

namespace {
[[noreturn]] void unavailable() {
  throw InvalidState("factors::kernels: built without CUDA; no GPU implementation");
}
}  // namespace

bool compiled() noexcept { return false; }
void moving_mean(const float*, float*, std::size_t, std::size_t, std::size_t, void*) {
  unavailable();
}
void moving_stddev(const float*, float*, std::size_t, std::size_t, std::size_t, void*) {
  unavailable();
}
void moving_correlation(const float*, const float*, float*, std::size_t, std::size_t, std::size_t,
                        void*) {
  unavailable();
}
void delta(const float*, float*, std::size_t, std::size_t, std::size_t, void*) { unavailable(); }
void rank(const float*, float*, std::size_t, std::size_t, void*) { unavailable(); }
void scale(const float*, float*, std::size_t, std::size_t, void*) { unavailable(); }
void multiply(const float*, const float*, float*, std::size_t, void*) { unavailable(); }
void subtract(const float*, const float*, float*, std::size_t, void*) { unavailable(); }

}  // namespace factors::detail::gpu
