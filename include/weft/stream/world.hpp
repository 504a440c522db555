// weft/stream/world.hpp - a World of task streams (seed 001): N task streams in each process
// of an MPI job (or in this process alone), ranked rank = process_rank * N + local_index.
//
//   weft::stream::World world({.streams_per_process = 4});
//   world.run([&](weft::stream::TaskStream& ts) { ... });   // ts.rank() in 0 .. world.size()-1
//
// Started with mpirun, the World spans every process of MPI_COMM_WORLD; started alone it is
// one process and needs no MPI launcher. Every process must ask for the same number of
// streams. Logical GPU i of a process (the one stream i drives) is physical GPU
// gpus[i % gpus.size()]: several logical GPUs may be one physical GPU, whose one context then
// runs their kernels side by side. On a machine without a usable GPU every stream's device is
// the host.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "weft/stream/task_stream.hpp"

namespace weft::stream {

/// Whether a World uses MPI.
enum class MpiUse : std::uint8_t {
  Auto,  // when the process was started by an MPI launcher, or MPI is already initialised
  On,    // always (a lone process becomes an MPI singleton)
  Off,   // never: a World of this process alone
};

/// Which device the streams drive.
enum class DeviceChoice : std::uint8_t {
  Auto,  // CUDA GPUs when there are usable ones, else the host
  Host,  // the host, even where there are GPUs
  Cuda,  // CUDA GPUs; constructing the World fails where there are none
};

struct WorldOptions {
  int streams_per_process = 1;
  /// Physical GPUs for the logical ones, in order; empty: every visible GPU.
  std::vector<int> gpus;
  DeviceChoice device = DeviceChoice::Auto;
  MpiUse mpi = MpiUse::Auto;
  /// Host sends up to this size are buffered and complete at once (as MPI's eager sends).
  std::size_t eager_bytes = 64 * 1024;
  /// The chunk of pipelined staging (device buffers through pinned memory).
  std::size_t chunk_bytes = 4u << 20;
  /// Enable peer access between the GPUs of a process (copies go through pinned chunks
  /// without it).
  bool peer_access = true;
  /// Device buffers between two processes of one node go from GPU to GPU over CUDA IPC (the
  /// receiver maps the sender's buffer and copies from it); without it, or where the mapping
  /// fails, they go through pinned chunks over MPI.
  bool cuda_ipc = true;
};

namespace detail {
class WorldCore;
}

class World {
 public:
  /// Throws weft::InvalidArgument for options out of range, weft::InvalidState when CUDA was
  /// asked for and there is no usable GPU or MPI was asked for and weft was built without it,
  /// weft::MessageError when the processes disagree on streams_per_process.
  explicit World(WorldOptions options = {});
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  [[nodiscard]] int size() const noexcept;
  [[nodiscard]] int processes() const noexcept;
  [[nodiscard]] int process_rank() const noexcept;
  [[nodiscard]] int streams_per_process() const noexcept;
  [[nodiscard]] bool uses_mpi() const noexcept;
  /// True when the installed MPI passes device buffers itself (a CUDA-aware build, asked at
  /// run time); device buffers are staged through pinned chunks otherwise.
  [[nodiscard]] bool mpi_cuda_aware() const noexcept;
  [[nodiscard]] const WorldOptions& options() const noexcept;

  /// Runs `body` on every task stream of this process, each on its own thread, and returns
  /// when every stream of every process has ended. A stream whose body throws ends there: the
  /// streams waiting on it get weft::MessageError rather than waiting forever. run() then
  /// throws the first error of this process's streams (the others are in errors()), or
  /// weft::MessageError when a stream ended with messages sent to it unreceived or requests
  /// of its own not waited on. A World may run several bodies, one after another.
  void run(const std::function<void(TaskStream&)>& body);
  /// Every error of the last run, with the rank it came from.
  [[nodiscard]] const std::vector<std::string>& errors() const noexcept;

 private:
  std::unique_ptr<detail::WorldCore> core_;
};

}  // namespace weft::stream
