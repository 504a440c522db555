// The splitter's applications (split_apps.hpp): host data, the CPU parts, the references.
#include "split_apps.hpp"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <random>
#include <stdexcept>
#include <string>

#include "split_cuda.hpp"
#include "spmv_bs.hpp"  // apps::gpu::CsrMatrix::skewed: the seed-000 SpMV's matrix

#if APPS_HAVE_CBLAS
#include <cblas.h>
#endif

namespace apps::split {

template <class T>
HostArray<T>::HostArray(std::size_t n) : size_(n) {
  const std::size_t bytes = std::max<std::size_t>(n * sizeof(T), 64);
  data_ = static_cast<T*>(cuda::pinned_alloc(bytes));
  pinned_ = data_ != nullptr;
  if (!pinned_) data_ = static_cast<T*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64));
  if (data_ == nullptr) throw std::bad_alloc();
}

template <class T>
HostArray<T>::~HostArray() {
  if (pinned_) {
    cuda::pinned_free(data_);
  } else {
    std::free(data_);
  }
}

template <class T>
HostArray<T>& HostArray<T>::operator=(HostArray&& o) noexcept {
  if (this != &o) {
    this->~HostArray();
    data_ = o.data_;
    size_ = o.size_;
    pinned_ = o.pinned_;
    o.data_ = nullptr;
    o.size_ = 0;
  }
  return *this;
}

template class HostArray<double>;
template class HostArray<float>;
template class HostArray<int>;
template class HostArray<std::int64_t>;

namespace {

using weft::split::GpuContext;
using weft::split::Range;
using weft::split::RegionWork;

// A part's range must lie in the region's items: the parts index their arrays by it.
void check_range(const char* app, Range r, std::int64_t items) {
  if (r.begin < 0 || r.end < r.begin || r.end > items) {
    throw std::out_of_range(std::string("apps::split::") + app + ": range [" +
                            std::to_string(r.begin) + ", " + std::to_string(r.end) +
                            ") outside its " + std::to_string(items) + " items");
  }
}

// The workspace of a GPU part, made on first use on the context's device.
cuda::Workspace& workspace(cuda::WorkspacePtr& w, int device) {
  if (!w) w = cuda::make_workspace(device);
  return *w;
}

// ---- GEMM by rows -------------------------------------------------------------------------

class GemmRows final : public SplitApp {
 public:
  GemmRows(int m, int n, int k, std::uint64_t seed)
      : m_(checked(m, n, k)),
        n_(n),
        k_(k),
        a_(std::size_t(m) * k),
        b_(std::size_t(k) * n),
        c_(std::size_t(m) * n) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    for (std::size_t i = 0; i < a_.size(); ++i) a_[i] = u(rng);
    for (std::size_t i = 0; i < b_.size(); ++i) b_[i] = u(rng);
  }

  // Before any allocation: a negative size would otherwise come back as bad_alloc.
  static int checked(int m, int n, int k) {
    if (m < 1 || n < 1 || k < 1)
      throw std::invalid_argument("apps::split::gemm_rows: m, n, k >= 1");
    return m;
  }

  [[nodiscard]] std::string name() const override { return "gemm_rows"; }
  [[nodiscard]] std::string unit() const override { return "flop"; }
  [[nodiscard]] RegionWork work() const override {
    RegionWork w;
    w.work = 2.0 * m_ * n_ * k_;
    w.size = w.work;  // the seed measures a GEMM's size by its operations
    w.items = m_;
    w.grain = 32;
    return w;
  }

  void gpu_part(Range r, const GpuContext& g) override {
    check_range("gemm_rows", r, m_);
    if (g.emulated) return cpu_part(r, 0);
    cuda::gemm_rows(workspace(ws_, g.device), g.stream, a_.data() + r.begin * k_, b_.data(),
                    c_.data() + r.begin * n_, r.size(), n_, k_);
  }

