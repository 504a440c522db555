// The GPU side of the splitter's applications (split_cuda.hpp).
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "split_cuda.hpp"

namespace apps::split::cuda {

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    throw std::runtime_error(std::string("apps::split: ") + what + ": " + cudaGetErrorString(e));
  }
}
void check(cusolverStatus_t e, const char* what) {
  if (e != CUSOLVER_STATUS_SUCCESS) {
    throw std::runtime_error(std::string("apps::split: ") + what + ": cuSOLVER status " +
                             std::to_string(static_cast<int>(e)));
  }
}
void check(cublasStatus_t e, const char* what) {
  if (e != CUBLAS_STATUS_SUCCESS) {
    throw std::runtime_error(std::string("apps::split: ") + what + ": cuBLAS status " +
                             std::to_string(static_cast<int>(e)));
  }
}

// A device buffer that only grows.
struct Buffer {
  void* p = nullptr;
  std::size_t bytes = 0;
  template <class T>
  T* get(std::size_t count) {
    const std::size_t need = count * sizeof(T);
    if (need > bytes) {
      cudaFree(p);
      p = nullptr;
      bytes = 0;
      check(cudaMalloc(&p, std::max<std::size_t>(need, 1)), "cudaMalloc");
      bytes = need;
    }
    return static_cast<T*>(p);
  }
  ~Buffer() { cudaFree(p); }
};

__global__ void triad_kernel(double* a, const double* b, const double* c, double s,
                             std::int64_t n) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    a[i] = b[i] + s * c[i];
  }
}

// One warp per row; offsets relative to `base` (the range's first entry).
__global__ void spmv_kernel(const std::int64_t* row_start, std::int64_t base, const int* col,
                            const float* val, const float* x, float* y, std::int64_t rows) {
  const std::int64_t warp = (blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * blockDim.x / 32;
  for (std::int64_t r = warp; r < rows; r += warps) {
    float sum = 0.0f;
    for (std::int64_t j = row_start[r] - base + lane; j < row_start[r + 1] - base; j += 32) {
      sum += val[j] * x[col[j]];
    }
    for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (lane == 0) y[r] = sum;
  }
}

// The panel's row swaps on columns of a block (rows from the panel's first, leading dimension
// ld), in order: one thread per column.
__global__ void swap_rows_kernel(double* a, int ld, std::int64_t cols, const int* ipiv, int nb) {
  const std::int64_t c = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (c >= cols) return;
  double* col = a + c * ld;
  for (int i = 0; i < nb; ++i) {
    const int p = ipiv[i];
    if (p != i) {
      const double t = col[i];
      col[i] = col[p];
      col[p] = t;
    }
  }
}

constexpr int kLanes = 2;  // streams a share is pipelined over

}  // namespace

struct Workspace {
  int device = 0;
  cudaStream_t lane[kLanes] = {};
  cudaEvent_t start = nullptr, lane_done[kLanes] = {};
  cublasHandle_t blas = nullptr;
  cusolverDnHandle_t solver = nullptr;
  // LU: two panel slots (with look-ahead, the next panel is factored into one while the update
  // reads the other), each with its pivots (then getrf's info) and where its L starts and its
  // leading dimension; cuSOLVER's workspace.
  Buffer panel[2], pivots[2], solver_work;
  const double* panel_l[2] = {};
  int panel_ld[2] = {};
  // LU look-ahead: a stream and cuBLAS handle of its own, used by the thread that factors the
  // next panel, and an event it sleeps on (the cores are busy with their part meanwhile).
  cudaStream_t ahead = nullptr;
  cublasHandle_t ahead_blas = nullptr;
  cudaEvent_t panel_done = nullptr;
  Buffer shared;         // what every chunk reads (B, x)
  Buffer in[kLanes][3];  // per lane: inputs of a chunk
  Buffer out[kLanes];    // per lane: the chunk's output

  // The lanes start after what `s` holds; `s` goes on after both lanes.
  void fork(cudaStream_t s) {
    check(cudaEventRecord(start, s), "cudaEventRecord");
    for (auto& l : lane) check(cudaStreamWaitEvent(l, start, 0), "cudaStreamWaitEvent");
  }
  void join(cudaStream_t s) {
    for (int i = 0; i < kLanes; ++i) {
      check(cudaEventRecord(lane_done[i], lane[i]), "cudaEventRecord");
      check(cudaStreamWaitEvent(s, lane_done[i], 0), "cudaStreamWaitEvent");
    }
  }
};

