// apps/stream/stream_apps.hpp - seed 001's applications on task streams, written against
// weft/stream as a user would: block matrix multiply under each coherence policy, and the
// particle-particle N-body. Each runs on every task stream of a World, on CUDA GPUs or on the
// host device (where the kernels are CPU loops and cblas), and has the way people write it
// today beside it for the benchmark: MPI + CUDA, one process per GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <weft/cpu/executor.hpp>
#include <weft/stream/world.hpp>

namespace apps::stream {

// ---- block matrix multiply ----

/// C = A B for n x n floats. Rank 0 holds A (row-major) and B (as column blocks, each n rows of
/// n / column_blocks columns, row-major); it sends each rank its rows of A and every rank all
/// of B, each rank computes its rows of C one column block per kernel (cuBLAS sgemm; cblas on
/// the host device) in shared regions of `policy`, and sends them back to rank 0.
struct BmmOptions {
  std::size_t n = 8192;
  int column_blocks = 8;
  weft::stream::Policy policy = weft::stream::Policy::ReadWrite;
};

/// The inputs, made once on rank 0's side (deterministic in `seed`).
struct BmmInputs {
  std::size_t n = 0;
  int column_blocks = 0;
  std::vector<float> a;               // n x n, row-major
  std::vector<std::vector<float>> b;  // column_blocks blocks of n x (n / column_blocks)
  std::vector<std::vector<float>> c;  // the result, laid out as b
};
BmmInputs make_bmm_inputs(std::size_t n, int column_blocks, std::uint32_t seed);
/// The largest relative error of 64 entries of C against a double-precision dot product.
double bmm_error(const BmmInputs& in);

/// Runs on every stream of `world` (rank 0 holds `in`; the others may pass an empty one with
/// n and column_blocks set). Returns rank 0's seconds from its first send to its last receive.
double run_bmm(weft::stream::World& world, BmmInputs& in, weft::stream::Policy policy);

/// The same with MPI and CUDA directly: one process per GPU, explicit cudaMemcpy, MPI calls.
/// MPI must be initialised; `gpu` is this process's GPU. Returns rank 0's seconds.
double run_bmm_mpi_cuda(BmmInputs& in, int gpu);

// ---- N-body ----

struct NbodyOptions {
  std::size_t bodies = 65536;
  int steps = 500;
  float dt = 0.001F;
  float softening = 0.01F;
};

/// Positions and masses (x, y, z, m) and velocities of every body, deterministic in `seed`.
struct Bodies {
  std::vector<float> pos;  // 4 per body
  std::vector<float> vel;  // 4 per body (w unused)
};
Bodies make_bodies(std::size_t count, std::uint32_t seed);

/// Every rank owns bodies.size() / world.size() bodies; each step it computes their
/// accelerations from all bodies (one kernel; a CPU loop on the host device), moves them, and
/// the ranks exchange their new positions (a broadcast from each owner). `bodies` (every
/// rank's copy of the start) holds rank 0's final state. Returns rank 0's seconds.
double run_nbody(weft::stream::World& world, Bodies& bodies, const NbodyOptions& o);

/// The same with MPI and CUDA directly (MPI_Allgather of positions through the host).
double run_nbody_mpi_cuda(Bodies& bodies, const NbodyOptions& o, int gpu);

/// The same on the CPU executor's workers (the speed-up's base); `steps` of o.
double run_nbody_cpu(weft::cpu::Executor& executor, Bodies& bodies, const NbodyOptions& o);

/// Sum of |p| over positions, to compare runs (float sums of the same motion agree to ~1e-4).
double nbody_checksum(const Bodies& b);

}  // namespace apps::stream
