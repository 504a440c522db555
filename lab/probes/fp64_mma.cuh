// The FP64 tensor-core instructions and the 16-byte asynchronous copy the lab's GEMM-body
// probes share (dmma_shape_probe.cu, big_tile_probe.cu, big_update_block.cuh; decision 040).
// d += a b on one fragment, in the PTX ISA's layouts (lane l: group g = l / 4, q = l % 4):
//   m8n8k4 (sm_80): a (g, q), b (q, g), d (g, 2 q + h), h = 0, 1
//   m16n8k4, k8, k16 (sm_90): a_r (g + 8 (r % 2), q + 4 (r / 2)), b_r (q + 4 r, g),
//                             d_r (g + 8 (r / 2), 2 q + r % 2)
#pragma once

namespace lab {

#if defined(__CUDACC__)
/// 16 bytes from global to shared memory, asynchronously (cp.async.cg: past L1).
__device__ __forceinline__ void copy16(double* to, const double* from) {
  const auto shared = static_cast<unsigned>(__cvta_generic_to_shared(to));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(shared), "l"(from));
}

__device__ __forceinline__ void mma_m8n8k4(double (&d)[2], double a, double b) {
  asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0,%1}, {%2}, {%3}, {%0,%1};"
               : "+d"(d[0]), "+d"(d[1])
               : "d"(a), "d"(b));
}

__device__ __forceinline__ void mma_m16n8k4(double (&d)[4], const double (&a)[2], double b) {
  asm volatile(
      "mma.sync.aligned.m16n8k4.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5}, {%6}, "
      "{%0,%1,%2,%3};"
      : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
      : "d"(a[0]), "d"(a[1]), "d"(b));
}

__device__ __forceinline__ void mma_m16n8k8(double (&d)[4], const double (&a)[4],
                                            const double (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
      : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(b[0]), "d"(b[1]));
}

__device__ __forceinline__ void mma_m16n8k16(double (&d)[4], const double (&a)[8],
                                             const double (&b)[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, "
      "{%4,%5,%6,%7,%8,%9,%10,%11}, {%12,%13,%14,%15}, {%0,%1,%2,%3};"
      : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
      : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(a[4]), "d"(a[5]), "d"(a[6]), "d"(a[7]),
        "d"(b[0]), "d"(b[1]), "d"(b[2]), "d"(b[3]));
}
#endif

}  // namespace lab