namespace {

// Forks the workspace's lanes off `s` and joins them back; if a call between throws, the
// destructor waits for what the lanes were given, so that no copy into the caller's memory is
// still running when the error reaches the caller.
class Lanes {
 public:
  Lanes(Workspace& w, cudaStream_t s) : w_(w), s_(s) { w_.fork(s_); }
  ~Lanes() {
    if (joined_) return;
    for (auto& l : w_.lane) cudaStreamSynchronize(l);
  }
  Lanes(const Lanes&) = delete;
  Lanes& operator=(const Lanes&) = delete;
  void join() {
    w_.join(s_);
    joined_ = true;
  }

 private:
  Workspace& w_;
  cudaStream_t s_;
  bool joined_ = false;
};

}  // namespace

void WorkspaceDeleter::operator()(Workspace* w) const noexcept {
  cudaSetDevice(w->device);
  for (auto& l : w->lane) cudaStreamSynchronize(l);
  if (w->ahead != nullptr) cudaStreamSynchronize(w->ahead);
  if (w->blas != nullptr) cublasDestroy(w->blas);
  if (w->ahead_blas != nullptr) cublasDestroy(w->ahead_blas);
  if (w->solver != nullptr) cusolverDnDestroy(w->solver);
  for (int i = 0; i < kLanes; ++i) {
    cudaEventDestroy(w->lane_done[i]);
    cudaStreamDestroy(w->lane[i]);
  }
  cudaEventDestroy(w->start);
  if (w->panel_done != nullptr) cudaEventDestroy(w->panel_done);
  if (w->ahead != nullptr) cudaStreamDestroy(w->ahead);
  delete w;
}

WorkspacePtr make_workspace(int device) {
  check(cudaSetDevice(device), "cudaSetDevice");
  WorkspacePtr w(new Workspace);
  w->device = device;
  for (int i = 0; i < kLanes; ++i) {
    check(cudaStreamCreateWithFlags(&w->lane[i], cudaStreamNonBlocking), "cudaStreamCreate");
    check(cudaEventCreateWithFlags(&w->lane_done[i], cudaEventDisableTiming), "cudaEventCreate");
  }
  check(cudaEventCreateWithFlags(&w->start, cudaEventDisableTiming), "cudaEventCreate");
  check(cudaStreamCreateWithFlags(&w->ahead, cudaStreamNonBlocking), "cudaStreamCreate");
  check(cudaEventCreateWithFlags(&w->panel_done, cudaEventDisableTiming | cudaEventBlockingSync),
        "cudaEventCreate");
  check(cublasCreate(&w->blas), "cublasCreate");
  check(cublasCreate(&w->ahead_blas), "cublasCreate");
  return w;
}

void* pinned_alloc(std::size_t bytes) noexcept {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    return nullptr;
  }
  void* p = nullptr;
  if (cudaMallocHost(&p, bytes) != cudaSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  return p;
}

void pinned_free(void* p) noexcept { cudaFreeHost(p); }

void gemm_rows(Workspace& w, cudaStream_t s, const double* a, const double* b, double* c,
               std::int64_t rows, int n, int k) {
  constexpr std::int64_t kChunk = 2048;  // rows per chunk: copies of one overlap another's GEMM
  double* db = w.shared.get<double>(static_cast<std::size_t>(k) * n);
  check(cudaMemcpyAsync(db, b, sizeof(double) * k * n, cudaMemcpyHostToDevice, s), "copy B in");
  Lanes lanes(w, s);
  const double one = 1.0, zero = 0.0;
  for (std::int64_t first = 0, i = 0; first < rows; first += kChunk, ++i) {
    const int l = static_cast<int>(i % kLanes);
    const std::int64_t count = std::min(kChunk, rows - first);
    double* da = w.in[l][0].get<double>(static_cast<std::size_t>(kChunk) * k);
    double* dc = w.out[l].get<double>(static_cast<std::size_t>(kChunk) * n);
    check(cudaMemcpyAsync(da, a + first * k, sizeof(double) * count * k, cudaMemcpyHostToDevice,
                          w.lane[l]),
          "copy A in");
    check(cublasSetStream(w.blas, w.lane[l]), "cublasSetStream");
    // Row-major C = A B is column-major C^T = B^T A^T.
    check(cublasDgemm(w.blas, CUBLAS_OP_N, CUBLAS_OP_N, n, static_cast<int>(count), k, &one, db, n,
                      da, k, &zero, dc, n),
          "cublasDgemm");
    check(cudaMemcpyAsync(c + first * n, dc, sizeof(double) * count * n, cudaMemcpyDeviceToHost,
                          w.lane[l]),
          "copy C out");
  }
  lanes.join();
}

