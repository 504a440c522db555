// `weft bench streams` (see stream_suite.hpp).
#include <cuda_runtime.h>
#include <mpi.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "stream/stream_suite.hpp"
#include "stream_apps.hpp"
#include "weft/cpu/executor.hpp"
#include "weft/gpu/detail/cuda_check.cuh"
#include "weft/stream/world.hpp"

extern char** environ;

namespace weft::bench::stream {

namespace ws = weft::stream;

namespace {

constexpr const char* kWorkerFlag = "--stream-kernel-worker";

__global__ void fill_pattern(unsigned* p, std::size_t n, unsigned seed) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    p[i] = static_cast<unsigned>(i) * 2654435761u + seed;
  }
}

__global__ void spin(long long cycles, int* done) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
  if (threadIdx.x == 0 && blockIdx.x == 0) *done = 1;
}

// Each spinning kernel takes a few SMs, so that 16 of them fit on the GPU at once.
constexpr int kSpinBlocks = 4;
constexpr int kSpinThreads = 128;

// True when the device buffer holds fill_pattern(seed) (every element for small buffers, an
// even sample of 4096 for large ones).
bool holds_pattern(const unsigned* device, std::size_t n, unsigned seed) {
  const std::size_t step = std::max<std::size_t>(1, n / 4096);
  std::vector<unsigned> h(n);
  WEFT_CUDA_CHECK(cudaMemcpy(h.data(), device, n * sizeof(unsigned), cudaMemcpyDeviceToHost));
  for (std::size_t i = 0; i < n; i += step) {
    if (h[i] != static_cast<unsigned>(i) * 2654435761u + seed) return false;
  }
  return n == 0 || h[n - 1] == static_cast<unsigned>(n - 1) * 2654435761u + seed;
}

int gpu_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

int mpi_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

std::string size_name(std::size_t bytes) {
  if (bytes >= (1u << 20)) return std::to_string(bytes >> 20) + "MiB";
  if (bytes >= 1024) return std::to_string(bytes >> 10) + "KiB";
  return std::to_string(bytes) + "B";
}

int iterations_for(std::size_t bytes, bool quick) {
  int it = bytes <= (64u << 10) ? 400 : bytes <= (1u << 20) ? 100 : bytes <= (16u << 20) ? 20 : 6;
  return quick ? std::max(2, it / 4) : it;
}

// ---- the ping-pong of weft ----

enum class PingPath { SameGpu, TwoGpus, TwoProcesses, TwoProcessesStaged };

const char* path_name(PingPath p) {
  switch (p) {
    case PingPath::SameGpu:
      return "same_gpu";
    case PingPath::TwoGpus:
      return "two_gpus";
    case PingPath::TwoProcesses:
      return "two_processes";
    case PingPath::TwoProcessesStaged:
      return "two_processes_staged";
  }
  return "?";
}

ws::Path expected_path(PingPath p, std::size_t bytes, bool cuda_aware) {
  switch (p) {
    case PingPath::SameGpu:
      return ws::Path::DeviceCopy;
    case PingPath::TwoGpus:
      return ws::Path::PeerCopy;
    case PingPath::TwoProcesses:  // IPC from 256 KiB (src/stream/mpi_transport.cpp)
      return bytes >= (256u << 10) ? ws::Path::MpiIpc
                                   : (cuda_aware ? ws::Path::MpiCudaAware : ws::Path::MpiStaged);
    case PingPath::TwoProcessesStaged:
      return cuda_aware ? ws::Path::MpiCudaAware : ws::Path::MpiStaged;
  }
  return ws::Path::None;
}

/// The Worlds the weft contenders run in, made once (a World sets up peer access and pinned
/// staging when it is made, which a program does once).
struct Worlds {
  std::unique_ptr<ws::World> same_gpu;              // process 0: two streams on GPU 0
  std::unique_ptr<ws::World> two_gpus;              // process 0: streams on GPUs 0 and 1
  std::unique_ptr<ws::World> two_processes;         // one stream per process, GPU = process % GPUs
  std::unique_ptr<ws::World> two_processes_staged;  // the same without CUDA IPC
  std::unique_ptr<ws::World> kernels;               // process 0: 16 streams on GPU 0
};

