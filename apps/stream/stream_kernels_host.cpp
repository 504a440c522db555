// The stream applications' kernels on the host (see stream_kernels.hpp).
#include <cmath>

#include "stream_kernels.hpp"

#if APPS_HAVE_CBLAS
#include <cblas.h>
#endif

namespace apps::stream::kernels {

void sgemm_host(const float* a, const float* b, float* c, int rows, int k, int cols) {
#if APPS_HAVE_CBLAS
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, cols, k, 1.0F, a, k, b, cols, 0.0F,
              c, cols);
#else
  for (int i = 0; i < rows; ++i) {
    for (int j = 0; j < cols; ++j) c[i * cols + j] = 0;
    for (int p = 0; p < k; ++p) {
      const float aip = a[i * k + p];
      for (int j = 0; j < cols; ++j) c[i * cols + j] += aip * b[p * cols + j];
    }
  }
#endif
}

void nbody_step_host(const float* all, std::size_t bodies, std::size_t first, std::size_t count,
                     float* vel, float* next, float dt, float softening) {
  const float eps2 = softening * softening;
  for (std::size_t i = 0; i < count; ++i) {
    const float* pi = all + 4 * (first + i);
    float ax = 0, ay = 0, az = 0;
    for (std::size_t j = 0; j < bodies; ++j) {
      const float* pj = all + 4 * j;
      const float dx = pj[0] - pi[0], dy = pj[1] - pi[1], dz = pj[2] - pi[2];
      const float r2 = dx * dx + dy * dy + dz * dz + eps2;
      const float inv = 1.0F / std::sqrt(r2);
      const float s = pj[3] * inv * inv * inv;
      ax += dx * s;
      ay += dy * s;
      az += dz * s;
    }
    float* v = vel + 4 * i;
    v[0] += ax * dt;
    v[1] += ay * dt;
    v[2] += az * dt;
    float* n = next + 4 * i;
    n[0] = pi[0] + v[0] * dt;
    n[1] = pi[1] + v[1] * dt;
    n[2] = pi[2] + v[2] * dt;
    n[3] = pi[3];
  }
}

}  // namespace apps::stream::kernels
