#include "batched_gemm.hpp"

#include "first_null.hpp"

#include <algorithm>
#include <cmath>
#include <random>

#if APPS_HAVE_CBLAS
#include <cblas.h>
#endif

namespace apps::gpu {

namespace {

GemmBatch packed(std::vector<GemmShape> shapes) {
  GemmBatch b;
  b.shapes = std::move(shapes);
  for (const GemmShape& s : b.shapes) {
    b.a_at.push_back(b.a_size);
    b.b_at.push_back(b.b_size);
    b.c_at.push_back(b.c_size);
    b.a_size += static_cast<std::size_t>(s.m) * s.k;
    b.b_size += static_cast<std::size_t>(s.k) * s.n;
    b.c_size += static_cast<std::size_t>(s.m) * s.n;
  }
  return b;
}

}  // namespace

GemmBatch GemmBatch::uniform(int count, int m, int n, int k) {
  if (count < 1 || m < 1 || n < 1 || k < 1 || m > kMaxSide || n > kMaxSide || k > kMaxSide) {
    throw std::invalid_argument(
        "apps::gpu::GemmBatch::uniform: need count >= 1 and sizes in [1, 2^30] (got count " +
        std::to_string(count) + ", m " + std::to_string(m) + ", n " + std::to_string(n) + ", k " +
        std::to_string(k) + ")");
  }
  return packed(std::vector<GemmShape>(static_cast<std::size_t>(count), GemmShape{m, n, k}));
}

GemmBatch GemmBatch::variable(int count, int lo, int hi, std::uint64_t seed) {
  if (count < 1 || lo < 1 || hi < lo || hi > kMaxSide) {
    throw std::invalid_argument(
        "apps::gpu::GemmBatch::variable: need count >= 1 and 1 <= lo <= hi <= 2^30 (got count " +
        std::to_string(count) + ", lo " + std::to_string(lo) + ", hi " + std::to_string(hi) + ")");
  }
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> size(lo, hi);
  std::vector<GemmShape> shapes;
  for (int i = 0; i < count; ++i) {
    const int m = size(rng), n = size(rng), k = size(rng);
    shapes.push_back(GemmShape{m, n, k});
  }
  return packed(std::move(shapes));
}

void GemmBatch::check(const char* caller, const void* a, const void* b, const void* c) const {
  const std::string where = std::string("apps::gpu::") + caller + ": ";
  if (const char* null = first_null({{"a", a}, {"b", b}, {"c", c}});
      null != nullptr && !shapes.empty()) {
    throw std::invalid_argument(where + "buffer " + null + " is null");
  }
  if (a_at.size() != shapes.size() || b_at.size() != shapes.size() ||
      c_at.size() != shapes.size()) {
    throw std::invalid_argument(where + std::to_string(shapes.size()) + " shapes but offsets for " +
                                std::to_string(a_at.size()) + " / " + std::to_string(b_at.size()) +
                                " / " + std::to_string(c_at.size()) + " (a / b / c)");
  }
  auto inside = [](std::size_t at, std::size_t rows, std::size_t cols, std::size_t size) {
    return at <= size && rows * cols <= size - at;
  };
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const GemmShape s = shapes[i];
    const std::string product = "product " + std::to_string(i) + " (" + std::to_string(s.m) +
                                " x " + std::to_string(s.n) + " x " + std::to_string(s.k) + ")";
    if (s.m < 1 || s.n < 1 || s.k < 1 || s.m > kMaxSide || s.n > kMaxSide || s.k > kMaxSide) {
      throw std::invalid_argument(where + product + ": sizes must be in [1, 2^30]");
    }
    const auto m = static_cast<std::size_t>(s.m), n = static_cast<std::size_t>(s.n),
               k = static_cast<std::size_t>(s.k);
    const char* outside = !inside(a_at[i], m, k, a_size)   ? "A"
                          : !inside(b_at[i], k, n, b_size) ? "B"
                          : !inside(c_at[i], m, n, c_size) ? "C"
                                                           : nullptr;
    if (outside != nullptr) {
      throw std::invalid_argument(where + product + ": its " + outside +
                                  " runs past the buffer's size");
    }
  }
}

std::size_t GemmBatch::tiles() const {
  std::size_t t = 0;
  for (const GemmShape& s : shapes) {
    t += static_cast<std::size_t>((s.m + DgemmTile::kTile - 1) / DgemmTile::kTile) *
         static_cast<std::size_t>((s.n + DgemmTile::kTile - 1) / DgemmTile::kTile);
  }
  return t;
}

double GemmBatch::flops() const {
  double f = 0;
  for (const GemmShape& s : shapes) f += 2.0 * s.m * s.n * s.k;
  return f;
}

template <class T>
void fill_inputs(const GemmBatch& batch, std::vector<T>& a, std::vector<T>& b) {
  a.resize(batch.a_size);
  b.resize(batch.b_size);
  for (std::size_t i = 0; i < a.size(); ++i)
    a[i] = static_cast<T>(static_cast<int>(i % 7) - 3) / T(4);
  for (std::size_t i = 0; i < b.size(); ++i)
    b[i] = static_cast<T>(static_cast<int>(i % 5) - 2) / T(2);
}

template <class T>
void reference_gemm(const GemmBatch& batch, const T* a, const T* b, T* c) {
  batch.check("reference_gemm", a, b, c);
  for (std::size_t i = 0; i < batch.shapes.size(); ++i) {
    const GemmShape s = batch.shapes[i];
    const T* ai = a + batch.a_at[i];
    const T* bi = b + batch.b_at[i];
    T* ci = c + batch.c_at[i];
#if APPS_HAVE_CBLAS
    if constexpr (std::is_same_v<T, double>) {
      cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, s.m, s.n, s.k, 1.0, ai, s.m, bi, s.k,
                  0.0, ci, s.m);
    } else {
      cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, s.m, s.n, s.k, 1.0f, ai, s.m, bi, s.k,
                  0.0f, ci, s.m);
    }
#else
    for (int col = 0; col < s.n; ++col) {
      for (int row = 0; row < s.m; ++row) {
        T sum = T(0);
        for (int d = 0; d < s.k; ++d) {
          sum += ai[row + static_cast<std::size_t>(d) * s.m] *
                 bi[d + static_cast<std::size_t>(col) * s.k];
        }
        ci[row + static_cast<std::size_t>(col) * s.m] = sum;
      }
    }
#endif
  }
}

template <class T>
double max_relative_error(std::span<const T> got, std::span<const T> ref) {
  if (got.size() != ref.size()) return INFINITY;
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double e = std::abs(static_cast<double>(got[i]) - static_cast<double>(ref[i])) /
                     (1.0 + std::abs(static_cast<double>(ref[i])));
    if (!(e <= worst)) worst = e;  // NaN counts as the worst
  }
  return worst;
}

template void fill_inputs<double>(const GemmBatch&, std::vector<double>&, std::vector<double>&);
template void fill_inputs<float>(const GemmBatch&, std::vector<float>&, std::vector<float>&);
template void reference_gemm<double>(const GemmBatch&, const double*, const double*, double*);
template void reference_gemm<float>(const GemmBatch&, const float*, const float*, float*);
template double max_relative_error<double>(std::span<const double>, std::span<const double>);
template double max_relative_error<float>(std::span<const float>, std::span<const float>);

}  // namespace apps::gpu
