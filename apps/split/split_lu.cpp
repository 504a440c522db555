// The HPL-style LU of the splitter (split_apps.hpp, HplLu).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <future>
#include <random>
#include <stdexcept>
#include <string>

#include "split_apps.hpp"

#if APPS_HAVE_CBLAS && APPS_HAVE_LAPACKE
#include <cblas.h>
#include <lapacke.h>
#define APPS_SPLIT_LU 1
#else
#define APPS_SPLIT_LU 0
#endif

namespace apps::split {

using weft::split::GpuContext;
using weft::split::Range;
using weft::split::RegionWork;

HplLu::HplLu(int n, int nb, std::uint64_t seed) : n_(n), nb_(nb) {
  if (n < 1 || nb < 1 || nb > n) {
    throw std::invalid_argument("apps::split::HplLu: n >= 1 and nb in [1, n] (n " +
                                std::to_string(n) + ", nb " + std::to_string(nb) + ")");
  }
#if !APPS_SPLIT_LU
  (void)seed;
  throw std::runtime_error("apps::split::HplLu: built without CBLAS and LAPACKE");
#else
  const std::size_t count = std::size_t(n) * std::size_t(n);
  a_ = HostArray<double>(count);
  original_.resize(count);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-0.5, 0.5);
  for (double& v : original_) v = u(rng);
  reset();
#endif
}

HplLu::~HplLu() = default;

double HplLu::flops() const noexcept {
  const double n = n_;
  return 2.0 / 3.0 * n * n * n + 1.5 * n * n;
}

void HplLu::reset() {
  std::memcpy(a_.data(), original_.data(), original_.size() * sizeof(double));
  pivots_.assign(static_cast<std::size_t>((n_ + nb_ - 1) / nb_), {});
  factored_ = false;
}

// With look-ahead the next panel's columns are updated beside the region, not in it.
int HplLu::region_offset(int k) const noexcept {
  return look_ahead_ && k + nb_ < n_ ? width(k + nb_) : 0;
}

RegionWork HplLu::update_work(int k) const {
  const int width = this->width(k);
  const double m = n_ - k;
  const double cols = std::max(0, n_ - k - width - region_offset(k));
  RegionWork w;
  w.items = static_cast<std::int64_t>(cols);
  // Per column: the triangular solve (width^2) and the update (2 (m - width) width).
  w.work = cols * (static_cast<double>(width) * width + 2.0 * (m - width) * width);
  w.size = w.work;
  w.grain = 64;
  return w;
}

#if APPS_SPLIT_LU

namespace {

// The host's factoring of the m x width panel at `panel` (leading dimension lda) at column k,
// its pivots 0-based into `piv`.
void factor_on_host(double* panel, int lda, int m, int width, int k, std::vector<int>& piv) {
  piv.resize(static_cast<std::size_t>(width));
  const int info = LAPACKE_dgetrf(LAPACK_COL_MAJOR, m, width, panel, lda, piv.data());
  if (info != 0) {
    throw std::runtime_error("apps::split::HplLu: singular panel at column " + std::to_string(k) +
                             " (getrf info " + std::to_string(info) + ")");
  }
  for (int& p : piv) p -= 1;  // LAPACK's are 1-based
}

}  // namespace

// The panel at column k on the GPU side, into panel slot k / nb mod 2.
void HplLu::factor_panel(weft::split::GpuSide& gpu, int k) {
  const int width = this->width(k);
  const int m = n_ - k;
  const int p = k / nb_;
  double* panel = a_.data() + k + std::size_t(k) * n_;
  std::vector<int>& piv = pivots_[static_cast<std::size_t>(p)];
  gpu.run([&](const GpuContext& g) {
    if (!g.emulated) {
      if (!ws_) ws_ = cuda::make_workspace(g.device);
      piv.resize(static_cast<std::size_t>(width));
      cuda::lu_panel(*ws_, g.stream, panel, n_, m, width, p % 2, piv.data());
      return;
    }
    factor_on_host(panel, n_, m, width, k, piv);
  });
}