void triad(Workspace& w, cudaStream_t s, double* a, const double* b, const double* c, double scalar,
           std::int64_t count) {
  constexpr std::int64_t kChunk = 4 << 20;  // elements per chunk (32 MiB per array)
  Lanes lanes(w, s);
  for (std::int64_t first = 0, i = 0; first < count; first += kChunk, ++i) {
    const int l = static_cast<int>(i % kLanes);
    const std::int64_t m = std::min(kChunk, count - first);
    double* db = w.in[l][0].get<double>(kChunk);
    double* dc = w.in[l][1].get<double>(kChunk);
    double* da = w.out[l].get<double>(kChunk);
    check(cudaMemcpyAsync(db, b + first, sizeof(double) * m, cudaMemcpyHostToDevice, w.lane[l]),
          "copy b in");
    check(cudaMemcpyAsync(dc, c + first, sizeof(double) * m, cudaMemcpyHostToDevice, w.lane[l]),
          "copy c in");
    triad_kernel<<<1024, 256, 0, w.lane[l]>>>(da, db, dc, scalar, m);
    check(cudaGetLastError(), "triad kernel");
    check(cudaMemcpyAsync(a + first, da, sizeof(double) * m, cudaMemcpyDeviceToHost, w.lane[l]),
          "copy a out");
  }
  lanes.join();
}

void spmv(Workspace& w, cudaStream_t s, const std::int64_t* row_start, const int* col,
          const float* val, const float* x, int x_len, float* y, std::int64_t rows) {
  const std::int64_t base = row_start[0];
  const std::int64_t entries = row_start[rows] - base;
  float* dx = w.shared.get<float>(static_cast<std::size_t>(x_len));
  auto* drow = w.in[0][0].get<std::int64_t>(static_cast<std::size_t>(rows + 1));
  int* dcol = w.in[0][1].get<int>(static_cast<std::size_t>(entries));
  float* dval = w.in[0][2].get<float>(static_cast<std::size_t>(entries));
  float* dy = w.out[0].get<float>(static_cast<std::size_t>(rows));
  check(cudaMemcpyAsync(dx, x, sizeof(float) * x_len, cudaMemcpyHostToDevice, s), "copy x in");
  check(cudaMemcpyAsync(drow, row_start, sizeof(std::int64_t) * (rows + 1), cudaMemcpyHostToDevice,
                        s),
        "copy rows in");
  check(cudaMemcpyAsync(dcol, col + base, sizeof(int) * entries, cudaMemcpyHostToDevice, s),
        "copy columns in");
  check(cudaMemcpyAsync(dval, val + base, sizeof(float) * entries, cudaMemcpyHostToDevice, s),
        "copy values in");
  spmv_kernel<<<2048, 256, 0, s>>>(drow, base, dcol, dval, dx, dy, rows);
  check(cudaGetLastError(), "spmv kernel");
  check(cudaMemcpyAsync(y, dy, sizeof(float) * rows, cudaMemcpyDeviceToHost, s), "copy y out");
}

