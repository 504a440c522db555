// Where the tiled Cholesky's time goes (issue 28, decision 018): each tile body timed inside
// its kernel (globaltimer around the body, one block of 128 task threads, or of 64 for the
// shared-memory paths), checked against a host reference; then the whole tiled factor at
// n = 1024 and 2048 with these bodies as plain kernels, one launch per panel step (POTRF, the
// panel's TRSMs, its updates) captured in a CUDA graph: the factor with the pool's host round
// trips replaced by kernel boundaries. Standalone (headers only):
//   nvcc -O3 -std=c++20 -gencode=arch=compute_90,code=sm_90 -Iinclude -Iapps/gpu \
//     lab/probes/cholesky_tiles_probe.cu -o /tmp/ctp && /tmp/ctp
//   /tmp/ctp carveout 66048 -1 72 100   # the bodies at the pool's shared size, per carveout
//   /tmp/ctp parts4 [shared bytes]       # CholeskyPool's four-part POTRF and TRSM, 256 threads
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cholesky_tiles.hpp"
#include "cuda_check.cuh"

using namespace apps::gpu;
constexpr int kN = CholeskyTile::kTile;

// ---- timing ------------------------------------------------------------------------------

__device__ __forceinline__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// ns[0]: the body's time; ns[1]: the SM cycles over it (their ratio is the SM clock).
template <class T>
__global__ void timed_body(typename T::Payload p, unsigned long long* ns) {
  extern __shared__ unsigned char smem[];
  weft::gpu::BlockContext ctx(static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x),
                              static_cast<int>(blockIdx.x), smem);
  __syncthreads();
  const unsigned long long t0 = now_ns();
  const long long c0 = clock64();
  T::run(p, ctx);
  __syncthreads();
  if (threadIdx.x == 0) {
    ns[0] = now_ns() - t0;
    ns[1] = static_cast<unsigned long long>(clock64() - c0);
  }
}

// Keeps every SM busy for about `ns` nanoseconds, so that the GPU leaves its idle clock
// before a timed body (an idle H100 runs its SMs at a fraction of their boost clock).
__global__ void busy(unsigned long long ns, int* sink) {
  const unsigned long long t0 = now_ns();
  float x = threadIdx.x;
  while (now_ns() - t0 < ns) x = x * 0.999f + 1.0f;
  if (x == -1.0f) *sink = 1;
}
bool g_warm = true;
int* g_sink = nullptr;
void warm_up() {
  if (g_warm) busy<<<132 * 4, 256>>>(3000000ull, g_sink);
}

template <class T>
__global__ void batch_body(const typename T::Payload* ps) {
  extern __shared__ unsigned char smem[];
  typename T::Payload p = ps[blockIdx.x];
  T::run(p, weft::gpu::BlockContext(static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x),
                                    static_cast<int>(blockIdx.x), smem));
}

// The "carveout" mode (decision 018, third round): every timed body asks for at least the
// applications' pool's shared memory per block (g_min_shared) and the SM's split between shared
// memory and L1 is set to g_carveout percent of the most shared memory (-1: the driver's
// choice), to tell whether the L1 that a pool of two such blocks an SM leaves slows the bodies.
std::size_t g_min_shared = 0;
int g_carveout = -1;

template <class T>
std::size_t shared_bytes() {
  return std::max<std::size_t>(T::kSharedBytes, g_min_shared);
}

template <class T>
void allow_shared() {
  CHECK(cudaFuncSetAttribute(timed_body<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(shared_bytes<T>())));
  CHECK(cudaFuncSetAttribute(batch_body<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(shared_bytes<T>())));
  CHECK(cudaFuncSetAttribute(timed_body<T>, cudaFuncAttributePreferredSharedMemoryCarveout,
                             g_carveout));
}

std::vector<double> spd(int n) {
  std::vector<double> a(static_cast<std::size_t>(n) * n);
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < n; ++i)
      a[i + static_cast<std::size_t>(j) * n] = i == j ? n + 1.0 : 1.0 / (1.0 + std::abs(i - j));
  return a;
}

// Host reference of the 2 x 2-tile problem: L00 = chol(A00), L10 = A10 L00^-T.
void reference(std::vector<double>& a, int n) {
  for (int j = 0; j < kN; ++j) {
    double d = a[j + j * n];
    for (int q = 0; q < j; ++q) d -= a[j + q * n] * a[j + q * n];
    d = std::sqrt(d);
    a[j + j * n] = d;
    for (int i = j + 1; i < 2 * kN; ++i) {
      double s = a[i + j * n];
      for (int q = 0; q < j; ++q) s -= a[i + q * n] * a[j + q * n];
      a[i + j * n] = s / d;
    }
  }
}

double max_diff(const std::vector<double>& got, const std::vector<double>& want, int n, int r0,
                int c0) {
  double m = 0;
  for (int c = c0; c < c0 + kN; ++c)
    for (int r = r0; r < r0 + kN; ++r)
      if (r >= c || r0 != c0) m = std::max(m, std::abs(got[r + c * n] - want[r + c * n]));
  return m;
}

