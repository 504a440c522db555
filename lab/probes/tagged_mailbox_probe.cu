// Could a slot travel without its state word's ordering? Today a block acquires the slot's
// state (one PCIe round trip), then reads the payload (a second one), writes the results and
// publishes FINISHED with a system-scope fence or release store; the host acquires FINISHED.
// With tagged words, every 8-byte word of the record carries the task's sequence number in its
// high half: one relaxed system-scope 64-bit load per word (single-copy atomic) sees either the
// old or the new word, so the block knows the record is whole when every tag is the new one,
// from the one read that polls it; the results go back the same way, with no fence (the host
// checks the tags of the result words). One block, one host-mapped mailbox, 400 round trips per
// variant, after a gap of 0 or 200 us; "torn" counts polls that saw some words new and some
// old (why the tags must be on every word).
// Build and run on the GPU machine from the repository root:
//   cd lab/probes && nvcc -O2 -std=c++20 -gencode=arch=compute_90,code=sm_90 \
//     tagged_mailbox_probe.cu -o tagged_mailbox_probe && ./tagged_mailbox_probe
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <cuda/atomic>
#include <thread>
#include <vector>

#include "mailbox.cuh"

namespace {

// Byte offsets in the 4 KiB mailbox.
constexpr int kIn = 0;           // state word (variant 0), or the first tagged word
constexpr int kPayload = 128;    // variant 0: 32 bytes of payload after the state's line
constexpr int kOut = 1024;       // answer: state word, or tagged result words
constexpr int kWords = 8;        // tagged words in a request (32 bytes of payload)
constexpr int kResultWords = 2;  // tagged words in an answer (8 bytes of result)

enum Variant : int {
  state_then_payload = 0,  // acquire the state, read the payload, results + release store
  tagged = 1,              // one read of tagged words; tagged results, no fence
  tagged_release = 2,      // one read of tagged words; results, then a release store
  kVariants = 3
};
const char* kNames[kVariants] = {"state (acquire), payload, release store: today",
                                 "tagged words, tagged results, no fence",
                                 "tagged words, results + release store"};

__device__ unsigned long long g_torn;

__device__ inline std::uint64_t load_sys(const std::uint64_t* p) {
  return cuda::atomic_ref<const std::uint64_t, cuda::thread_scope_system>(*p).load(
      cuda::memory_order_relaxed);
}
__device__ inline void store_sys(std::uint64_t* p, std::uint64_t v) {
  cuda::atomic_ref<std::uint64_t, cuda::thread_scope_system>(*p).store(v,
                                                                       cuda::memory_order_relaxed);
}

__global__ void mailbox_kernel(unsigned char* box, int n, int variant) {
  __shared__ std::uint32_t payload[kWords];
  const unsigned lane = threadIdx.x;
  for (unsigned i = 1; i <= static_cast<unsigned>(n); ++i) {
    if (variant == state_then_payload) {
      if (lane == 0) {
        cuda::atomic_ref<unsigned, cuda::thread_scope_system> in(
            *reinterpret_cast<unsigned*>(box + kIn));
        while (in.load(cuda::memory_order_acquire) != i) {
        }
      }
      __syncthreads();
      if (lane < kWords)
        payload[lane] = reinterpret_cast<const std::uint32_t*>(box + kPayload)[lane];
      __syncthreads();
      if (lane == 0) {
        reinterpret_cast<std::uint32_t*>(box + kOut + 8)[0] = payload[0] + payload[kWords - 1];
        cuda::atomic_ref<unsigned, cuda::thread_scope_system> out(
            *reinterpret_cast<unsigned*>(box + kOut));
        out.store(i, cuda::memory_order_release);
      }
      __syncthreads();
      continue;
    }
    // Tagged: warp 0 polls every word at once (one coalesced read of 64 bytes).
    if (lane < 32) {
      const std::uint64_t* words = reinterpret_cast<const std::uint64_t*>(box + kIn);
      for (;;) {
        const std::uint64_t w = lane < kWords ? load_sys(words + lane) : 0;
        const bool fresh = lane >= kWords || static_cast<unsigned>(w >> 32) == i;
        const unsigned fresh_mask = __ballot_sync(0xffffffffu, fresh);
        if (fresh_mask == 0xffffffffu) {
          if (lane < kWords) payload[lane] = static_cast<std::uint32_t>(w);
          break;
        }
        const unsigned any_new =
            __ballot_sync(0xffffffffu, lane < kWords && static_cast<unsigned>(w >> 32) == i);
        if (lane == 0 && any_new != 0) atomicAdd(&g_torn, 1ull);
      }
    }
    __syncthreads();
    if (lane < kResultWords) {
      std::uint64_t* out = reinterpret_cast<std::uint64_t*>(box + kOut);
      const std::uint32_t result = payload[0] + payload[kWords - 1] + lane;
      const std::uint64_t tag = static_cast<std::uint64_t>(i) << 32;
      if (variant == tagged) {
        store_sys(out + lane, tag | result);
      } else {
        reinterpret_cast<std::uint32_t*>(out + 1 + lane)[0] = result;  // plain result words
      }
    }
    if (variant == tagged_release) {
      __syncthreads();
      if (lane == 0) {
        cuda::atomic_ref<std::uint64_t, cuda::thread_scope_system> out(
            *reinterpret_cast<std::uint64_t*>(box + kOut));
        out.store(static_cast<std::uint64_t>(i) << 32, cuda::memory_order_release);
      }
    }
    __syncthreads();
  }
}

void mailbox(int variant, int gap_us) {
  const MappedBox mailbox_memory(4096);
  unsigned char* box = mailbox_memory.host;
  const unsigned long long zero = 0;
  cudaMemcpyToSymbol(g_torn, &zero, sizeof zero);
  const int n = 400;
  mailbox_kernel<<<1, 128>>>(mailbox_memory.device, n, variant);
  std::vector<double> lat;
  bool ok = true;
  for (unsigned i = 1; i <= static_cast<unsigned>(n); ++i) {
    std::this_thread::sleep_for(std::chrono::microseconds(gap_us));
    const double t0 = now();
    if (variant == state_then_payload) {
      for (int w = 0; w < kWords; ++w) reinterpret_cast<unsigned*>(box + kPayload)[w] = i + w;
      std::atomic_ref<unsigned>(*reinterpret_cast<unsigned*>(box + kIn))
          .store(i, std::memory_order_release);
      std::atomic_ref<unsigned> out(*reinterpret_cast<unsigned*>(box + kOut));
      while (out.load(std::memory_order_acquire) != i) {
      }
      ok = ok && reinterpret_cast<unsigned*>(box + kOut + 8)[0] == i + i + kWords - 1;
    } else {
      // Each word whole: a 64-bit relaxed atomic store (a plain mov on x86-64).
      std::uint64_t* words = reinterpret_cast<std::uint64_t*>(box + kIn);
      for (int w = 0; w < kWords; ++w) {
        std::atomic_ref<std::uint64_t>(words[w]).store(
            (static_cast<std::uint64_t>(i) << 32) | (i + w), std::memory_order_relaxed);
      }
      std::uint64_t* out = reinterpret_cast<std::uint64_t*>(box + kOut);
      if (variant == tagged) {
        for (int w = 0; w < kResultWords; ++w) {
          std::uint64_t v;
          do {
            v = std::atomic_ref<std::uint64_t>(out[w]).load(std::memory_order_relaxed);
          } while (static_cast<unsigned>(v >> 32) != i);
          ok = ok && static_cast<std::uint32_t>(v) == i + i + kWords - 1 + w;
        }
      } else {
        while (static_cast<unsigned>(
                   std::atomic_ref<std::uint64_t>(out[0]).load(std::memory_order_acquire) >> 32) !=
               i) {
        }
        ok = ok && reinterpret_cast<std::uint32_t*>(out + 1)[0] == i + i + kWords - 1;
      }
    }
    lat.push_back((now() - t0) * 1e6);
  }
  cudaDeviceSynchronize();
  unsigned long long torn = 0;
  cudaMemcpyFromSymbol(&torn, g_torn, sizeof torn);
  std::printf(
      "%-48s gap %4d us: round trip p50 %5.2f p90 %5.2f p99 %5.2f us; torn polls %llu; %s\n",
      kNames[variant], gap_us, pct(lat, 0.5), pct(lat, 0.9), pct(lat, 0.99), torn,
      ok ? "results right" : "RESULTS WRONG");
}

}  // namespace

int main() {
  for (int round = 0; round < 2; ++round) {
    for (int gap : {0, 200}) {
      for (int v = 0; v < kVariants; ++v) mailbox(v, gap);
    }
  }
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
