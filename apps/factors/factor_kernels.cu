// The factor operators on the GPU (stock-major S x D floats, NaN = no value), matching the CPU
// cores of factor_ops.cpp: windowed operators with one thread per output summing its window in
// double (coalesced along days), delta and element-wise operators, scale with per-day sums
// (threads along days, so reads coalesce, blocks over stock chunks, double atomics), and rank by
// sorting (order-preserving key, stock) pairs per day, one block per day in shared memory up to
// 8192 stocks (CUB's BlockRadixSort), CUB's segmented radix sort beyond, ties at their mean
// rank found by binary search in the sorted day. Every launch here is asynchronous (no call that
// copies to the host or synchronizes, as CUB's DeviceSegmentedSort does): the graph runtime
// calls it on its dispatcher's thread, which meanwhile dispatches and completes nothing else
// (docs/decisions/027-gpu-rank-never-synchronizes.md). Scratch memory comes from a
// stream-ordered pool of the application's own (cudaMallocFromPoolAsync) that keeps what it
// got, so steady-state runs do not go back to the driver.
#include <cuda_runtime.h>

#include <cstdint>
#include <cub/block/block_radix_sort.cuh>
#include <cub/device/device_segmented_radix_sort.cuh>
#include <mutex>
#include <string>
#include <vector>

#include "factor_gpu.hpp"
#include "weft/error.hpp"

namespace factors::detail::gpu {

using weft::InvalidArgument;

// A failed CUDA call throws weft::CudaError naming the call, CUDA's error name and text, and
// the line here (the application's own check: weft's is an internal header of the library).
[[noreturn]] void throw_cuda(const char* call, cudaError_t e, int line) {
  throw weft::CudaError(call, static_cast<int>(e),
                        std::string(call) + " failed: " + cudaGetErrorName(e) + " (" +
                            cudaGetErrorString(e) + ") at " + __FILE__ + ":" +
                            std::to_string(line));
}

}  // namespace factors::detail::gpu

#define FACTORS_CUDA_CHECK(call)                                         \
  do {                                                                   \
    const cudaError_t factors_err_ = (call);                             \
    if (factors_err_ != cudaSuccess)                                     \
      ::factors::detail::gpu::throw_cuda(#call, factors_err_, __LINE__); \
  } while (0)

namespace factors::detail::gpu {

namespace {

constexpr int kThreads = 256;
constexpr std::uint32_t kNaNKey = 0xFFFFFFFFu;  // after every number's key

cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

unsigned blocks_for(std::size_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

void check_launch() { FACTORS_CUDA_CHECK(cudaGetLastError()); }

// A pool per device, created on first use, that never releases what it holds (threshold: max).
cudaMemPool_t scratch_pool() {
  static std::mutex mutex;
  static std::vector<cudaMemPool_t> pools;
  int device = 0;
  FACTORS_CUDA_CHECK(cudaGetDevice(&device));
  std::lock_guard lock(mutex);
  if (pools.size() <= static_cast<std::size_t>(device)) pools.resize(device + 1, nullptr);
  if (pools[device] == nullptr) {
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    cudaMemPool_t pool = nullptr;
    FACTORS_CUDA_CHECK(cudaMemPoolCreate(&pool, &props));
    std::uint64_t keep = UINT64_MAX;
    FACTORS_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
    pools[device] = pool;
  }
  return pools[device];
}

template <class T>
T* scratch(std::size_t count, cudaStream_t s) {
  void* p = nullptr;
  FACTORS_CUDA_CHECK(cudaMallocFromPoolAsync(&p, count * sizeof(T), scratch_pool(), s));
  return static_cast<T*>(p);
}

void release(void* p, cudaStream_t s) { FACTORS_CUDA_CHECK(cudaFreeAsync(p, s)); }

// kind 0: mean, 1: population stddev, 2: Pearson correlation with y. Same formulas as the CPU.
template <int Kind>
__global__ void windowed(const float* x, const float* y, float* r, std::size_t stocks,
                         std::size_t days, std::size_t window) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= stocks * days) return;
  const std::size_t d = i % days;
  const float nan = __int_as_float(0x7fc00000);
  if (d + 1 < window) {
    r[i] = nan;
    return;
  }
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0;
  for (std::size_t k = i + 1 - window; k <= i; ++k) {
    const double a = x[k];
    const double b = Kind == 2 ? static_cast<double>(y[k]) : 0.0;
    if (isnan(a) || isnan(b)) {
      r[i] = nan;
      return;
    }
    s0 += a;
    s2 += a * a;
    if (Kind == 2) {
      s1 += b;
      s3 += b * b;
      s4 += a * b;
    }
  }
  const double n = static_cast<double>(window);
  if (Kind == 0) {
    r[i] = static_cast<float>(s0 / n);
  } else if (Kind == 1) {
    const double mean = s0 / n;
    r[i] = static_cast<float>(sqrt(fmax(0.0, s2 / n - mean * mean)));
  } else {
    const double cov = s4 / n - (s0 / n) * (s1 / n);
    const double va = s2 / n - (s0 / n) * (s0 / n);
    const double vb = s3 / n - (s1 / n) * (s1 / n);
    const double scale_a = fmax(1.0, s2 / n), scale_b = fmax(1.0, s3 / n);
    if (va <= 1e-12 * scale_a || vb <= 1e-12 * scale_b) {
      r[i] = nan;
      return;
    }
    r[i] = static_cast<float>(fmin(1.0, fmax(-1.0, cov / sqrt(va * vb))));
  }
}

__global__ void delta_kernel(const float* x, float* r, std::size_t stocks, std::size_t days,
                             std::size_t lag) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= stocks * days) return;
  r[i] = i % days < lag ? __int_as_float(0x7fc00000) : x[i] - x[i - lag];
}