namespace {

// Enqueues on `s` the factoring of the m x nb panel at `dp` (device memory, leading dimension
// ld) with cusolverDnDgetrf, its pivots and info into slot `slot`'s buffer.
void factor_panel_in_place(Workspace& w, cudaStream_t s, double* dp, int ld, int m, int nb,
                           int slot) {
  if (w.solver == nullptr) check(cusolverDnCreate(&w.solver), "cusolverDnCreate");
  check(cusolverDnSetStream(w.solver, s), "cusolverDnSetStream");
  int* dpiv = w.pivots[slot].get<int>(static_cast<std::size_t>(nb) + 1);  // pivots, then info
  int lwork = 0;
  check(cusolverDnDgetrf_bufferSize(w.solver, m, nb, dp, ld, &lwork), "getrf buffer size");
  double* work = w.solver_work.get<double>(static_cast<std::size_t>(lwork) + 1);
  check(cusolverDnDgetrf(w.solver, m, nb, dp, ld, work, dpiv, dpiv + nb), "cusolverDnDgetrf");
}

// Waits for what `s` holds: spinning (cudaStreamSynchronize) on the thread that drives the
// regions, where the wait is short and on the critical path; sleeping on the look-ahead's
// thread, which waits beside the cores' part.
void wait_for(Workspace& w, cudaStream_t s, bool sleeping) {
  if (!sleeping) return check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  check(cudaEventRecord(w.panel_done, s), "cudaEventRecord");
  check(cudaEventSynchronize(w.panel_done), "cudaEventSynchronize");
}

// After factor_panel_in_place and the caller's copies out: waits for `s`, checks the info,
// and puts the pivots 0-based into `ipiv` and back on the device. A sleeping wait comes first:
// a copy into pageable memory returns only once it is done, so it would wait for everything
// before it on `s` in the runtime's own way (spinning).
void finish_panel(Workspace& w, cudaStream_t s, int nb, int slot, int* ipiv, bool sleeping) {
  int* dpiv = w.pivots[slot].get<int>(static_cast<std::size_t>(nb) + 1);
  std::vector<int> piv(static_cast<std::size_t>(nb) + 1);
  if (sleeping) wait_for(w, s, sleeping);
  check(cudaMemcpyAsync(piv.data(), dpiv, sizeof(int) * (nb + 1), cudaMemcpyDeviceToHost, s),
        "copy the pivots out");
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  if (piv[static_cast<std::size_t>(nb)] != 0) {
    throw std::runtime_error("apps::split: the LU panel is singular (getrf info " +
                             std::to_string(piv[static_cast<std::size_t>(nb)]) + ")");
  }
  for (int i = 0; i < nb; ++i) ipiv[i] = piv[static_cast<std::size_t>(i)] - 1;  // 1-based in
  // The pivots as lu_update's swap kernel reads them: 0-based, on the device.
  check(cudaMemcpyAsync(dpiv, ipiv, sizeof(int) * nb, cudaMemcpyHostToDevice, s), "pivots in");
  wait_for(w, s, sleeping);
}

// The panel's row swaps, U12 = L11^-1 A12 and A22 -= L21 U12 on `cols` columns at `dc` (device
// memory, m rows from the panel's first, leading dimension m), with slot `slot`'s panel.
void update_block(Workspace& w, cublasHandle_t blas, cudaStream_t s, double* dc, int m, int nb,
                  std::int64_t cols, int slot) {
  const double* dl = w.panel_l[slot];
  const int ldl = w.panel_ld[slot];
  const int* dpiv = w.pivots[slot].get<int>(static_cast<std::size_t>(nb) + 1);
  const double one = 1.0, minus_one = -1.0;
  swap_rows_kernel<<<static_cast<unsigned>((cols + 127) / 128), 128, 0, s>>>(dc, m, cols, dpiv, nb);
  check(cudaGetLastError(), "swap kernel");
  check(cublasSetStream(blas, s), "cublasSetStream");
  check(cublasDtrsm(blas, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, CUBLAS_DIAG_UNIT,
                    nb, static_cast<int>(cols), &one, dl, ldl, dc, m),
        "cublasDtrsm");
  if (m > nb) {
    check(cublasDgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, m - nb, static_cast<int>(cols), nb,
                      &minus_one, dl + nb, ldl, dc, m, &one, dc + nb, m),
          "cublasDgemm");
  }
}

}  // namespace

void lu_panel(Workspace& w, cudaStream_t s, double* panel, int lda, int m, int nb, int slot,
              int* ipiv) {
  double* dp = w.panel[slot].get<double>(static_cast<std::size_t>(m) * nb);
  w.panel_l[slot] = dp;
  w.panel_ld[slot] = m;
  check(cudaMemcpy2DAsync(dp, sizeof(double) * m, panel, sizeof(double) * lda, sizeof(double) * m,
                          nb, cudaMemcpyHostToDevice, s),
        "copy the panel in");
  factor_panel_in_place(w, s, dp, m, m, nb, slot);
  check(cudaMemcpy2DAsync(panel, sizeof(double) * lda, dp, sizeof(double) * m, sizeof(double) * m,
                          nb, cudaMemcpyDeviceToHost, s),
        "copy the panel out");
  finish_panel(w, s, nb, slot, ipiv, /*sleeping=*/false);
}