ws::World& world_for(Worlds& w, PingPath p) {
  switch (p) {
    case PingPath::SameGpu:
      return *w.same_gpu;
    case PingPath::TwoGpus:
      return *w.two_gpus;
    case PingPath::TwoProcesses:
      return *w.two_processes;
    case PingPath::TwoProcessesStaged:
      return *w.two_processes_staged;
  }
  throw std::logic_error("no world");
}

// One-way seconds of `iterations` round trips of `bytes` between ranks 0 and 1.
Outcome weft_pingpong(ws::World& world, std::size_t bytes, int iterations, ws::Path expected) {
  const std::size_t n = bytes / sizeof(unsigned);
  double seconds = 0;
  bool ok = true;
  world.run([&](ws::TaskStream& ts) {
    ws::DeviceBytes d = ts.allocate(bytes);
    auto* p = static_cast<unsigned*>(d.data());
    const ws::Buffer buf = ws::device(p, n);
    if (ts.rank() == 0) {
      fill_pattern<<<256, 256, 0, ts.cuda_stream()>>>(p, n, 17);
      ts.synchronize();
    }
    ts.barrier();
    ws::Path path = ws::Path::None;
    const double t0 = now_seconds();
    for (int i = 0; i < iterations; ++i) {
      if (ts.rank() == 0) {
        ts.send(buf, 1, 0);
        ws::Request r = ts.irecv(buf, 1, 0);
        r.wait();
        path = r.path();
      } else {
        ts.recv(buf, 0, 0);
        ts.send(buf, 0, 0);
      }
    }
    if (ts.rank() == 0) {
      seconds = (now_seconds() - t0) / (2.0 * iterations);
      ok = path == expected && holds_pattern(p, n, 17);
      if (path != expected) {
        std::fprintf(stderr, "[streams] ping-pong took path %s, not %s\n",
                     std::string(ws::to_string(path)).c_str(),
                     std::string(ws::to_string(expected)).c_str());
      }
    }
  });
  return {seconds, ok};
}

// Seconds per broadcast of `bytes` from rank 0 to every rank of `world` (device buffers).
Outcome weft_bcast(ws::World& world, std::size_t bytes, int iterations) {
  const std::size_t n = bytes / sizeof(unsigned);
  double seconds = 0;
  bool ok = true;
  world.run([&](ws::TaskStream& ts) {
    ws::DeviceBytes d = ts.allocate(bytes);
    auto* p = static_cast<unsigned*>(d.data());
    if (ts.rank() == 0) {
      fill_pattern<<<256, 256, 0, ts.cuda_stream()>>>(p, n, 23);
    } else {
      WEFT_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, ts.cuda_stream()));
    }
    ts.synchronize();
    ts.barrier();
    const double t0 = now_seconds();
    for (int i = 0; i < iterations; ++i) ts.bcast(ws::device(p, n), 0);
    ts.barrier();
    if (ts.rank() == 0) seconds = (now_seconds() - t0) / iterations;
    std::int64_t wrong = holds_pattern(p, n, 23) ? 0 : 1;
    ts.allreduce_sum(&wrong, 1);
    if (ts.rank() == 0) ok = wrong == 0;
  });
  return {seconds, ok};
}

// ---- MPI + CUDA: one process per GPU, cudaMemcpy through a pinned buffer and MPI calls ----

