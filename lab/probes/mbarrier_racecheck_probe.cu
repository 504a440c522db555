// Does compute-sanitizer racecheck understand a hand-off through an mbarrier where the waiting
// threads do not arrive (producer warp arrives, consumer warps wait on the phase parity), as
// the resident kernel's loader, task threads and publisher do? Three hand-offs of a shared
// array from warp 0 to warp 1, each run under racecheck by lab/scripts/gpu-session.sh:
//   0: raw PTX mbarrier, consumer waits with try_wait.parity (the kernel's way)
//   1: cuda::barrier<thread_scope_block>, consumer waits with wait_parity
//   2: cuda::barrier, both warps arrive, both wait on their tokens (arrive_and_wait)
//   3: __syncthreads (the reference racecheck understands)
//   4: cuda::barrier of 33 arrivals: lane 0 of warp 0 arrives without waiting, warp 1's 32
//      threads arrive and wait on their tokens (a producer that does not wait)
//   5: as 4 in raw PTX, the consumers waiting with try_wait.parity after their arrival
//   6: named barrier 2: warp 0 bar.arrive (does not wait), warp 1 bar.sync
//   7: as 0, the producer writing with st.relaxed.cta (morally strong: no data race)
//   8: as 0, the consumer reading with ld.relaxed.cta
//   9: the other way (write after read): warp 1 reads, bar.arrive 3; warp 0 bar.sync 3, writes
//  10: as 9, warp 1 closing with bar.sync 1, 32 (a barrier of its own) before its bar.arrive
// Build: nvcc -O2 -std=c++20 -gencode=arch=compute_90,code=sm_90 mbarrier_racecheck_probe.cu
//   -o mbarrier_racecheck_probe; run: compute-sanitizer --tool racecheck ./mbarrier_racecheck_probe
//   V
#include <cstdio>
#include <cstdlib>
#include <cuda/barrier>

__device__ int g_sum;

__device__ inline unsigned smem(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__global__ void handoff(int variant) {
  __shared__ int data[32];
  __shared__ std::uint64_t raw;
#pragma nv_diag_suppress static_var_with_dynamic_init
  __shared__ cuda::barrier<cuda::thread_scope_block> bar;
  const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x < 32) data[threadIdx.x] = static_cast<int>(threadIdx.x) + 1;  // for 9 and 10
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem(&raw)),
                 "r"(variant == 5 ? 33 : 1)
                 : "memory");
    init(&bar, variant == 2 ? 64 : variant == 4 ? 33 : 1);
  }
  __syncthreads();
  if (variant == 9 || variant == 10) {
    // data was written before the set-up barrier: warp 1 reads it, then warp 0 overwrites it.
    if (warp == 1) {
      atomicAdd(&g_sum, data[lane]);
      if (variant == 10) asm volatile("bar.sync 1, 32;" ::: "memory");
      asm volatile("bar.arrive 3, 64;" ::: "memory");
    } else {
      asm volatile("bar.sync 3, 64;" ::: "memory");
      data[lane] = 0;
    }
    return;
  }
  if (warp == 0) {  // the producer's writes
    if (variant == 7) {
      asm volatile("st.relaxed.cta.shared.b32 [%0], %1;" ::"r"(smem(&data[lane])),
                   "r"(static_cast<int>(lane) + 1)
                   : "memory");
    } else {
      data[lane] = static_cast<int>(lane) + 1;
    }
  }
  if (variant == 0 || variant == 5 || variant == 7 || variant == 8) {
    if (warp == 0) {
      __syncwarp();
      if (lane == 0) {
        asm volatile(
            "{\n\t.reg .b64 st;\n\tmbarrier.arrive.shared::cta.b64 st, [%0];\n\t}" ::"r"(smem(&raw))
            : "memory");
      }
    } else {
      if (variant == 5) {
        asm volatile(
            "{\n\t.reg .b64 st;\n\tmbarrier.arrive.shared::cta.b64 st, [%0];\n\t}" ::"r"(smem(&raw))
            : "memory");
      }
      unsigned done = 0;
      while (done == 0) {
        asm volatile(
            "{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], "
            "0;\n\tselp.u32 "
            "%0, 1, 0, p;\n\t}"
            : "=r"(done)
            : "r"(smem(&raw))
            : "memory");
      }
    }
  } else if (variant == 1) {
    if (warp == 0) {
      __syncwarp();
      if (lane == 0) (void)bar.arrive();
    } else {
      bar.wait_parity(false);
    }
  } else if (variant == 2) {
    bar.arrive_and_wait();
  } else if (variant == 6) {
    if (warp == 0) {
      asm volatile("bar.arrive 2, 64;" ::: "memory");
    } else {
      asm volatile("bar.sync 2, 64;" ::: "memory");
    }
  } else if (variant == 4) {
    if (warp == 0) {
      __syncwarp();
      if (lane == 0) (void)bar.arrive();
    } else {
      bar.arrive_and_wait();
    }
  } else {
    __syncthreads();
  }
  if (warp == 1) {  // the consumer's reads
    int v;
    if (variant == 8) {
      asm volatile("ld.relaxed.cta.shared.b32 %0, [%1];"
                   : "=r"(v)
                   : "r"(smem(&data[lane]))
                   : "memory");
    } else {
      v = data[lane];
    }
    atomicAdd(&g_sum, v);
  }
}

int main(int argc, char** argv) {
  const int variant = argc > 1 ? std::atoi(argv[1]) : 0;
  handoff<<<1, 64>>>(variant);
  int sum = 0;
  const cudaError_t e = cudaMemcpyFromSymbol(&sum, g_sum, sizeof sum);
  std::printf("variant %d: sum %d (expect 528), %s\n", variant, sum, cudaGetErrorString(e));
  return e == cudaSuccess && sum == 528 ? 0 : 1;
}