namespace {

void next_panel(Workspace& w, double* first_col, int lda, int m, int nb, int next_nb, int slot,
                int* next_ipiv) {
  const int next_slot = 1 - slot;
  cudaStream_t s = w.ahead;
  // The next panel's columns, rows from this panel's first: updated, then the rows below this
  // panel factored in place, then all of it copied back.
  double* dc = w.panel[next_slot].get<double>(static_cast<std::size_t>(m) * next_nb);
  check(cudaMemcpy2DAsync(dc, sizeof(double) * m, first_col, sizeof(double) * lda,
                          sizeof(double) * m, next_nb, cudaMemcpyHostToDevice, s),
        "copy the next panel in");
  update_block(w, w.ahead_blas, s, dc, m, nb, next_nb, slot);
  w.panel_l[next_slot] = dc + nb;
  w.panel_ld[next_slot] = m;
  factor_panel_in_place(w, s, dc + nb, m, m - nb, next_nb, next_slot);
  check(cudaMemcpy2DAsync(first_col, sizeof(double) * lda, dc, sizeof(double) * m,
                          sizeof(double) * m, next_nb, cudaMemcpyDeviceToHost, s),
        "copy the next panel out");
  finish_panel(w, s, next_nb, next_slot, next_ipiv, /*sleeping=*/true);
}

}  // namespace

void lu_next_panel(Workspace& w, double* first_col, int lda, int m, int nb, int next_nb, int slot,
                   int* next_ipiv) {
  check(cudaSetDevice(w.device), "cudaSetDevice");
  try {
    next_panel(w, first_col, lda, m, nb, next_nb, slot, next_ipiv);
  } catch (...) {
    // No copy into the caller's matrix may still run once the error reaches it.
    cudaStreamSynchronize(w.ahead);
    throw;
  }
}

void lu_update(Workspace& w, cudaStream_t s, double* first_col, int lda, int m, int nb, int slot,
               std::int64_t cols) {
  constexpr std::int64_t kChunk = 512;  // columns per chunk
  Lanes lanes(w, s);
  for (std::int64_t first = 0, i = 0; first < cols; first += kChunk, ++i) {
    const int l = static_cast<int>(i % kLanes);
    const std::int64_t count = std::min(kChunk, cols - first);
    double* dc = w.out[l].get<double>(static_cast<std::size_t>(kChunk) * m);
    double* host = first_col + first * lda;
    check(cudaMemcpy2DAsync(dc, sizeof(double) * m, host, sizeof(double) * lda, sizeof(double) * m,
                            count, cudaMemcpyHostToDevice, w.lane[l]),
          "copy columns in");
    update_block(w, w.blas, w.lane[l], dc, m, nb, count, slot);
    check(cudaMemcpy2DAsync(host, sizeof(double) * lda, dc, sizeof(double) * m, sizeof(double) * m,
                            count, cudaMemcpyDeviceToHost, w.lane[l]),
          "copy columns out");
  }
  lanes.join();
}

