// apps/split/split_cuda.hpp - the GPU side of the splitter's applications (split_cuda.cu; without
// CUDA, split_cuda_unavailable.cpp, whose GPU calls throw: there the GPU parts run emulated).
// Each GPU part enqueues on the stream the splitter gives it: copies in, kernels or cuBLAS,
// copies out. Gemm and triad pipeline their share in chunks over two streams of the workspace
// (joined to the given stream by events), so that copies in, compute and copies out overlap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include <weft/split/splitter.hpp>

namespace apps::split::cuda {

/// Page-locked host memory (cudaMallocHost) when CUDA is present and willing; else nullptr.
void* pinned_alloc(std::size_t bytes) noexcept;
void pinned_free(void* p) noexcept;

/// Device buffers, two streams, events and a cuBLAS handle, grown on demand and reused from
/// region to region (one per application). Used by one thread at a time, but for the LU's
/// look-ahead: lu_next_panel may run on another thread beside lu_update (its own stream,
/// handle and panel slot; both only read the current slot).
struct Workspace;
struct WorkspaceDeleter {
  void operator()(Workspace* w) const noexcept;
};
using WorkspacePtr = std::unique_ptr<Workspace, WorkspaceDeleter>;
WorkspacePtr make_workspace(int device);

/// Rows [0, rows) of C = A B, row-major, A and C pointing at the range's first row.
void gemm_rows(Workspace& w, cudaStream_t s, const double* a, const double* b, double* c,
               std::int64_t rows, int n, int k);
/// a[i] = b[i] + scalar c[i] for i in [0, count).
void triad(Workspace& w, cudaStream_t s, double* a, const double* b, const double* c, double scalar,
           std::int64_t count);
/// y[r] = A[r] x for the range's rows: `row_start` (rows + 1 absolute offsets into col and val),
/// x of x_len entries.
void spmv(Workspace& w, cudaStream_t s, const std::int64_t* row_start, const int* col,
          const float* val, const float* x, int x_len, float* y, std::int64_t rows);

/// LU's panel, rows [k, k + m) of columns [k, k + nb) of a column-major host matrix (leading
/// dimension lda, `panel` at its first entry): factored in place with partial pivoting
/// (cusolverDnDgetrf), copied back, its pivots (0-based, relative to row k) into `ipiv`. The
/// factored panel and its pivots stay in device memory, in panel slot `slot` (0 or 1), for
/// lu_update and lu_next_panel until that slot is factored into again. Throws for a singular
/// panel.
void lu_panel(Workspace& w, cudaStream_t s, double* panel, int lda, int m, int nb, int slot,
              int* ipiv);
/// LU's look-ahead, on a stream and thread of its own while lu_update runs the rest of the
/// trailing update: the next panel's `next_nb` columns at `first_col` (pointing at row k of the
/// column after this panel, leading dimension lda) updated with slot `slot`'s panel (m rows,
/// nb columns), then their rows below this panel factored as lu_panel does, into the other
/// slot, its pivots (0-based, relative to row k + nb) into `next_ipiv`; the columns copied
/// back. Sleeps, not spins, while it waits for the GPU. Throws for a singular panel.
void lu_next_panel(Workspace& w, double* first_col, int lda, int m, int nb, int next_nb, int slot,
                   int* next_ipiv);
/// LU's trailing update of columns [0, cols) at `first_col` (pointing at row k of the first
/// column, leading dimension lda): the panel's row swaps, U12 = L11^-1 A12, then
/// A22 -= L21 U12, with the panel in slot `slot` (m rows, nb columns).
void lu_update(Workspace& w, cudaStream_t s, double* first_col, int lda, int m, int nb, int slot,
               std::int64_t cols);
/// The GPU's DGEMM rate (flop/s) on an LU update's shape (m x cols, depth nb) in device memory.
double lu_update_local_rate(Workspace& w, const double* a, int lda, int m, int nb, int cols);

/// The GPU's rates with the application's data already in device memory (no PCIe): flop/s of
/// the whole DGEMM, bytes/s of the triad over `count` elements, entries/s of the whole SpMV.
double gemm_local_rate(Workspace& w, const double* a, const double* b, int m, int n, int k);
double triad_local_rate(Workspace& w, const double* b, const double* c, std::int64_t count);
double spmv_local_rate(Workspace& w, const std::int64_t* row_start, const int* col,
                       const float* val, const float* x, int x_len, std::int64_t rows);

}  // namespace apps::split::cuda