  void cpu_part(Range r, std::size_t) override {
    check_range("gemm_rows", r, m_);
#if APPS_HAVE_CBLAS
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(r.size()), n_, k_, 1.0,
                a_.data() + r.begin * k_, k_, b_.data(), n_, 0.0, c_.data() + r.begin * n_, n_);
#else
    for (std::int64_t i = r.begin; i < r.end; ++i) {
      double* c = c_.data() + i * n_;
      for (int j = 0; j < n_; ++j) c[j] = 0;
      for (int p = 0; p < k_; ++p) {
        const double a = a_[static_cast<std::size_t>(i * k_ + p)];
        const double* b = b_.data() + std::size_t(p) * n_;
        for (int j = 0; j < n_; ++j) c[j] += a * b[j];
      }
    }
#endif
  }

  // Freivalds: C x against A (B x) for a random x, every row, relative to |A| |B| |x|.
  [[nodiscard]] bool verify() override {
    std::mt19937_64 rng(12345);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    std::vector<double> x(static_cast<std::size_t>(n_)), bx(static_cast<std::size_t>(k_), 0.0);
    for (double& v : x) v = u(rng);
    for (int p = 0; p < k_; ++p) {
      for (int j = 0; j < n_; ++j) bx[p] += b_[std::size_t(p) * n_ + j] * x[j];
    }
    for (int i = 0; i < m_; ++i) {
      double cx = 0, abx = 0, scale = 0;
      for (int j = 0; j < n_; ++j) cx += c_[std::size_t(i) * n_ + j] * x[j];
      for (int p = 0; p < k_; ++p) {
        abx += a_[std::size_t(i) * k_ + p] * bx[p];
        scale += std::abs(a_[std::size_t(i) * k_ + p]) * std::abs(bx[p]);
      }
      if (!(std::abs(cx - abx) <= 1e-10 * (scale + 1) * std::sqrt(double(k_) * n_))) return false;
    }
    return true;
  }

  void clear_output() override {
    for (std::size_t i = 0; i < c_.size(); ++i) c_[i] = std::numeric_limits<double>::quiet_NaN();
  }

  double gpu_local_rate(int device) override {
    return cuda::gemm_local_rate(workspace(ws_, device), a_.data(), b_.data(), m_, n_, k_);
  }

 private:
  int m_, n_, k_;
  HostArray<double> a_, b_, c_;
  cuda::WorkspacePtr ws_;
};

// ---- STREAM triad ---------------------------------------------------------------------------

class Triad final : public SplitApp {
 public:
  static constexpr double kScalar = 3.0;
  Triad(std::int64_t n, std::uint64_t seed)
      : n_(n >= 1 ? n : throw std::invalid_argument("apps::split::triad: n >= 1")),
        a_(static_cast<std::size_t>(n)),
        b_(static_cast<std::size_t>(n)),
        c_(static_cast<std::size_t>(n)) {
    // Small integers: b + 3 c is exact whether or not a side fuses the multiply and add.
    std::mt19937_64 rng(seed);
    for (std::int64_t i = 0; i < n; ++i) {
      b_[std::size_t(i)] = static_cast<double>(rng() % 1000);
      c_[std::size_t(i)] = static_cast<double>(rng() % 1000);
    }
  }

  [[nodiscard]] std::string name() const override { return "triad_host"; }
  [[nodiscard]] std::string unit() const override { return "byte"; }
  [[nodiscard]] RegionWork work() const override {
    RegionWork w;
    w.work = 24.0 * static_cast<double>(n_);  // STREAM counts 24 bytes an element
    w.size = w.work;
    w.items = n_;
    w.grain = 1024;
    return w;
  }

  void gpu_part(Range r, const GpuContext& g) override {
    check_range("triad_host", r, n_);
    if (g.emulated) return cpu_part(r, 0);
    cuda::triad(workspace(ws_, g.device), g.stream, a_.data() + r.begin, b_.data() + r.begin,
                c_.data() + r.begin, kScalar, r.size());
  }

  void cpu_part(Range r, std::size_t) override {
    check_range("triad_host", r, n_);
    double* __restrict a = a_.data();
    const double* __restrict b = b_.data();
    const double* __restrict c = c_.data();
    for (std::int64_t i = r.begin; i < r.end; ++i) a[i] = b[i] + kScalar * c[i];
  }

  [[nodiscard]] bool verify() override {
    for (std::int64_t i = 0; i < n_; ++i) {
      const auto k = static_cast<std::size_t>(i);
      if (a_[k] != b_[k] + kScalar * c_[k]) return false;
    }
    return true;
  }

  void clear_output() override {
    for (std::size_t i = 0; i < a_.size(); ++i) a_[i] = std::numeric_limits<double>::quiet_NaN();
  }

  double gpu_local_rate(int device) override {
    return cuda::triad_local_rate(workspace(ws_, device), b_.data(), c_.data(), n_);
  }

