// apps/split/split_apps.hpp - the applications of the adaptive CPU/GPU splitter (seed 002,
// docs/split.md), each a host-resident problem whose data-parallel region the splitter cuts
// between the GPU (which pays the PCIe transfers of its share) and the CPU cores (which read
// the same data in place). Written against the public API only (weft/split/splitter.hpp).
//
// Each application gives the splitter its region (RegionWork) and its two parts, and can check
// its result against a reference. On the emulated device (no GPU) the GPU part runs the CPU's
// code, so CI exercises every step but the CUDA calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <weft/split/splitter.hpp>

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