class MpiCuda {
 public:
  // Ping-pong: each hop copies out, sends, receives and copies in.
  Outcome pingpong(int gpu, std::size_t bytes, int iterations) {
    WEFT_CUDA_CHECK(cudaSetDevice(gpu));
    Buffers& b = buffers(gpu, bytes);
    const std::size_t n = bytes / sizeof(unsigned);
    const int me = mpi_rank();
    if (me == 0) {
      fill_pattern<<<256, 256>>>(b.device, n, 29);
      WEFT_CUDA_CHECK(cudaDeviceSynchronize());
    }
    MPI_Barrier(MPI_COMM_WORLD);
    const int count = static_cast<int>(bytes);
    const double t0 = now_seconds();
    for (int i = 0; i < iterations; ++i) {
      if (me == 0) {
        WEFT_CUDA_CHECK(cudaMemcpy(b.host, b.device, bytes, cudaMemcpyDeviceToHost));
        MPI_Send(b.host, count, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
        MPI_Recv(b.host, count, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        WEFT_CUDA_CHECK(cudaMemcpy(b.device, b.host, bytes, cudaMemcpyHostToDevice));
      } else {
        MPI_Recv(b.host, count, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        WEFT_CUDA_CHECK(cudaMemcpy(b.device, b.host, bytes, cudaMemcpyHostToDevice));
        WEFT_CUDA_CHECK(cudaMemcpy(b.host, b.device, bytes, cudaMemcpyDeviceToHost));
        MPI_Send(b.host, count, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
      }
    }
    const double seconds = (now_seconds() - t0) / (2.0 * iterations);
    return {seconds, me != 0 || holds_pattern(b.device, n, 29)};
  }

  // MPI alone carrying the bytes between pinned host buffers, no GPU copy: the floor of any
  // path whose bytes cross between the processes by MPI (the staged path's, without IPC).
  Outcome host_pingpong(int gpu, std::size_t bytes, int iterations) {
    WEFT_CUDA_CHECK(cudaSetDevice(gpu));
    Buffers& b = buffers(gpu, bytes);
    const std::size_t n = bytes / sizeof(unsigned);
    auto* words = static_cast<unsigned*>(b.host);
    const int me = mpi_rank();
    for (std::size_t i = 0; i < n; ++i) {
      words[i] = me == 0 ? static_cast<unsigned>(i) * 2654435761u + 37 : 0;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    const int count = static_cast<int>(bytes);
    const double t0 = now_seconds();
    for (int i = 0; i < iterations; ++i) {
      if (me == 0) {
        MPI_Send(b.host, count, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
        MPI_Recv(b.host, count, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      } else {
        MPI_Recv(b.host, count, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(b.host, count, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
      }
    }
    const double seconds = (now_seconds() - t0) / (2.0 * iterations);
    bool ok = true;
    for (std::size_t i = 0; i < n; ++i) {
      ok = ok && words[i] == static_cast<unsigned>(i) * 2654435761u + 37;
    }
    return {seconds, ok};
  }

  // The broadcast as MPI + CUDA has it: the root copies out, MPI_Bcast, the others copy in.
  Outcome bcast(int gpu, std::size_t bytes, int iterations) {
    WEFT_CUDA_CHECK(cudaSetDevice(gpu));
    Buffers& b = buffers(gpu, bytes);
    const std::size_t n = bytes / sizeof(unsigned);
    const int me = mpi_rank();
    if (me == 0) {
      fill_pattern<<<256, 256>>>(b.device, n, 31);
    } else {
      WEFT_CUDA_CHECK(cudaMemset(b.device, 0, bytes));
    }
    WEFT_CUDA_CHECK(cudaDeviceSynchronize());
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = now_seconds();
    for (int i = 0; i < iterations; ++i) {
      if (me == 0) WEFT_CUDA_CHECK(cudaMemcpy(b.host, b.device, bytes, cudaMemcpyDeviceToHost));
      MPI_Bcast(b.host, static_cast<int>(bytes), MPI_BYTE, 0, MPI_COMM_WORLD);
      if (me != 0) WEFT_CUDA_CHECK(cudaMemcpy(b.device, b.host, bytes, cudaMemcpyHostToDevice));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    const double seconds = (now_seconds() - t0) / iterations;
    int wrong = holds_pattern(b.device, n, 31) ? 0 : 1;
    MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    return {seconds, wrong == 0};
  }

  ~MpiCuda() {
    for (auto& [key, b] : buffers_) {
      cudaSetDevice(key.first);
      cudaFree(b.device);
      cudaFreeHost(b.host);
    }
  }

 private:
  struct Buffers {
    unsigned* device = nullptr;
    void* host = nullptr;
  };
  Buffers& buffers(int gpu, std::size_t bytes) {
    auto& b = buffers_[{gpu, bytes}];
    if (b.device == nullptr) {
      WEFT_CUDA_CHECK(cudaMalloc(&b.device, std::max<std::size_t>(bytes, 4)));
      WEFT_CUDA_CHECK(cudaMallocHost(&b.host, std::max<std::size_t>(bytes, 4)));
    }
    return b;
  }
  std::map<std::pair<int, std::size_t>, Buffers> buffers_;
};

// cudaMemcpyPeerAsync between GPUs 0 and 1, each hop waited for as a ping-pong waits.
Outcome peer_copy_pingpong(std::size_t bytes, int iterations) {
  void* a = nullptr;
  void* b = nullptr;
  cudaStream_t s = nullptr;
  WEFT_CUDA_CHECK(cudaSetDevice(1));
  WEFT_CUDA_CHECK(cudaMalloc(&b, bytes));
  WEFT_CUDA_CHECK(cudaSetDevice(0));
  WEFT_CUDA_CHECK(cudaMalloc(&a, bytes));
  WEFT_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const std::size_t n = bytes / sizeof(unsigned);
  fill_pattern<<<256, 256, 0, s>>>(static_cast<unsigned*>(a), n, 41);
  WEFT_CUDA_CHECK(cudaStreamSynchronize(s));
  const double t0 = now_seconds();
  for (int i = 0; i < iterations; ++i) {
    WEFT_CUDA_CHECK(cudaMemcpyPeerAsync(b, 1, a, 0, bytes, s));
    WEFT_CUDA_CHECK(cudaStreamSynchronize(s));
    WEFT_CUDA_CHECK(cudaMemcpyPeerAsync(a, 0, b, 1, bytes, s));
    WEFT_CUDA_CHECK(cudaStreamSynchronize(s));
  }
  const double seconds = (now_seconds() - t0) / (2.0 * iterations);
  const bool ok = holds_pattern(static_cast<unsigned*>(a), n, 41);
  cudaStreamDestroy(s);
  cudaFree(a);
  cudaSetDevice(1);
  cudaFree(b);
  cudaSetDevice(0);
  return {seconds, ok};
}

// ---- concurrent kernels ----

long long spin_cycles() {
  int khz = 0;
  WEFT_CUDA_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0));
  return static_cast<long long>(khz) * 10;  // about 10 ms at the GPU's clock
}

Outcome weft_concurrent_kernels(ws::World& world, int k, long long cycles) {
  double seconds = 0;
  bool ok = true;
  std::vector<int> done(static_cast<std::size_t>(world.size()), 0);
  world.run([&](ws::TaskStream& ts) {
    ws::DeviceBytes flag = ts.allocate(sizeof(int));
    WEFT_CUDA_CHECK(cudaMemsetAsync(flag.data(), 0, sizeof(int), ts.cuda_stream()));
    ts.synchronize();
    ts.barrier();
    const double t0 = now_seconds();
    if (ts.rank() < k) {
      spin<<<kSpinBlocks, kSpinThreads, 0, ts.cuda_stream()>>>(cycles,
                                                               static_cast<int*>(flag.data()));
      ts.synchronize();
      WEFT_CUDA_CHECK(cudaMemcpy(&done[static_cast<std::size_t>(ts.rank())], flag.data(),
                                 sizeof(int), cudaMemcpyDeviceToHost));
    }
    ts.barrier();
    if (ts.rank() == 0) seconds = now_seconds() - t0;
  });
  for (int r = 0; r < k; ++r) ok = ok && done[static_cast<std::size_t>(r)] == 1;
  return {seconds, ok};
}

struct Worker {
  pid_t pid = -1;
  int to = -1;    // its stdin
  int from = -1;  // its stdout
};

Worker spawn_worker(const std::string& self, long long cycles) {
  int in[2];
  int out[2];
  if (pipe(in) != 0 || pipe(out) != 0) throw std::runtime_error("pipe failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_addclose(&actions, in[1]);
  posix_spawn_file_actions_addclose(&actions, out[0]);
  const std::string c = std::to_string(cycles);
  std::vector<char*> argv{const_cast<char*>(self.c_str()), const_cast<char*>(kWorkerFlag),
                          const_cast<char*>(c.c_str()), nullptr};
  Worker w;
  const int rc = posix_spawn(&w.pid, self.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(in[0]);
  close(out[1]);
  if (rc != 0)
    throw std::runtime_error("posix_spawn of a kernel worker failed: " +
                             std::string(std::strerror(rc)));
  w.to = in[1];
  w.from = out[0];
  return w;
}

char read_byte(int fd) {
  char c = 0;
  return read(fd, &c, 1) == 1 ? c : '\0';
}

// k processes, each with a context of its own on GPU 0, each running the kernel once; timed
// from the moment all are ready to the moment the last one's kernel has finished.
Outcome processes_concurrent_kernels(const std::string& self, int k, long long cycles) {
  std::vector<Worker> workers;
  for (int i = 0; i < k; ++i) workers.push_back(spawn_worker(self, cycles));
  bool ok = true;
  for (Worker& w : workers) ok = ok && read_byte(w.from) == 'R';
  const double t0 = now_seconds();
  for (Worker& w : workers) ok = ok && write(w.to, "G", 1) == 1;
  for (Worker& w : workers) ok = ok && read_byte(w.from) == 'D';
  const double seconds = now_seconds() - t0;
  for (Worker& w : workers) {
    int status = 0;
    close(w.to);
    close(w.from);
    waitpid(w.pid, &status, 0);
    ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  return {seconds, ok};
}

// ---- applications: block matrix multiply, N-body ----

const char* policy_name(ws::Policy p) {
  switch (p) {
    case ws::Policy::Simple:
      return "simple";
    case ws::Policy::ImprovedSimple:
      return "improved_simple";
    case ws::Policy::ReadWrite:
      return "read_write";
    case ws::Policy::Async:
      return "async";
  }
  return "?";
}

// BMM over the two-process World (one GPU per process, as MPI + CUDA has it), under each
// policy against MPI + CUDA, and async against simple.
void run_bmm_benchmarks(Suite& suite, Worlds& worlds, const StreamSuiteOptions& options, int me,
                        int gpus) {
  const std::size_t n = options.quick ? 2048 : 8192;
  constexpr int kBlocks = 8;
  apps::stream::BmmInputs in;
  if (me == 0) {
    in = apps::stream::make_bmm_inputs(n, kBlocks, 3);
  } else {
    in.n = n;
    in.column_blocks = kBlocks;
  }
  auto checked = [&](double seconds) {
    if (me != 0) return Outcome{0, true};
    const double error = apps::stream::bmm_error(in);
    for (auto& block : in.c) std::fill(block.begin(), block.end(), 0.0F);  // no stale pass
    return Outcome{seconds, error < 1e-4};
  };
  auto weft_with = [&](ws::Policy p) {
    return [&, p] { return checked(apps::stream::run_bmm(*worlds.two_processes, in, p)); };
  };
  const std::string name = "bmm_" + std::to_string(n) + "_";
  for (ws::Policy p :
       {ws::Policy::Simple, ws::Policy::ImprovedSimple, ws::Policy::ReadWrite, ws::Policy::Async}) {
    suite.compare(
        name + policy_name(p), "s", Better::lower,
        {{"weft", weft_with(p)},
         {"mpi+cuda", [&] { return checked(apps::stream::run_bmm_mpi_cuda(in, me % gpus)); }}},
        3);
  }
  suite.compare(
      name + "async_vs_simple", "s", Better::lower,
      {{"weft", weft_with(ws::Policy::Async)}, {"weft_simple", weft_with(ws::Policy::Simple)}}, 3);
}

// N-body on one GPU, on two GPUs of one process and on two processes, against MPI + CUDA
// (two processes, one GPU each); the CPU executor's time per step for the speed-up.
void run_nbody_benchmarks(Suite& suite, Worlds& worlds, const StreamSuiteOptions& options, int me,
                          int gpus) {
  apps::stream::NbodyOptions o;
  o.bodies = options.quick ? 16384 : 65536;
  o.steps = options.quick ? 50 : 500;
  const apps::stream::Bodies start = apps::stream::make_bodies(o.bodies, 9);
  // Every run's result is checked against the first weft run's (float sums of one motion).
  double reference = 0;
  auto checked = [&](double seconds, const apps::stream::Bodies& b) {
    if (me != 0) return Outcome{0, true};
    const double sum = apps::stream::nbody_checksum(b);
    if (reference == 0) reference = sum;
    return Outcome{seconds, std::abs(sum - reference) <= 1e-3 * std::abs(reference)};
  };
  auto on = [&](ws::World* world) {
    return [&, world] {
      apps::stream::Bodies b = start;
      return checked(apps::stream::run_nbody(*world, b, o), b);
    };
  };
  auto mpi_cuda = [&] {
    apps::stream::Bodies b = start;
    return checked(apps::stream::run_nbody_mpi_cuda(b, o, me % gpus), b);
  };
  const std::string name = "nbody_" + std::to_string(o.bodies) + "_";
  std::unique_ptr<ws::World> one_gpu;
  if (me == 0) {
    ws::WorldOptions wo;
    wo.device = ws::DeviceChoice::Cuda;
    wo.mpi = ws::MpiUse::Off;
    wo.gpus = {0};
    one_gpu = std::make_unique<ws::World>(wo);
  }
  const Outcome idle{0, true};
  Metric one{name + "1gpu", "s", Better::lower, {}};
  for (int s = 0; s < 3 + 1; ++s) {
    const Outcome r = me == 0 ? on(one_gpu.get())() : idle;
    if (s > 0) one.samples.push_back(r.value);  // the first warms up
  }
  suite.add_metric(one);
  if (gpus >= 2) {
    suite.compare(name + "2gpus", "s", Better::lower,
                  {{"weft", [&] { return me == 0 ? on(worlds.two_gpus.get())() : idle; }},
                   {"mpi+cuda", mpi_cuda}},
                  3);
    const double two = suite.comparisons().back().weft;
    suite.add_metric(Metric{"nbody_efficiency_2gpu",
                            "ratio",
                            Better::higher,
                            {two > 0 ? one.median() / (2 * two) : 0}});
  }
  if (gpus >= 4) {
    std::unique_ptr<ws::World> four;
    if (me == 0) {
      ws::WorldOptions wo;
      wo.streams_per_process = 4;
      wo.device = ws::DeviceChoice::Cuda;
      wo.mpi = ws::MpiUse::Off;
      wo.gpus = {0, 1, 2, 3};
      four = std::make_unique<ws::World>(wo);
    }
    Metric m{name + "4gpus", "s", Better::lower, {}};
    for (int s = 0; s < 3 + 1; ++s) {
      const Outcome r = me == 0 ? on(four.get())() : idle;
      if (s > 0) m.samples.push_back(r.value);
    }
    suite.add_metric(m);
    suite.add_metric(Metric{"nbody_efficiency_4gpu",
                            "ratio",
                            Better::higher,
                            {m.median() > 0 ? one.median() / (4 * m.median()) : 0}});
  }
  suite.compare(name + "2processes", "s", Better::lower,
                {{"weft", on(worlds.two_processes.get())}, {"mpi+cuda", mpi_cuda}}, 3);
  if (gpus >= 2) {  // one GPU each: the two processes' efficiency beside one process's
    const double two = suite.comparisons().back().weft;
    suite.add_metric(Metric{"nbody_efficiency_2processes",
                            "ratio",
                            Better::higher,
                            {two > 0 ? one.median() / (2 * two) : 0}});
  }
  if (me == 0) {
    // The CPU on every core of the executor, for a few steps (its time per step times the
    // steps is the CPU-only run's).
    weft::cpu::Executor executor;
    apps::stream::NbodyOptions few = o;
    few.steps = 2;
    apps::stream::Bodies b = start;
    const double per_step = apps::stream::run_nbody_cpu(executor, b, few) / few.steps;
    suite.add_metric(
        Metric{name + "cpu_executor_seconds_per_step", "s", Better::lower, {per_step}});
    suite.add_metric(Metric{name + "speedup_1gpu_vs_cpu",
                            "ratio",
                            Better::higher,
                            {per_step * o.steps / one.median()}});
  }
}

}  // namespace

bool run_kernel_worker_if_asked(int argc, char** argv, int& status) {
  if (argc != 3 || std::strcmp(argv[1], kWorkerFlag) != 0) return false;
  const long long cycles = std::atoll(argv[2]);
  int* flag = nullptr;
  status = 1;
  if (cudaSetDevice(0) != cudaSuccess || cudaMalloc(&flag, sizeof(int)) != cudaSuccess) return true;
  spin<<<kSpinBlocks, kSpinThreads>>>(1000, flag);  // the context and the module loaded
  if (cudaDeviceSynchronize() != cudaSuccess) return true;
  cudaMemset(flag, 0, sizeof(int));
  if (write(1, "R", 1) != 1 || read_byte(0) != 'G') return true;
  spin<<<kSpinBlocks, kSpinThreads>>>(cycles, flag);
  int done = 0;
  if (cudaMemcpy(&done, flag, sizeof(int), cudaMemcpyDeviceToHost) != cudaSuccess) return true;
  if (write(1, "D", 1) != 1) return true;
  status = done == 1 ? 0 : 1;
  return true;
}

Suite run_stream_suite(const StreamSuiteOptions& options, bool& is_reporter) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized == 0) {
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    std::atexit([] {
      int finalized = 0;
      MPI_Finalized(&finalized);
      if (finalized == 0) MPI_Finalize();
    });
  }
  int processes = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &processes);
  if (processes != 2) {
    throw std::runtime_error("weft bench streams runs in 2 MPI processes, not " +
                             std::to_string(processes));
  }
  const int me = mpi_rank();
  is_reporter = me == 0;
  const int gpus = gpu_count();
  if (gpus == 0) throw std::runtime_error("weft bench streams: no usable GPU");

  SuiteOptions so;
  so.samples = options.samples;
  so.warmups = 1;
  so.settle_ms = 5;
  so.quiet = me != 0;
  Suite suite("streams", so);
  cudaDeviceProp prop{};
  WEFT_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  suite.set_gpu(prop.name, gpus);
  auto wanted = [&](const std::string& family) {
    return options.only.empty() ||
           std::find(options.only.begin(), options.only.end(), family) != options.only.end();
  };

  Worlds worlds;
  auto local_world = [](std::vector<int> gpu_of_stream) {
    ws::WorldOptions o;
    o.streams_per_process = static_cast<int>(gpu_of_stream.size());
    o.gpus = std::move(gpu_of_stream);
    o.device = ws::DeviceChoice::Cuda;
    o.mpi = ws::MpiUse::Off;
    return std::make_unique<ws::World>(o);
  };
  if (me == 0) {
    worlds.same_gpu = local_world({0, 0});
    if (gpus >= 2) worlds.two_gpus = local_world({0, 1});
    worlds.kernels = local_world(std::vector<int>(16, 0));
  }
  {
    ws::WorldOptions o;
    o.streams_per_process = 1;
    o.gpus = {me % gpus};
    o.device = ws::DeviceChoice::Cuda;
    o.mpi = ws::MpiUse::On;
    worlds.two_processes = std::make_unique<ws::World>(o);
    o.cuda_ipc = false;
    worlds.two_processes_staged = std::make_unique<ws::World>(o);
  }
  const bool cuda_aware = worlds.two_processes->mpi_cuda_aware();
  if (me == 0) {
    std::fprintf(stderr,
                 "[streams] %d GPU(s); MPI %s CUDA-aware: device buffers between processes go "
                 "over CUDA IPC, or (two_processes_staged) %s\n",
                 gpus, cuda_aware ? "is" : "is not",
                 cuda_aware ? "to MPI as they are" : "through pinned chunks");
  }

  MpiCuda mpi_cuda;
  const Outcome idle{0, true};  // process 1's part of a contender that runs in process 0 alone
  if (wanted("pingpong")) {
    std::vector<std::size_t> sizes{8, 1024, 64u << 10, 1u << 20, 16u << 20, 64u << 20, 256u << 20};
    if (options.quick) sizes = {8, 1u << 20, 64u << 20};
    std::vector<PingPath> paths{PingPath::SameGpu, PingPath::TwoProcesses,
                                PingPath::TwoProcessesStaged};
    if (gpus >= 2) paths.insert(paths.begin() + 1, PingPath::TwoGpus);
    for (PingPath path : paths) {
      for (std::size_t bytes : sizes) {
        const int it = iterations_for(bytes, options.quick);
        const bool local = path == PingPath::SameGpu || path == PingPath::TwoGpus;
        // MPI + CUDA on the GPUs the weft case uses: both on GPU 0 for one GPU, else one each.
        const int peer_gpu = path == PingPath::SameGpu ? 0 : me % gpus;
        std::vector<Contender> c;
        c.push_back({"weft", [&, path, bytes, it, local] {
                       if (local && me != 0) return idle;
                       return weft_pingpong(world_for(worlds, path), bytes, it,
                                            expected_path(path, bytes, cuda_aware));
                     }});
        c.push_back({"mpi+cuda",
                     [&, bytes, it, peer_gpu] { return mpi_cuda.pingpong(peer_gpu, bytes, it); }});
        if (path == PingPath::TwoGpus) {
          c.push_back({"cudaMemcpyPeerAsync",
                       [&, bytes, it] { return me == 0 ? peer_copy_pingpong(bytes, it) : idle; }});
        }
        if (path == PingPath::TwoProcessesStaged) {
          c.push_back({"mpi_host_only", [&, bytes, it, peer_gpu] {
                         return mpi_cuda.host_pingpong(peer_gpu, bytes, it);
                       }});
        }
        suite.compare(std::string("pingpong_") + path_name(path) + "_" + size_name(bytes), "s",
                      Better::lower, std::move(c));
      }
    }
  }
  if (wanted("bcast")) {
    if (me == 0) std::fprintf(stderr, "[streams] NCCL: not on this machine, not measured\n");
    std::vector<std::size_t> sizes{1u << 20, 16u << 20, 64u << 20};
    if (options.quick) sizes = {1u << 20};
    for (std::size_t bytes : sizes) {
      const int it = iterations_for(bytes, options.quick);
      suite.compare(
          "bcast_" + std::to_string(processes) + "processes_" + size_name(bytes), "s",
          Better::lower,
          {{"weft", [&, bytes, it] { return weft_bcast(*worlds.two_processes, bytes, it); }},
           {"mpi+cuda", [&, bytes, it] { return mpi_cuda.bcast(me % gpus, bytes, it); }}});
    }
  }
  if (wanted("concurrent_kernels")) {
    const long long cycles = spin_cycles();
    for (int k : {1, 2, 4, 8, 16}) {
      std::vector<Contender> c;
      c.push_back({"weft", [&, k] {
                     return me == 0 ? weft_concurrent_kernels(*worlds.kernels, k, cycles) : idle;
                   }});
      c.push_back({"process_per_stream", [&, k] {
                     return me == 0 ? processes_concurrent_kernels(options.self, k, cycles) : idle;
                   }});
      suite.compare("concurrent_kernels_" + std::to_string(k), "s", Better::lower, std::move(c),
                    options.quick ? 2 : 0);
    }
  }
  if (wanted("bmm")) run_bmm_benchmarks(suite, worlds, options, me, gpus);
  if (wanted("nbody")) run_nbody_benchmarks(suite, worlds, options, me, gpus);
  // Process 1 has little to do in the benchmarks of process 0 alone: it waits here, so that
  // neither leaves MPI before the other is done with it.
  MPI_Barrier(MPI_COMM_WORLD);
  return suite;
}

}  // namespace weft::bench::stream
