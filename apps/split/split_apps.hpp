// apps/split/split_apps.hpp - the applications of the adaptive CPU/GPU splitter (seed 002,
// docs/split.md), each a host-resident problem whose data-parallel region the splitter cuts
// between the GPU (which pays the PCIe transfers of its share) and the CPU cores (which read
// the same data in place). Written against the public API only (weft/split/splitter.hpp).
//
// Each application gives the splitter its region (RegionWork) and its two parts, and can check
// its result against a reference. On the emulated device (no GPU) the GPU part runs the CPU's
// code, so CI exercises every step but the CUDA calls.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <weft/split/splitter.hpp>

#include "split_cuda.hpp"

namespace apps::split {

/// Host memory for an application's data: page-locked where CUDA is present (so the GPU part's
/// copies are asynchronous DMA transfers that overlap its kernels), plain otherwise.
template <class T>
class HostArray {
 public:
  HostArray() = default;
  explicit HostArray(std::size_t n);
  ~HostArray();
  HostArray(HostArray&& o) noexcept : data_(o.data_), size_(o.size_), pinned_(o.pinned_) {
    o.data_ = nullptr;
    o.size_ = 0;
  }
  HostArray& operator=(HostArray&& o) noexcept;
  HostArray(const HostArray&) = delete;
  HostArray& operator=(const HostArray&) = delete;

  [[nodiscard]] T* data() noexcept { return data_; }
  [[nodiscard]] const T* data() const noexcept { return data_; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  T& operator[](std::size_t i) noexcept { return data_[i]; }
  const T& operator[](std::size_t i) const noexcept { return data_[i]; }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
  bool pinned_ = false;
};

/// One application's region, with both parts.
class SplitApp {
 public:
  virtual ~SplitApp() = default;
  [[nodiscard]] virtual std::string name() const = 0;
  /// The region (its size F, work S in the unit of rate(), items, grain).
  [[nodiscard]] virtual weft::split::RegionWork work() const = 0;
  /// The unit of the work: "flop", "byte", ...
  [[nodiscard]] virtual std::string unit() const = 0;
  virtual void gpu_part(weft::split::Range r, const weft::split::GpuContext& g) = 0;
  virtual void cpu_part(weft::split::Range r, std::size_t core) = 0;
  /// Whether the last region's result matches the reference.
  [[nodiscard]] virtual bool verify() = 0;
  /// Clears the output, so that a region that skipped an item cannot pass verify().
  virtual void clear_output() = 0;
  /// The GPU's rate on this problem with its data already in device memory (no PCIe), in
  /// unit() per second: the "peak" that the seed's static split starts from. CUDA only.
  [[nodiscard]] virtual double gpu_local_rate(int device) = 0;

  [[nodiscard]] weft::split::GpuPart gpu() {
    return [this](weft::split::Range r, const weft::split::GpuContext& g) { gpu_part(r, g); };
  }
  [[nodiscard]] weft::split::CpuPart cpu() {
    return [this](weft::split::Range r, std::size_t core) { cpu_part(r, core); };
  }
};

/// The seed's example: C = A B (FP64, row-major, host-resident), rows of C split. The GPU part
/// copies B and its rows of A in, multiplies with cuBLAS and copies its rows of C out, in
/// pipelined chunks; each core multiplies its rows with single-threaded OpenBLAS.
std::unique_ptr<SplitApp> make_gemm_rows(int m, int n, int k, std::uint64_t seed);

/// STREAM triad a = b + s c over host-resident FP64 arrays: memory-bound, where the cores read
/// in place at the host's bandwidth and the GPU pays 24 bytes of PCIe per element.
std::unique_ptr<SplitApp> make_triad(std::int64_t n, std::uint64_t seed);

/// y = A x with a host-resident CSR matrix of skewed row lengths (FP32): rows split by their
/// entries (work_before), the GPU paying the transfer of its rows' entries.
std::unique_ptr<SplitApp> make_spmv(int rows, int longest_row, std::uint64_t seed);

/// Whether weft_split_apps was built with CUDA (else the GPU parts run only emulated).
bool built_with_cuda() noexcept;

}  // namespace apps::split

namespace apps::split {

/// HPL-style LU: a blocked right-looking factorisation with partial pivoting of a
/// host-resident, column-major FP64 matrix (entries uniform in [-0.5, 0.5], as HPL's), panel
/// width nb. Each panel is factored on the GPU side (cuSOLVER; LAPACKE on the emulated device)
/// and left where it is; each trailing update (the panel's row swaps, U12 = L11^-1 A12 and
/// A22 -= L21 U12, column by column) is one region of the splitter, its columns split between
/// the GPU (which copies its columns in and out, pipelined) and the cores (OpenBLAS, one thread
/// each). As in HPL, the swaps are not applied to L's columns: the solve applies each panel's
/// swaps to the right-hand side in turn.
///
/// With look-ahead (on by default; set_look_ahead), as HPL's depth 1: while a trailing update's
/// region runs, another thread updates the next panel's columns and factors that panel on the
/// GPU side (its own stream there), so that the panels leave the critical path. The regions then
/// hold the columns after the next panel only.
class HplLu {
 public:
  /// Throws std::invalid_argument for n < 1 or nb outside [1, n], std::runtime_error when the
  /// applications were built without CBLAS and LAPACKE.
  HplLu(int n, int nb, std::uint64_t seed);
  ~HplLu();
  HplLu(const HplLu&) = delete;
  HplLu& operator=(const HplLu&) = delete;