template <class T, class Make>
void time_tile(const char* name, int threads, Make make, int r0, int c0, bool potrf_first) {
  constexpr int n = 2 * kN;
  std::vector<double> a = spd(n), want = a;
  reference(want, n);
  std::vector<double> start = a;
  if (!potrf_first) {  // TRSM reads the factored L00
    for (int c = 0; c < kN; ++c)
      for (int r = 0; r < kN; ++r) start[r + c * n] = want[r + c * n];
  }
  double* d = nullptr;
  unsigned long long* ns = nullptr;
  CHECK(cudaMalloc(&d, sizeof(double) * n * n));
  CHECK(cudaMalloc(&ns, 2 * sizeof(unsigned long long)));
  allow_shared<T>();
  std::vector<double> us, mhz;
  std::vector<double> got(start.size());
  for (int rep = 0; rep < 31; ++rep) {
    CHECK(cudaMemcpy(d, start.data(), sizeof(double) * n * n, cudaMemcpyHostToDevice));
    warm_up();
    timed_body<T><<<1, threads, shared_bytes<T>()>>>(make(d, n), ns);
    CHECK(cudaDeviceSynchronize());
    unsigned long long t[2] = {};
    CHECK(cudaMemcpy(t, ns, sizeof t, cudaMemcpyDeviceToHost));
    if (rep > 0) us.push_back(t[0] * 1e-3), mhz.push_back(1e3 * t[1] / t[0]);
  }
  CHECK(cudaMemcpy(got.data(), d, sizeof(double) * n * n, cudaMemcpyDeviceToHost));
  std::sort(us.begin(), us.end());
  std::sort(mhz.begin(), mhz.end());
  std::printf("| %-24s | %4d | %8.2f | %8.2f | %6.0f | %9.2e |\n", name, threads, us[us.size() / 2],
              us.front(), mhz[mhz.size() / 2], max_diff(got, want, n, r0, c0));
  cudaFree(d);
  cudaFree(ns);
}

// ---- the whole factor as kernels ---------------------------------------------------------

