// What does a host write to pinned host-mapped memory cost when the GPU is reading that line?
// The tagged-record pool (branch tagged-records) wrote each task's record into the line its
// block polls, and its lanes' record writes cost 158-196 TSC cycles per task against 27-36 for
// the state-word pool, which writes payloads into lines no block polls and READY into one
// control line per ring (lab/results/h100/tagged_busy_profile-fa2d0fe.txt). The
// hypothesis: a GPU read of a host line is a snoop that takes the line out of the writing
// core's cache (or out of its exclusive state), so each record write into a polled line pays a
// fresh ownership request; a line no device reads stays in the core's cache.
//
// One warp per block polls a 128-byte line of a pinned host-mapped buffer (16 lanes, one
// 8-byte relaxed system-scope load each, in one instruction, as a record poll), sleeping
// `sleep_ns` between polls, until the host sets a stop flag. Meanwhile one host thread writes
// 128-byte records (16 x 8-byte stores, then mfence, which waits until the stores own their
// lines), timed with rdtsc per record, into: the line the blocks poll ("polled"), a line of the
// same buffer that no block reads ("quiet"), and, with no kernel running, both again ("idle").
// Build and run on the GPU machine from lab/probes:
//   nvcc -O2 -std=c++20 -gencode=arch=compute_90,code=sm_90 write_polled_probe.cu -o write_polled
//   ./write_polled
#include <cuda_runtime.h>
#include <x86intrin.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cuda/atomic>
#include <vector>

#include "cuda_check.cuh"

namespace {

constexpr int kLineWords = 16;  // 128 bytes
constexpr int kPolledLine = 0;
constexpr int kQuietLine = 32;  // 4 KB away: another page-sized stretch, never read
constexpr int kRecords = 100000;

__device__ inline std::uint64_t ld_relaxed(const std::uint64_t* p) {
  return cuda::atomic_ref<std::uint64_t, cuda::thread_scope_system>(*const_cast<std::uint64_t*>(p))
      .load(cuda::memory_order_relaxed);
}

__global__ void poll_kernel(const std::uint64_t* buf, const volatile int* stop, unsigned sleep_ns,
                            unsigned long long* polls) {
  const unsigned lane = threadIdx.x;
  unsigned long long n = 0, sum = 0;
  for (;;) {
    // relaxed: the probe measures traffic, not data; one load per lane in one instruction.
    if (lane < kLineWords) sum += ld_relaxed(buf + kPolledLine * kLineWords + lane);
    ++n;
    if ((n & 63) == 0 && *stop != 0) break;
    if (sleep_ns != 0) __nanosleep(sleep_ns);
  }
  if (lane == 0) atomicAdd(polls, n + (sum == 42 ? 1 : 0));  // sum used: the loads stay
}

// Cycles per 128-byte record written to `line`: 16 stores, then mfence.
std::vector<std::uint64_t> write_records(volatile std::uint64_t* line) {
  std::vector<std::uint64_t> cycles(kRecords);
  for (int r = 0; r < kRecords; ++r) {
    const std::uint64_t t0 = __rdtsc();
    for (int w = 0; w < kLineWords; ++w) line[w] = (static_cast<std::uint64_t>(r) << 8) | w;
    _mm_mfence();
    cycles[r] = __rdtsc() - t0;
  }
  return cycles;
}

double quantile(std::vector<std::uint64_t> v, double q) {
  std::sort(v.begin(), v.end());
  return static_cast<double>(v[static_cast<std::size_t>(q * (v.size() - 1))]);
}

void report(const char* what, const std::vector<std::uint64_t>& c) {
  std::printf("  %-34s cycles per record p10 %6.0f p50 %6.0f p90 %6.0f p99 %7.0f\n", what,
              quantile(c, 0.1), quantile(c, 0.5), quantile(c, 0.9), quantile(c, 0.99));
}

}  // namespace

int main() {
  std::uint64_t* buf = nullptr;
  int* stop = nullptr;
  unsigned long long* polls = nullptr;
  CHECK(cudaHostAlloc(&buf, 64 * kLineWords * sizeof(std::uint64_t), cudaHostAllocMapped));
  CHECK(cudaHostAlloc(&stop, sizeof(int), cudaHostAllocMapped));
  CHECK(cudaMalloc(&polls, sizeof(unsigned long long)));
  std::fill(buf, buf + 64 * kLineWords, 0);
  std::uint64_t* dbuf = nullptr;
  int* dstop = nullptr;
  CHECK(cudaHostGetDevicePointer(&dbuf, buf, 0));
  CHECK(cudaHostGetDevicePointer(&dstop, stop, 0));
  volatile std::uint64_t* polled = buf + kPolledLine * kLineWords;
  volatile std::uint64_t* quiet = buf + kQuietLine * kLineWords;
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));

  for (int round = 0; round < 2; ++round) {
    std::printf("round %d\n", round);
    std::printf(" no kernel\n");
    report("idle: the line blocks poll later", write_records(polled));
    report("idle: a line no block reads", write_records(quiet));
    for (int blocks : {1, sms}) {
      for (unsigned sleep_ns : {0u, 256u, 2000u}) {
        *stop = 0;
        CHECK(cudaMemset(polls, 0, sizeof(unsigned long long)));
        cudaEvent_t t0, t1;
        CHECK(cudaEventCreate(&t0));
        CHECK(cudaEventCreate(&t1));
        CHECK(cudaEventRecord(t0));
        poll_kernel<<<blocks, 32>>>(dbuf, dstop, sleep_ns, polls);
        CHECK(cudaGetLastError());
        CHECK(cudaEventRecord(t1));
        // Let the blocks start polling before timing.
        const std::uint64_t start = __rdtsc();
        while (__rdtsc() - start < 200'000'000ull) {
        }
        const auto p = write_records(polled);
        const auto q = write_records(quiet);
        *stop = 1;
        std::atomic_thread_fence(std::memory_order_seq_cst);
        CHECK(cudaEventSynchronize(t1));
        float ms = 0;
        CHECK(cudaEventElapsedTime(&ms, t0, t1));
        unsigned long long n = 0;
        CHECK(cudaMemcpy(&n, polls, sizeof n, cudaMemcpyDeviceToHost));
        std::printf(" %d block(s) polling line %d, %u ns sleep between polls: %.1f M polls/s\n",
                    blocks, kPolledLine, sleep_ns, static_cast<double>(n) / (ms * 1e3));
        report("polled line", p);
        report("quiet line", q);
        CHECK(cudaEventDestroy(t0));
        CHECK(cudaEventDestroy(t1));
      }
    }
  }
  CHECK(cudaFreeHost(buf));
  CHECK(cudaFreeHost(stop));
  CHECK(cudaFree(polls));
  return 0;
}