 private:
  std::int64_t n_;
  HostArray<double> a_, b_, c_;
  cuda::WorkspacePtr ws_;
};

// ---- SpMV -------------------------------------------------------------------------------------

class Spmv final : public SplitApp {
 public:
  Spmv(int rows, int longest, std::uint64_t seed) {
    const apps::gpu::CsrMatrix m = apps::gpu::CsrMatrix::skewed(rows, rows, longest, seed);
    rows_ = m.rows;
    row_start_ = HostArray<std::int64_t>(m.row_start.size());
    std::memcpy(row_start_.data(), m.row_start.data(), m.row_start.size() * sizeof(std::int64_t));
    col_ = HostArray<int>(m.col.size());
    std::memcpy(col_.data(), m.col.data(), m.col.size() * sizeof(int));
    val_ = HostArray<float>(m.value.size());
    std::memcpy(val_.data(), m.value.data(), m.value.size() * sizeof(float));
    x_ = HostArray<float>(static_cast<std::size_t>(rows));
    y_ = HostArray<float>(static_cast<std::size_t>(rows));
    // Small integers times quarters: every partial sum is exact in FP32, in any order.
    std::mt19937_64 rng(seed + 1);
    for (int i = 0; i < rows; ++i) x_[std::size_t(i)] = static_cast<float>(int(rng() % 9) - 4);
  }

  [[nodiscard]] std::string name() const override { return "spmv_host"; }
  [[nodiscard]] std::string unit() const override { return "entry"; }
  [[nodiscard]] RegionWork work() const override {
    RegionWork w;
    w.work = static_cast<double>(row_start_[std::size_t(rows_)]);
    w.size = w.work;
    w.items = rows_;
    w.grain = 64;
    const std::int64_t* rs = row_start_.data();
    w.work_before = [rs](std::int64_t i) { return static_cast<double>(rs[i]); };
    return w;
  }

  void gpu_part(Range r, const GpuContext& g) override {
    check_range("spmv_host", r, rows_);
    if (g.emulated) return cpu_part(r, 0);
    cuda::spmv(workspace(ws_, g.device), g.stream, row_start_.data() + r.begin, col_.data(),
               val_.data(), x_.data(), rows_, y_.data() + r.begin, r.size());
  }

  void cpu_part(Range r, std::size_t) override {
    check_range("spmv_host", r, rows_);
    for (std::int64_t i = r.begin; i < r.end; ++i) {
      float sum = 0.0f;
      for (std::int64_t j = row_start_[std::size_t(i)]; j < row_start_[std::size_t(i + 1)]; ++j) {
        sum += val_[std::size_t(j)] * x_[std::size_t(col_[std::size_t(j)])];
      }
      y_[std::size_t(i)] = sum;
    }
  }

  [[nodiscard]] bool verify() override {
    for (int i = 0; i < rows_; ++i) {
      float sum = 0.0f;
      for (std::int64_t j = row_start_[std::size_t(i)]; j < row_start_[std::size_t(i + 1)]; ++j) {
        sum += val_[std::size_t(j)] * x_[std::size_t(col_[std::size_t(j)])];
      }
      if (y_[std::size_t(i)] != sum) return false;
    }
    return true;
  }

  void clear_output() override {
    for (std::size_t i = 0; i < y_.size(); ++i) y_[i] = std::numeric_limits<float>::quiet_NaN();
  }

  double gpu_local_rate(int device) override {
    return cuda::spmv_local_rate(workspace(ws_, device), row_start_.data(), col_.data(),
                                 val_.data(), x_.data(), rows_, rows_);
  }

 private:
  int rows_ = 0;
  HostArray<std::int64_t> row_start_;
  HostArray<int> col_;
  HostArray<float> val_, x_, y_;
  cuda::WorkspacePtr ws_;
};

}  // namespace

std::unique_ptr<SplitApp> make_gemm_rows(int m, int n, int k, std::uint64_t seed) {
  return std::make_unique<GemmRows>(m, n, k, seed);
}
std::unique_ptr<SplitApp> make_triad(std::int64_t n, std::uint64_t seed) {
  return std::make_unique<Triad>(n, seed);
}
std::unique_ptr<SplitApp> make_spmv(int rows, int longest_row, std::uint64_t seed) {
  return std::make_unique<Spmv>(rows, longest_row, seed);
}

bool built_with_cuda() noexcept {
#if APPS_SPLIT_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

}  // namespace apps::split
