// bench/cpu/kernels.hpp - the CPU benchmark kernels: the sequential reference, weft's version
// (bench/cpu/*.cpp) and the peers' versions (bench/peers/*.cpp), on the same inputs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace weft::cpu {
class Executor;
}

namespace weft::bench::cpu {

using weft::cpu::Executor;

/// Worker count every implementation uses (weft workers, TBB/OpenMP/StarPU threads).
struct Threads {
  int n = 2;
};

// ---- Fib: one task per call, no cut-off ----
long fib_seq(int n);
/// cutoff > 0: calls with n < cutoff run sequentially (how an application writes it; the
/// benchmark uses 0, one task per call).
long fib_weft(Executor& ex, int n, int cutoff = 0);
long fib_tbb(int n);
long fib_omp(int n);

// ---- N-Queens: one task per legal placement, board copied per task ----
long nqueens_seq(int n);
long nqueens_weft(Executor& ex, int n);
long nqueens_tbb(int n);
long nqueens_omp(int n);

// ---- UTS: geometric tree (T1/T3L-like), SplitMix-seeded; returns the node count ----
struct UtsParams {
  double branching = 4.0;  // mean children per node
  int max_depth = 11;
  std::uint64_t root_seed = 19;
};
std::uint64_t uts_seq(const UtsParams& p);
/// seq_depth >= 0: subtrees rooted at depth >= seq_depth are counted sequentially.
std::uint64_t uts_weft(Executor& ex, const UtsParams& p, int seq_depth = -1);
std::uint64_t uts_tbb(const UtsParams& p);
std::uint64_t uts_omp(const UtsParams& p);

// ---- SparseLU: BOTS' blocked sparse LU (lu0, fwd, bdiv, bmod) ----
struct SparseMatrix {
  int nb = 0;                              // blocks per side
  int bs = 0;                              // block side
  std::vector<std::vector<float>> blocks;  // nb*nb, empty = zero block
  [[nodiscard]] std::vector<float>* at(int i, int j) {
    auto& b = blocks[static_cast<std::size_t>(i * nb + j)];
    return b.empty() ? nullptr : &b;
  }
};
SparseMatrix sparselu_input(int nb, int bs);
void sparselu_seq(SparseMatrix& m);
void sparselu_weft(Executor& ex, SparseMatrix& m);
void sparselu_tbb(SparseMatrix& m);
void sparselu_omp(SparseMatrix& m);
/// Max relative difference between two factorised matrices (and structure equality).
double sparselu_max_diff(const SparseMatrix& a, const SparseMatrix& b);

// ---- Multisort: BOTS' cilksort (4-way split, parallel merges) ----
std::vector<std::int32_t> multisort_input(std::size_t n, std::uint64_t seed);
void multisort_weft(Executor& ex, std::vector<std::int32_t>& data);
void multisort_tbb(std::vector<std::int32_t>& data);
void multisort_omp(std::vector<std::int32_t>& data);

// ---- Alignment: all-pairs global alignment scores of protein-like sequences ----
std::vector<std::string> alignment_input(int sequences, int min_len, int max_len,
                                         std::uint64_t seed);
std::vector<int> alignment_seq(const std::vector<std::string>& seqs);
std::vector<int> alignment_weft(Executor& ex, const std::vector<std::string>& seqs);
std::vector<int> alignment_tbb(const std::vector<std::string>& seqs);
std::vector<int> alignment_omp(const std::vector<std::string>& seqs);
int align_pair(const std::string& a, const std::string& b);

// ---- STREAM: copy c=a, scale b=s*c, add c=a+b, triad a=b+s*c ----
enum class StreamOp { copy, scale, add, triad };
struct StreamArrays {
  std::vector<double> a, b, c;
};
void stream_init_weft(Executor& ex, StreamArrays& s, std::size_t n);
void stream_weft(Executor& ex, StreamArrays& s, StreamOp op, double scalar);
void stream_tbb(StreamArrays& s, StreamOp op, double scalar);
void stream_omp(StreamArrays& s, StreamOp op, double scalar);
/// Bytes moved by one run of op over n doubles (STREAM's counting).
double stream_bytes(StreamOp op, std::size_t n);

// ---- Empty tasks: n independent empty tasks from one spawning thread ----
// An "empty" task only counts itself in its thread's padded slot (so the compiler cannot
// elide it and the run can be verified); each returns the sum of the slots, which must be n.
struct alignas(64) CountSlot {
  std::int64_t v = 0;
};
inline constexpr int kMaxCountSlots = 256;
std::int64_t empty_tasks_weft(Executor& ex, std::int64_t n);
std::int64_t empty_tasks_tbb(std::int64_t n);
std::int64_t empty_tasks_omp(std::int64_t n);
std::int64_t empty_tasks_starpu(std::int64_t n);

// ---- External spawns: a thread outside the pool (for TBB, the main thread) spawns n empty
// tasks two at a time into one group, pausing `pause_ns` after each pair (work handed out as it
// arrives, as a thread popping GPU completions does), so the workers idle between pairs. Each
// returns how many tasks ran (must equal n).
std::int64_t external_spawns_weft(Executor& ex, std::int64_t n, std::int64_t pause_ns);
std::int64_t external_spawns_tbb(std::int64_t n, std::int64_t pause_ns);

// ---- Task chain: n tasks, each ready only when its predecessor has finished ----
// Each returns how many tasks ran (must equal n, in order).
std::int64_t task_chain_weft(Executor& ex, std::int64_t n);
std::int64_t task_chain_tbb(std::int64_t n);
std::int64_t task_chain_omp(std::int64_t n);
std::int64_t task_chain_starpu(std::int64_t n);

// ---- StarPU's lifetime (starpu_init is costly: once per process) ----
bool starpu_available();
void starpu_start(int ncpus);
void starpu_stop();

// ---- Pipelines ----
// IS-like: each participant holds a private histogram; merging into the shared one is the
// critical region, done in `blocks` blocks as a pipeline (weft) or under one lock (peers).
struct IsInput {
  std::vector<std::int32_t> keys;
  int max_key = 0;
};
IsInput is_input(std::size_t keys, int max_key, std::uint64_t seed);
/// The merge's per-bucket update: shared[k] += mine[k] * bucket_weight(k, rounds). rounds = 0
/// is IS (weight 1, a memory-bound merge); rounds > 0 adds MOLDYN-like arithmetic per update
/// (a compute-bound critical region).
inline std::int64_t bucket_weight(std::int64_t k, int rounds) {
  std::uint64_t x = static_cast<std::uint64_t>(k);
  for (int r = 0; r < rounds; ++r) {  // SplitMix64 steps
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    x ^= x >> 31;
  }
  return rounds == 0 ? 1 : static_cast<std::int64_t>(1 + (x & 3));
}
std::vector<std::int64_t> is_histogram_seq(const IsInput& in, int rounds = 0);
/// blocks > 0: the merge is a pipeline of `blocks` blocks; blocks == 0: one lock around each
/// participant's whole merge. merge_seconds (optional) receives the merge phase's duration,
/// from the barrier after counting to the barrier after merging.
std::vector<std::int64_t> is_histogram_weft(Executor& ex, const IsInput& in, int blocks,
                                            double* merge_seconds = nullptr, int rounds = 0);
std::vector<std::int64_t> is_histogram_omp(const IsInput& in, int threads);
std::vector<std::int64_t> is_histogram_tbb(const IsInput& in, int threads);

// LU-like wavefront: nz sweeps over an n x n grid; row i of sweep k needs row i-1 of sweep k.
struct Grid {
  int n = 0;
  int nz = 0;
  std::vector<double> v;  // nz * n * n
};
Grid lu_input(int n, int nz);
void lu_wavefront_seq(Grid& g);
void lu_wavefront_weft(Executor& ex, Grid& g, int participants);
void lu_wavefront_omp(Grid& g, int threads);
double grid_max_diff(const Grid& a, const Grid& b);

}  // namespace weft::bench::cpu