  [[nodiscard]] int n() const noexcept { return n_; }
  [[nodiscard]] int nb() const noexcept { return nb_; }
  /// HPL's operation count, 2/3 n^3 + 3/2 n^2: GFLOPS = flops() / seconds / 1e9.
  [[nodiscard]] double flops() const noexcept;

  /// The matrix, column-major: the factors after factor() (L below the diagonal, U on and above).
  [[nodiscard]] double* matrix() noexcept { return a_.data(); }
  /// Puts the original matrix back (before each factorisation; not timed).
  void reset();
  /// Factors the next panel beside each trailing update (on by default: it takes the panels off
  /// the critical path, docs/decisions/034-lu-look-ahead.md).
  void set_look_ahead(bool on) noexcept { look_ahead_ = on; }
  [[nodiscard]] bool look_ahead() const noexcept { return look_ahead_; }
  /// Factors the matrix, each trailing update a region of `s` at the GPU share `gsplit`
  /// (learned when negative), the panels on `gpu`. Returns the seconds it took; `regions`, when
  /// given, receives each update's report. Factors what the matrix holds: call reset() before
  /// each factorisation but the first.
  double factor(weft::split::Splitter& s, weft::split::GpuSide& gpu, double gsplit,
                std::vector<weft::split::RegionReport>* regions = nullptr);
  /// HPL's scaled residual of x solving A x = b with the factors:
  /// ||A x - b||_inf / (eps (||A||_inf ||x||_inf + ||b||_inf) n), eps = 2^-53. Passes below 16.
  [[nodiscard]] double scaled_residual() const;
  /// The region of the trailing update after the panel at column k: its columns (with
  /// look-ahead, those after the next panel), and their work in flop.
  [[nodiscard]] weft::split::RegionWork update_work(int k) const;
  /// The prior: the GPU's DGEMM rate on the first update's shape in device memory (for the
  /// emulated device, the cores' rate over their number), and the cores' rate on the first
  /// update run CPU-only. Leaves the matrix reset.
  weft::split::PeakRates peak_rates(weft::split::Splitter& s, weft::split::GpuSide& gpu);

 private:
  [[nodiscard]] int width(int k) const noexcept { return std::min(nb_, n_ - k); }
  // The trailing columns (counted from the first after the panel at k) that the region holds.
  [[nodiscard]] int region_offset(int k) const noexcept;
  [[nodiscard]] weft::split::Range trailing(int k, weft::split::Range region_items) const;
  void factor_panel(weft::split::GpuSide& gpu, int k);
  void factor_next_panel(bool emulated, int k);
  void update_columns(int k, weft::split::Range r);
  void update_on_gpu(int k, weft::split::Range r, const weft::split::GpuContext& g);

  int n_, nb_;
  bool look_ahead_ = true;
  bool factored_ = false;
  HostArray<double> a_;                   // the factors, in place
  std::vector<double> original_;          // A as generated
  std::vector<std::vector<int>> pivots_;  // per panel: 0-based, relative to the panel's row
  cuda::WorkspacePtr ws_;
};

}  // namespace apps::split
