// The factor operators' GPU implementations (private to the factor kernels; factor_kernels.cu, or
// factor_kernels_unavailable.cpp without CUDA). Each enqueues its work on `stream` (a
// cudaStream_t) and returns; device pointers, stock-major S x D floats.
#pragma once

#include <cstddef>

namespace factors::detail::gpu {

bool compiled() noexcept;
void moving_mean(const float* x, float* r, std::size_t stocks, std::size_t days, std::size_t window,
                 void* stream);
void moving_stddev(const float* x, float* r, std::size_t stocks, std::size_t days,
                   std::size_t window, void* stream);
void moving_correlation(const float* x, const float* y, float* r, std::size_t stocks,
                        std::size_t days, std::size_t window, void* stream);
void delta(const float* x, float* r, std::size_t stocks, std::size_t days, std::size_t lag,
           void* stream);
void rank(const float* x, float* r, std::size_t stocks, std::size_t days, void* stream);
void scale(const float* x, float* r, std::size_t stocks, std::size_t days, void* stream);
void multiply(const float* x, const float* y, float* r, std::size_t count, void* stream);
void subtract(const float* x, const float* y, float* r, std::size_t count, void* stream);

}  // namespace factors::detail::gpu