namespace {

// The median of five timed runs of `enqueue` on `s`, after one warm-up, in seconds.
template <class F>
double median_seconds(cudaStream_t s, F&& enqueue) {
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "cudaEventCreate");
  check(cudaEventCreate(&b), "cudaEventCreate");
  enqueue();
  std::vector<double> t;
  for (int i = 0; i < 5; ++i) {
    check(cudaEventRecord(a, s), "cudaEventRecord");
    enqueue();
    check(cudaEventRecord(b, s), "cudaEventRecord");
    check(cudaEventSynchronize(b), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
    t.push_back(ms * 1e-3);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

double gemm_local_rate(Workspace& w, const double* a, const double* b, int m, int n, int k) {
  double* da = w.in[0][0].get<double>(static_cast<std::size_t>(m) * k);
  double* db = w.shared.get<double>(static_cast<std::size_t>(k) * n);
  double* dc = w.out[0].get<double>(static_cast<std::size_t>(m) * n);
  check(cudaMemcpyAsync(da, a, sizeof(double) * m * k, cudaMemcpyHostToDevice, w.lane[0]), "copy");
  check(cudaMemcpyAsync(db, b, sizeof(double) * k * n, cudaMemcpyHostToDevice, w.lane[0]), "copy");
  check(cublasSetStream(w.blas, w.lane[0]), "cublasSetStream");
  const double one = 1.0, zero = 0.0;
  const double t = median_seconds(w.lane[0], [&] {
    check(cublasDgemm(w.blas, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, db, n, da, k, &zero, dc, n),
          "cublasDgemm");
  });
  return 2.0 * m * n * k / t;
}

double lu_update_local_rate(Workspace& w, const double* a, int lda, int m, int nb, int cols) {
  // L (m x nb) and U (nb x cols) from the matrix's first columns, C (m x cols) from the same.
  double* dl = w.in[0][0].get<double>(static_cast<std::size_t>(m) * nb);
  double* du = w.in[0][1].get<double>(static_cast<std::size_t>(nb) * cols);
  double* dc = w.out[0].get<double>(static_cast<std::size_t>(m) * cols);
  check(cudaMemcpy2DAsync(dl, sizeof(double) * m, a, sizeof(double) * lda, sizeof(double) * m, nb,
                          cudaMemcpyHostToDevice, w.lane[0]),
        "copy in");
  check(cudaMemcpy2DAsync(du, sizeof(double) * nb, a, sizeof(double) * lda, sizeof(double) * nb,
                          cols, cudaMemcpyHostToDevice, w.lane[0]),
        "copy in");
  check(cudaMemcpy2DAsync(dc, sizeof(double) * m, a, sizeof(double) * lda, sizeof(double) * m, cols,
                          cudaMemcpyHostToDevice, w.lane[0]),
        "copy in");
  check(cublasSetStream(w.blas, w.lane[0]), "cublasSetStream");
  const double one = 1.0, minus_one = -1.0;
  const double t = median_seconds(w.lane[0], [&] {
    check(cublasDgemm(w.blas, CUBLAS_OP_N, CUBLAS_OP_N, m, cols, nb, &minus_one, dl, m, du, nb,
                      &one, dc, m),
          "cublasDgemm");
  });
  return 2.0 * m * static_cast<double>(cols) * nb / t;
}

double triad_local_rate(Workspace& w, const double* b, const double* c, std::int64_t count) {
  double* db = w.in[0][0].get<double>(static_cast<std::size_t>(count));
  double* dc = w.in[0][1].get<double>(static_cast<std::size_t>(count));
  double* da = w.out[0].get<double>(static_cast<std::size_t>(count));
  check(cudaMemcpyAsync(db, b, sizeof(double) * count, cudaMemcpyHostToDevice, w.lane[0]), "copy");
  check(cudaMemcpyAsync(dc, c, sizeof(double) * count, cudaMemcpyHostToDevice, w.lane[0]), "copy");
  const double t = median_seconds(
      w.lane[0], [&] { triad_kernel<<<1024, 256, 0, w.lane[0]>>>(da, db, dc, 3.0, count); });
  return 24.0 * static_cast<double>(count) / t;
}

double spmv_local_rate(Workspace& w, const std::int64_t* row_start, const int* col,
                       const float* val, const float* x, int x_len, std::int64_t rows) {
  const std::int64_t entries = row_start[rows];
  float* dx = w.shared.get<float>(static_cast<std::size_t>(x_len));
  auto* drow = w.in[0][0].get<std::int64_t>(static_cast<std::size_t>(rows + 1));
  int* dcol = w.in[0][1].get<int>(static_cast<std::size_t>(entries));
  float* dval = w.in[0][2].get<float>(static_cast<std::size_t>(entries));
  float* dy = w.out[0].get<float>(static_cast<std::size_t>(rows));
  cudaStream_t s = w.lane[0];
  check(cudaMemcpyAsync(dx, x, sizeof(float) * x_len, cudaMemcpyHostToDevice, s), "copy x in");
  check(cudaMemcpyAsync(drow, row_start, sizeof(std::int64_t) * (rows + 1), cudaMemcpyHostToDevice,
                        s),
        "copy rows in");
  check(cudaMemcpyAsync(dcol, col, sizeof(int) * entries, cudaMemcpyHostToDevice, s), "copy in");
  check(cudaMemcpyAsync(dval, val, sizeof(float) * entries, cudaMemcpyHostToDevice, s), "copy in");
  const double t = median_seconds(
      s, [&] { spmv_kernel<<<2048, 256, 0, s>>>(drow, 0, dcol, dval, dx, dy, rows); });
  return static_cast<double>(entries) / t;
}

}  // namespace apps::split::cuda