template <bool Multiply>
__global__ void elementwise(const float* x, const float* y, float* r, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) r[i] = Multiply ? x[i] * y[i] : x[i] - y[i];
}

constexpr std::size_t kStocksPerBlock = 64;

// Threads along days (x), blocks over chunks of stocks (y): each adds |x| of its chunk.
__global__ void abs_sums_by_day(const float* x, double* sums, std::size_t stocks,
                                std::size_t days) {
  const std::size_t d = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (d >= days) return;
  const std::size_t s0 = blockIdx.y * kStocksPerBlock;
  const std::size_t s1 = min(stocks, s0 + kStocksPerBlock);
  double sum = 0;
  for (std::size_t s = s0; s < s1; ++s) {
    const float v = x[s * days + d];
    if (!isnan(v)) sum += fabs(static_cast<double>(v));
  }
  atomicAdd(&sums[d], sum);
}

__global__ void divide_by_day(const float* x, const double* sums, float* r, std::size_t stocks,
                              std::size_t days) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= stocks * days) return;
  const float v = x[i];
  const double sum = sums[i % days];
  r[i] = isnan(v) ? v : (sum > 0 ? static_cast<float>(v / sum) : 0.0f);
}

// A float's sort key: keys order like the floats, -0 as +0, NaN after everything.
__device__ std::uint32_t rank_key(float v) {
  if (isnan(v)) return kNaNKey;
  if (v == 0.0f) v = 0.0f;
  const std::uint32_t bits = __float_as_uint(v);
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

// Day-major (key, stock) pairs.
__global__ void rank_keys(const float* x, std::uint32_t* keys, std::uint32_t* stocks_of,
                          std::size_t stocks, std::size_t days) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= stocks * days) return;
  const std::size_t s = i / days, d = i % days;
  keys[d * stocks + s] = rank_key(x[i]);
  stocks_of[d * stocks + s] = static_cast<std::uint32_t>(s);
}

__global__ void day_offsets(int* offsets, std::size_t stocks, std::size_t days) {
  const std::size_t d = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (d <= days) offsets[d] = static_cast<int>(d * stocks);
}

