// The splitter applications' GPU side where they were built without CUDA: no pinned memory, and
// the GPU parts run only on the emulated device, so a CUDA call here is a bug that says so.
#include <stdexcept>

#include "split_cuda.hpp"

namespace apps::split::cuda {

namespace {
[[noreturn]] void unavailable(const char* what) {
  throw std::logic_error(std::string("apps::split::cuda::") + what +
                         ": built without CUDA (the GPU parts run emulated)");
}
}  // namespace

struct Workspace {};
void WorkspaceDeleter::operator()(Workspace* w) const noexcept { delete w; }
WorkspacePtr make_workspace(int) { unavailable("make_workspace"); }
void* pinned_alloc(std::size_t) noexcept { return nullptr; }
void pinned_free(void*) noexcept {}
void gemm_rows(Workspace&, cudaStream_t, const double*, const double*, double*, std::int64_t, int,
               int) {
  unavailable("gemm_rows");
}
void triad(Workspace&, cudaStream_t, double*, const double*, const double*, double, std::int64_t) {
  unavailable("triad");
}
void spmv(Workspace&, cudaStream_t, const std::int64_t*, const int*, const float*, const float*,
          int, float*, std::int64_t) {
  unavailable("spmv");
}
double gemm_local_rate(Workspace&, const double*, const double*, int, int, int) {
  unavailable("gemm_local_rate");
}
void lu_panel(Workspace&, cudaStream_t, double*, int, int, int, int, int*) {
  unavailable("lu_panel");
}
void lu_next_panel(Workspace&, double*, int, int, int, int, int, int*) {
  unavailable("lu_next_panel");
}
void lu_update(Workspace&, cudaStream_t, double*, int, int, int, int, std::int64_t) {
  unavailable("lu_update");
}
double lu_update_local_rate(Workspace&, const double*, int, int, int, int) {
  unavailable("lu_update_local_rate");
}
double triad_local_rate(Workspace&, const double*, const double*, std::int64_t) {
  unavailable("triad_local_rate");
}
double spmv_local_rate(Workspace&, const std::int64_t*, const int*, const float*, const float*, int,
                       std::int64_t) {
  unavailable("spmv_local_rate");
}

}  // namespace apps::split::cuda