// The look-ahead after the panel at column k: the next panel's columns updated with this
// panel, then the next panel factored. Runs on its own thread beside the region of k, whose
// columns and panel it does not write; on the GPU machine through the workspace's look-ahead
// stream (the panel at k was factored there first, so ws_ exists), emulated on this thread.
void HplLu::factor_next_panel(bool emulated, int k) {
  const int next = k + nb_;
  const int next_width = width(next);
  std::vector<int>& piv = pivots_[static_cast<std::size_t>(next / nb_)];
  if (!emulated) {
    piv.resize(static_cast<std::size_t>(next_width));
    double* first_col = a_.data() + k + std::size_t(next) * n_;
    cuda::lu_next_panel(*ws_, first_col, n_, n_ - k, width(k), next_width, (k / nb_) % 2,
                        piv.data());
    return;
  }
  update_columns(k, Range{0, next_width});
  factor_on_host(a_.data() + next + std::size_t(next) * n_, n_, n_ - next, next_width, next, piv);
}

// Trailing columns r (0 = the first column after the panel) of the update after the panel at k.
void HplLu::update_columns(int k, Range r) {
  if (r.empty()) return;
  const int width = this->width(k);
  const int m = n_ - k;
  const auto cols = static_cast<int>(r.size());
  double* top = a_.data() + k + (std::size_t(k) + width + std::size_t(r.begin)) * n_;
  const double* l11 = a_.data() + k + std::size_t(k) * n_;
  std::vector<int> one_based(pivots_[static_cast<std::size_t>(k / nb_)]);
  for (int& p : one_based) p += 1;
  LAPACKE_dlaswp(LAPACK_COL_MAJOR, cols, top, n_, 1, width, one_based.data(), 1);
  cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasNoTrans, CblasUnit, width, cols, 1.0, l11,
              n_, top, n_);
  if (m > width) {
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, m - width, cols, width, -1.0,
                l11 + width, n_, top, n_, 1.0, top + width, n_);
  }
}

// The region's columns, counted from the first column after the panel at k: with look-ahead the
// region starts after the next panel's.
Range HplLu::trailing(int k, Range region_items) const {
  const std::int64_t offset = region_offset(k);
  return {region_items.begin + offset, region_items.end + offset};
}

// Region items r of the update after the panel at k.
void HplLu::update_on_gpu(int k, Range r, const GpuContext& g) {
  const Range cols = trailing(k, r);
  if (g.emulated) return update_columns(k, cols);
  double* top = a_.data() + k + (std::size_t(k) + width(k) + std::size_t(cols.begin)) * n_;
  cuda::lu_update(*ws_, g.stream, top, n_, n_ - k, width(k), (k / nb_) % 2, cols.size());
}