template <class Potrf, class Trsm>
double factor_us(int n, bool check) {
  const int nt = n / kN;
  std::vector<double> a = spd(n);
  double* d = nullptr;
  CHECK(cudaMalloc(&d, sizeof(double) * n * n));
  CHECK(cudaMemcpy(d, a.data(), sizeof(double) * n * n, cudaMemcpyHostToDevice));
  std::vector<PotrfTile::Payload> potrf;
  std::vector<std::vector<TrsmTile::Payload>> trsm(nt);
  std::vector<std::vector<UpdateTile::Payload>> update(nt);
  for (int k = 0; k < nt; ++k) {
    potrf.push_back({d, n, k, 0});
    for (int i = k + 1; i < nt; ++i) trsm[k].push_back({d, n, i, k});
    for (int j = k + 1; j < nt; ++j)
      for (int i = j; i < nt; ++i) update[k].push_back({d, n, i, j, k});
  }
  PotrfTile::Payload* dp;
  TrsmTile::Payload* dt;
  UpdateTile::Payload* du;
  std::size_t tn = 0, un = 0;
  for (int k = 0; k < nt; ++k) tn += trsm[k].size(), un += update[k].size();
  CHECK(cudaMalloc(&dp, sizeof(PotrfTile::Payload) * nt));
  CHECK(cudaMalloc(&dt, sizeof(TrsmTile::Payload) * std::max<std::size_t>(tn, 1)));
  CHECK(cudaMalloc(&du, sizeof(UpdateTile::Payload) * std::max<std::size_t>(un, 1)));
  CHECK(cudaMemcpy(dp, potrf.data(), sizeof(PotrfTile::Payload) * nt, cudaMemcpyHostToDevice));
  std::vector<std::size_t> toff(nt), uoff(nt);
  std::size_t o1 = 0, o2 = 0;
  for (int k = 0; k < nt; ++k) {
    toff[k] = o1;
    uoff[k] = o2;
    if (!trsm[k].empty())
      CHECK(cudaMemcpy(dt + o1, trsm[k].data(), sizeof(TrsmTile::Payload) * trsm[k].size(),
                       cudaMemcpyHostToDevice));
    if (!update[k].empty())
      CHECK(cudaMemcpy(du + o2, update[k].data(), sizeof(UpdateTile::Payload) * update[k].size(),
                       cudaMemcpyHostToDevice));
    o1 += trsm[k].size();
    o2 += update[k].size();
  }
  allow_shared<Potrf>();
  allow_shared<Trsm>();
  allow_shared<UpdateTile>();
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  cudaGraph_t graph;
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  for (int k = 0; k < nt; ++k) {
    batch_body<Potrf><<<1, 128, shared_bytes<Potrf>(), s>>>(dp + k);
    if (!trsm[k].empty())
      batch_body<Trsm><<<trsm[k].size(), 128, shared_bytes<Trsm>(), s>>>(dt + toff[k]);
    if (!update[k].empty())
      batch_body<UpdateTile>
          <<<update[k].size(), 128, shared_bytes<UpdateTile>(), s>>>(du + uoff[k]);
  }
  CHECK(cudaStreamEndCapture(s, &graph));
  cudaGraphExec_t exec;
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  std::vector<double> us;
  for (int rep = 0; rep < 11; ++rep) {
    CHECK(cudaMemcpyAsync(d, a.data(), sizeof(double) * n * n, cudaMemcpyHostToDevice, s));
    if (g_warm) busy<<<132 * 4, 256, 0, s>>>(3000000ull, g_sink);
    cudaEventRecord(e0, s);
    CHECK(cudaGraphLaunch(exec, s));
    cudaEventRecord(e1, s);
    CHECK(cudaStreamSynchronize(s));
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    if (rep > 0) us.push_back(ms * 1e3);
  }
  double worst = 0;
  if (check) {  // residual of the first panel column against the host's factor of it
    std::vector<double> got(a.size());
    CHECK(cudaMemcpy(got.data(), d, sizeof(double) * n * n, cudaMemcpyDeviceToHost));
    // L L^T at a few entries against A.
    for (int probe = 0; probe < 64; ++probe) {
      const int i = (probe * 997) % n, j = std::min(i, (probe * 131) % n);
      double s2 = 0;
      for (int q = 0; q <= j; ++q) s2 += got[i + q * n] * got[j + q * n];
      worst = std::max(worst, std::abs(s2 - a[i + j * n]) / std::abs(a[j + j * n]));
    }
  }
  std::sort(us.begin(), us.end());
  std::printf("| factor n=%-5d | %9.1f us | %9.1f min | rel err %.1e |\n", n, us[us.size() / 2],
              us.front(), worst);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaFree(d);
  cudaFree(dp);
  cudaFree(dt);
  cudaFree(du);
  cudaStreamDestroy(s);
  return us[us.size() / 2];
}

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  g_warm = !(argc > 1 && std::string(argv[1]) == "cold");
  const bool carveout_mode = argc > 1 && std::string(argv[1]) == "carveout";
  CHECK(cudaMalloc(&g_sink, sizeof(int)));
  std::printf("GPU warmed before each timing: %s\n", g_warm ? "yes" : "no");
  auto potrf = [](double* d, int n) { return PotrfTile::Payload{d, n, 0, 0}; };
  auto trsm = [](double* d, int n) { return TrsmTile::Payload{d, n, 1, 0}; };
  auto update = [](double* d, int n) { return UpdateTile::Payload{d, n, 1, 1, 0}; };
  std::printf(
      "| body | threads | median us | min us | SM MHz | max diff |\n"
      "|---|---:|---:|---:|---:|---:|\n");
  if (argc > 1 && std::string(argv[1]) == "parts4") {  // CholeskyPool's four-part bodies
    auto potrf4 = [](double* d, int n) { return PotrfTileT<4>::Payload{d, n, 0, 0}; };
    auto trsm4 = [](double* d, int n) { return TrsmTileT<4>::Payload{d, n, 1, 0}; };
    g_min_shared = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 0;
    time_tile<PotrfTileT<4>>("potrf, 4 parts", 256, potrf4, 0, 0, true);
    time_tile<TrsmTileT<4>>("trsm, 4 parts", 256, trsm4, kN, 0, false);
    time_tile<PotrfTile>("potrf (128 threads)", 128, potrf, 0, 0, true);
    time_tile<TrsmTile>("trsm (128 threads)", 128, trsm, kN, 0, false);
    time_tile<UpdateTile>("update (syrk)", 128, update, kN, kN, false);
    return 0;
  }
  if (carveout_mode) {  // usage: ctp carveout <pool shared bytes a block> <percent>...
    g_min_shared = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 0;
    for (int i = 3; i < argc; ++i) {
      g_carveout = std::atoi(argv[i]);
      std::printf("| carveout %d%%, %zu bytes a block | | | | | |\n", g_carveout, g_min_shared);
      time_tile<PotrfTile>("potrf (128 threads)", 128, potrf, 0, 0, true);
      time_tile<TrsmTile>("trsm (128 threads)", 128, trsm, kN, 0, false);
      time_tile<UpdateTile>("update (syrk)", 128, update, kN, kN, false);
    }
    return 0;
  }
  time_tile<PotrfTile>("potrf (128 threads)", 128, potrf, 0, 0, true);
  time_tile<PotrfTile>("potrf (shared)", 64, potrf, 0, 0, true);
  time_tile<TrsmTile>("trsm (128 threads)", 128, trsm, kN, 0, false);
  time_tile<TrsmTile>("trsm (shared)", 64, trsm, kN, 0, false);
  // The update's numbers are not checked here (the factor below covers it).
  time_tile<UpdateTile>("update (syrk)", 128, update, kN, kN, false);
  for (int n : {1024, 2048}) {
    factor_us<PotrfTile, TrsmTile>(n, true);
  }
  return 0;
}
