// The stream applications as people write them today (stream_apps.hpp): one MPI process per
// GPU, explicit cudaMemcpy through pinned host buffers and MPI calls between them.
#include <cuda_runtime.h>
#include <mpi.h>

#include <chrono>
#include <cstring>
#include <stdexcept>
#include <string>

#include "stream_apps.hpp"
#include "stream_kernels.hpp"

namespace apps::stream {

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

template <class T>
T* pinned(std::size_t count) {
  void* p = nullptr;
  check(cudaMallocHost(&p, count * sizeof(T)), "cudaMallocHost");
  return static_cast<T*>(p);
}

template <class T>
T* on_device(std::size_t count) {
  void* p = nullptr;
  check(cudaMalloc(&p, count * sizeof(T)), "cudaMalloc");
  return static_cast<T*>(p);
}

// MPI counts are ints: large buffers go in pieces of at most 1 GiB.
constexpr std::size_t kPiece = std::size_t{1} << 30;

void send_bytes(const void* p, std::size_t bytes, int dest, int tag) {
  for (std::size_t at = 0; at < bytes; at += kPiece) {
    MPI_Send(static_cast<const char*>(p) + at, static_cast<int>(std::min(kPiece, bytes - at)),
             MPI_BYTE, dest, tag, MPI_COMM_WORLD);
  }
}

void recv_bytes(void* p, std::size_t bytes, int source, int tag) {
  for (std::size_t at = 0; at < bytes; at += kPiece) {
    MPI_Recv(static_cast<char*>(p) + at, static_cast<int>(std::min(kPiece, bytes - at)), MPI_BYTE,
             source, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
}

}  // namespace

double run_bmm_mpi_cuda(BmmInputs& in, int gpu) {
  int me = 0;
  int ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  check(cudaSetDevice(gpu), "cudaSetDevice");
  const std::size_t n = in.n;
  const auto blocks = static_cast<std::size_t>(in.column_blocks);
  const std::size_t width = n / blocks;
  const std::size_t rows = n / static_cast<std::size_t>(ranks);
  float* a = pinned<float>(rows * n);
  float* b = pinned<float>(n * n);  // the blocks one after another
  float* c = pinned<float>(rows * n);
  float* da = on_device<float>(rows * n);
  float* db = on_device<float>(n * n);
  float* dc = on_device<float>(rows * n);
  if (me == 0) {
    std::memcpy(a, in.a.data(), rows * n * sizeof(float));
    for (std::size_t j = 0; j < blocks; ++j) {
      std::memcpy(b + j * n * width, in.b[j].data(), n * width * sizeof(float));
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = now();
  if (me == 0) {
    for (int r = 1; r < ranks; ++r) {
      send_bytes(in.a.data() + static_cast<std::size_t>(r) * rows * n, rows * n * sizeof(float), r,
                 0);
    }
  } else {
    recv_bytes(a, rows * n * sizeof(float), 0, 0);
  }
  MPI_Bcast(b, static_cast<int>(n * n), MPI_FLOAT, 0, MPI_COMM_WORLD);
  check(cudaMemcpy(da, a, rows * n * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
  check(cudaMemcpy(db, b, n * n * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
  for (std::size_t j = 0; j < blocks; ++j) {
    kernels::sgemm_cuda(nullptr, da, db + j * n * width, dc + j * rows * width,
                        static_cast<int>(rows), static_cast<int>(n), static_cast<int>(width));
  }
  check(cudaMemcpy(c, dc, rows * n * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy");
  if (me == 0) {
    for (int r = 1; r < ranks; ++r) {
      for (std::size_t j = 0; j < blocks; ++j) {
        recv_bytes(in.c[j].data() + static_cast<std::size_t>(r) * rows * width,
                   rows * width * sizeof(float), r, 100 + static_cast<int>(j));
      }
    }
  } else {
    for (std::size_t j = 0; j < blocks; ++j) {
      send_bytes(c + j * rows * width, rows * width * sizeof(float), 0, 100 + static_cast<int>(j));
    }
  }
  const double seconds = now() - t0;
  if (me == 0) {
    for (std::size_t j = 0; j < blocks; ++j) {
      std::memcpy(in.c[j].data(), c + j * rows * width, rows * width * sizeof(float));
    }
  }
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc);
  cudaFreeHost(a);
  cudaFreeHost(b);
  cudaFreeHost(c);
  return seconds;
}

double run_nbody_mpi_cuda(Bodies& bodies, const NbodyOptions& o, int gpu) {
  int me = 0;
  int ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  check(cudaSetDevice(gpu), "cudaSetDevice");
  const std::size_t n = bodies.pos.size() / 4;
  const std::size_t mine = n / static_cast<std::size_t>(ranks);
  const std::size_t first = mine * static_cast<std::size_t>(me);
  float* host_all = pinned<float>(4 * n);
  float* pos = on_device<float>(4 * n);
  float* vel = on_device<float>(4 * mine);
  float* next = on_device<float>(4 * mine);
  check(cudaMemcpy(pos, bodies.pos.data(), 4 * n * sizeof(float), cudaMemcpyHostToDevice),
        "cudaMemcpy");
  check(cudaMemcpy(vel, bodies.vel.data() + 4 * first, 4 * mine * sizeof(float),
                   cudaMemcpyHostToDevice),
        "cudaMemcpy");
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = now();
  for (int step = 0; step < o.steps; ++step) {
    kernels::nbody_step_cuda(nullptr, pos, n, first, mine, vel, next, o.dt, o.softening);
    check(cudaMemcpy(host_all + 4 * first, next, 4 * mine * sizeof(float), cudaMemcpyDeviceToHost),
          "cudaMemcpy");
    MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, host_all, static_cast<int>(4 * mine),
                  MPI_FLOAT, MPI_COMM_WORLD);
    check(cudaMemcpy(pos, host_all, 4 * n * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
  }
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  MPI_Barrier(MPI_COMM_WORLD);
  const double seconds = now() - t0;
  std::memcpy(bodies.pos.data(), host_all, 4 * n * sizeof(float));
  cudaFree(pos);
  cudaFree(vel);
  cudaFree(next);
  cudaFreeHost(host_all);
  return seconds;
}

}  // namespace apps::stream