double HplLu::factor(weft::split::Splitter& s, weft::split::GpuSide& gpu, double gsplit,
                     std::vector<weft::split::RegionReport>* regions) {
  factored_ = false;  // until every panel and update below is done
  const auto t0 = std::chrono::steady_clock::now();
  for (int k = 0; k < n_; k += nb_) {
    // Without look-ahead every panel is factored here; with it only the first, each later one
    // beside the region before it.
    if (!look_ahead_ || k == 0) factor_panel(gpu, k);
    std::future<void> ahead;
    if (look_ahead_ && k + nb_ < n_) {
      ahead = std::async(std::launch::async, [this, emulated = gpu.is_emulated(), k] {
        factor_next_panel(emulated, k);
      });
    }
    const RegionWork w = update_work(k);
    if (w.items > 0) {
      auto on_gpu = [&](Range r, const GpuContext& g) { update_on_gpu(k, r, g); };
      auto on_core = [&](Range r, std::size_t) { update_columns(k, trailing(k, r)); };
      // A region that throws leaves `ahead` to its destructor, which waits for the look-ahead.
      const weft::split::RegionReport rep =
          gsplit < 0 ? s.run(w, on_gpu, on_core) : s.run_fixed(w, gsplit, on_gpu, on_core);
      if (regions != nullptr) regions->push_back(rep);
    }
    if (ahead.valid()) ahead.get();
  }
  factored_ = true;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double HplLu::scaled_residual() const {
  if (!factored_) {
    throw std::logic_error("apps::split::HplLu::scaled_residual: the matrix is not factored");
  }
  std::mt19937_64 rng(99);
  std::uniform_real_distribution<double> u(-0.5, 0.5);
  std::vector<double> b(static_cast<std::size_t>(n_));
  for (double& v : b) v = u(rng);
  std::vector<double> x = b;
  // L: each panel's swaps, then its columns of L, in order.
  for (int k = 0, p = 0; k < n_; k += nb_, ++p) {
    const int width = std::min(nb_, n_ - k);
    const std::vector<int>& piv = pivots_[static_cast<std::size_t>(p)];
    for (int i = 0; i < width; ++i) std::swap(x[std::size_t(k + i)], x[std::size_t(k + piv[i])]);
    const double* l11 = a_.data() + k + std::size_t(k) * n_;
    cblas_dtrsv(CblasColMajor, CblasLower, CblasNoTrans, CblasUnit, width, l11, n_, x.data() + k,
                1);
    if (n_ - k > width) {
      cblas_dgemv(CblasColMajor, CblasNoTrans, n_ - k - width, width, -1.0, l11 + width, n_,
                  x.data() + k, 1, 1.0, x.data() + k + width, 1);
    }
  }
  cblas_dtrsv(CblasColMajor, CblasUpper, CblasNoTrans, CblasNonUnit, n_, a_.data(), n_, x.data(),
              1);
  std::vector<double> r = b;
  cblas_dgemv(CblasColMajor, CblasNoTrans, n_, n_, 1.0, original_.data(), n_, x.data(), 1, -1.0,
              r.data(), 1);
  std::vector<double> row_sums(static_cast<std::size_t>(n_), 0.0);
  for (int j = 0; j < n_; ++j) {
    const double* col = original_.data() + std::size_t(j) * n_;
    for (int i = 0; i < n_; ++i) row_sums[std::size_t(i)] += std::abs(col[i]);
  }
  auto inf_norm = [](const std::vector<double>& v) {
    double m = 0;
    for (double e : v) m = std::max(m, std::abs(e));
    return m;
  };
  const double eps = std::ldexp(1.0, -53);
  const double a_norm = *std::max_element(row_sums.begin(), row_sums.end());
  return inf_norm(r) / (eps * (a_norm * inf_norm(x) + inf_norm(b)) * n_);
}

weft::split::PeakRates HplLu::peak_rates(weft::split::Splitter& s, weft::split::GpuSide& gpu) {
  reset();
  factor_panel(gpu, 0);
  const RegionWork w = update_work(0);
  if (w.items == 0) {
    throw std::invalid_argument("apps::split::HplLu::peak_rates: n = " + std::to_string(n_) +
                                " with nb = " + std::to_string(nb_) +
                                " leaves no trailing update to measure");
  }
  double cpu = 0;
  {
    const weft::split::RegionReport rep = s.run_fixed(
        w, 0, [](Range, const GpuContext&) {},
        [&](Range r, std::size_t) { update_columns(0, trailing(0, r)); });
    cpu = w.work / rep.seconds;
  }
  double gpu_rate = cpu / static_cast<double>(s.cores());
  if (!gpu.is_emulated() && n_ > nb_) {
    gpu_rate = cuda::lu_update_local_rate(*ws_, a_.data(), n_, n_, nb_, n_ - nb_);
  }
  reset();
  return {gpu_rate, cpu > 0 ? cpu : 1.0};
}

#else

void HplLu::factor_panel(weft::split::GpuSide&, int) {}
void HplLu::factor_next_panel(bool, int) {}
void HplLu::update_columns(int, Range) {}
void HplLu::update_on_gpu(int, Range, const GpuContext&) {}
double HplLu::factor(weft::split::Splitter&, weft::split::GpuSide&, double,
                     std::vector<weft::split::RegionReport>*) {
  return 0;
}
double HplLu::scaled_residual() const { return 0; }
weft::split::PeakRates HplLu::peak_rates(weft::split::Splitter&, weft::split::GpuSide&) {
  return {1, 1};
}

#endif

}  // namespace apps::split