// First position in [lo, hi) whose key is not below `key` (upper: above).
__device__ std::size_t bound(const std::uint32_t* keys, std::size_t lo, std::size_t hi,
                             std::uint32_t key, bool upper) {
  while (lo < hi) {
    const std::size_t mid = lo + (hi - lo) / 2;
    if (keys[mid] < key || (upper && keys[mid] == key)) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

__global__ void ranks_from_sorted(const std::uint32_t* keys, const std::uint32_t* stocks_of,
                                  float* r, std::size_t stocks, std::size_t days) {
  const std::size_t p = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (p >= stocks * days) return;
  const std::size_t d = p / stocks, base = d * stocks, end = base + stocks;
  const std::uint32_t key = keys[p];
  float v = __int_as_float(0x7fc00000);
  if (key != kNaNKey) {
    const std::size_t n = bound(keys, base, end, kNaNKey, false) - base;  // stocks with values
    const std::size_t lo = bound(keys, base, end, key, false) - base;
    const std::size_t hi = bound(keys, base, end, key, true) - base - 1;
    const double mean_rank = 0.5 * static_cast<double>(lo + hi);
    v = n > 1 ? static_cast<float>(mean_rank / static_cast<double>(n - 1)) : 0.5f;
  }
  r[static_cast<std::size_t>(stocks_of[p]) * days + d] = v;
}

// One day per block, all of it in shared memory: the day's stocks' keys (padded with NaN keys
// to Threads * Items) sorted by cub::BlockRadixSort with their stocks, the sorted keys kept in
// shared memory for the ties' binary searches, each rank written to its stock's row. Against
// the segmented sort through global memory (two transposing passes, a sort's temporary
// buffers) it reads x once and writes r once.
template <int Threads, int Items>
struct BlockRank {
  static constexpr unsigned kCapacity = Threads * Items;
  using Sort = cub::BlockRadixSort<std::uint32_t, Threads, Items, std::uint32_t>;
  static constexpr std::size_t kSortBytes = (sizeof(typename Sort::TempStorage) + 15) / 16 * 16;
  static constexpr std::size_t kSharedBytes = kSortBytes + kCapacity * sizeof(std::uint32_t);
};

template <int Threads, int Items>
__global__ void __launch_bounds__(Threads)
    rank_by_block(const float* x, float* r, std::size_t stocks, std::size_t days) {
  using B = BlockRank<Threads, Items>;
  extern __shared__ __align__(16) unsigned char shared[];
  auto& temp = *reinterpret_cast<typename B::Sort::TempStorage*>(shared);
  auto* sorted = reinterpret_cast<std::uint32_t*>(shared + B::kSortBytes);
  const std::size_t d = blockIdx.x;
  std::uint32_t keys[Items], stock[Items];
  for (int i = 0; i < Items; ++i) {  // striped: neighbouring threads read neighbouring stocks
    const std::size_t s = static_cast<std::size_t>(i) * Threads + threadIdx.x;
    keys[i] = s < stocks ? rank_key(x[s * days + d]) : kNaNKey;
    stock[i] = s < stocks ? static_cast<std::uint32_t>(s) : 0xFFFFFFFFu;
  }
  typename B::Sort(temp).Sort(keys, stock);  // blocked: thread t holds t * Items + i
  for (int i = 0; i < Items; ++i) sorted[threadIdx.x * Items + i] = keys[i];
  __syncthreads();
  const std::size_t n = bound(sorted, 0, B::kCapacity, kNaNKey, false);  // stocks with values
  for (int i = 0; i < Items; ++i) {
    if (stock[i] == 0xFFFFFFFFu) continue;  // padding
    float v = __int_as_float(0x7fc00000);
    if (keys[i] != kNaNKey) {
      const std::size_t lo = bound(sorted, 0, n, keys[i], false);
      const std::size_t hi = bound(sorted, 0, n, keys[i], true) - 1;
      const double mean_rank = 0.5 * static_cast<double>(lo + hi);
      v = n > 1 ? static_cast<float>(mean_rank / static_cast<double>(n - 1)) : 0.5f;
    }
    r[static_cast<std::size_t>(stock[i]) * days + d] = v;
  }
}

// Launches rank_by_block<Threads, Items> over the days. Its shared memory is above the 48 KiB a
// launch gets by default: allowed at each launch (a host-side attribute of the function on the
// current device, which may differ between calls; no synchronization).
template <int Threads, int Items>
void launch_rank_by_block(const float* x, float* r, std::size_t stocks, std::size_t days,
                          cudaStream_t s) {
  using B = BlockRank<Threads, Items>;
  FACTORS_CUDA_CHECK(cudaFuncSetAttribute(rank_by_block<Threads, Items>,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(B::kSharedBytes)));
  rank_by_block<Threads, Items>
      <<<static_cast<unsigned>(days), Threads, B::kSharedBytes, s>>>(x, r, stocks, days);
  check_launch();
}

}  // namespace

bool compiled() noexcept { return true; }

void moving_mean(const float* x, float* r, std::size_t stocks, std::size_t days, std::size_t window,
                 void* stream) {
  windowed<0><<<blocks_for(stocks * days), kThreads, 0, as_stream(stream)>>>(x, nullptr, r, stocks,
                                                                             days, window);
  check_launch();
}

void moving_stddev(const float* x, float* r, std::size_t stocks, std::size_t days,
                   std::size_t window, void* stream) {
  windowed<1><<<blocks_for(stocks * days), kThreads, 0, as_stream(stream)>>>(x, nullptr, r, stocks,
                                                                             days, window);
  check_launch();
}

void moving_correlation(const float* x, const float* y, float* r, std::size_t stocks,
                        std::size_t days, std::size_t window, void* stream) {
  windowed<2><<<blocks_for(stocks * days), kThreads, 0, as_stream(stream)>>>(x, y, r, stocks, days,
                                                                             window);
  check_launch();
}

void delta(const float* x, float* r, std::size_t stocks, std::size_t days, std::size_t lag,
           void* stream) {
  delta_kernel<<<blocks_for(stocks * days), kThreads, 0, as_stream(stream)>>>(x, r, stocks, days,
                                                                              lag);
  check_launch();
}

void multiply(const float* x, const float* y, float* r, std::size_t count, void* stream) {
  elementwise<true><<<blocks_for(count), kThreads, 0, as_stream(stream)>>>(x, y, r, count);
  check_launch();
}

void subtract(const float* x, const float* y, float* r, std::size_t count, void* stream) {
  elementwise<false><<<blocks_for(count), kThreads, 0, as_stream(stream)>>>(x, y, r, count);
  check_launch();
}

void scale(const float* x, float* r, std::size_t stocks, std::size_t days, void* stream) {
  const cudaStream_t s = as_stream(stream);
  double* sums = scratch<double>(days, s);
  FACTORS_CUDA_CHECK(cudaMemsetAsync(sums, 0, days * sizeof(double), s));
  const dim3 grid(blocks_for(days),
                  static_cast<unsigned>((stocks + kStocksPerBlock - 1) / kStocksPerBlock));
  abs_sums_by_day<<<grid, kThreads, 0, s>>>(x, sums, stocks, days);
  check_launch();
  divide_by_day<<<blocks_for(stocks * days), kThreads, 0, s>>>(x, sums, r, stocks, days);
  check_launch();
  release(sums, s);
}

void rank(const float* x, float* r, std::size_t stocks, std::size_t days, void* stream) {
  const std::size_t n = stocks * days;
  const cudaStream_t s = as_stream(stream);
  // A day of up to 8192 stocks is ranked in one block's shared memory (rank_by_block); larger
  // days go through CUB's segmented radix sort in global memory.
  if (stocks <= BlockRank<128, 8>::kCapacity)
    return launch_rank_by_block<128, 8>(x, r, stocks, days, s);
  if (stocks <= BlockRank<256, 16>::kCapacity)
    return launch_rank_by_block<256, 16>(x, r, stocks, days, s);
  if (stocks <= BlockRank<512, 16>::kCapacity)
    return launch_rank_by_block<512, 16>(x, r, stocks, days, s);
  if (n > static_cast<std::size_t>(INT32_MAX)) {
    throw InvalidArgument("factors::kernels::rank (GPU): " + std::to_string(n) +
                          " values exceed CUB's segmented sort (2^31 - 1)");
  }
  auto* keys_in = scratch<std::uint32_t>(n, s);
  auto* keys_out = scratch<std::uint32_t>(n, s);
  auto* stocks_in = scratch<std::uint32_t>(n, s);
  auto* stocks_out = scratch<std::uint32_t>(n, s);
  auto* offsets = scratch<int>(days + 1, s);
  rank_keys<<<blocks_for(n), kThreads, 0, s>>>(x, keys_in, stocks_in, stocks, days);
  check_launch();
  day_offsets<<<blocks_for(days + 1), kThreads, 0, s>>>(offsets, stocks, days);
  check_launch();
  std::size_t temp_bytes = 0;
  // DeviceSegmentedRadixSort (one block per day) launches without synchronizing; see the top.
  FACTORS_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairs(
      nullptr, temp_bytes, keys_in, keys_out, stocks_in, stocks_out, static_cast<int>(n),
      static_cast<int>(days), offsets, offsets + 1, 0, 32, s));
  void* temp = scratch<unsigned char>(temp_bytes, s);
  FACTORS_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairs(
      temp, temp_bytes, keys_in, keys_out, stocks_in, stocks_out, static_cast<int>(n),
      static_cast<int>(days), offsets, offsets + 1, 0, 32, s));
  ranks_from_sorted<<<blocks_for(n), kThreads, 0, s>>>(keys_out, stocks_out, r, stocks, days);
  check_launch();
  for (void* p :
       {static_cast<void*>(keys_in), static_cast<void*>(keys_out), static_cast<void*>(stocks_in),
        static_cast<void*>(stocks_out), static_cast<void*>(offsets), temp}) {
    release(p, s);
  }
}

}  // namespace factors::detail::gpu
