// weft/stream/task_stream.hpp - a task stream (seed 001): a CPU thread bound to one CUDA
// stream on a logical GPU, with a rank in its World. Its body is ordinary code that launches
// kernels on its stream, keeps data in shared regions and talks to the other task streams by
// messages, as an MPI rank would.
//
//   world.run([](weft::stream::TaskStream& ts) {
//     std::vector<double> x(n, ts.rank());
//     if (ts.rank() == 0) ts.send(weft::stream::host(x.data(), n), 1, /*tag=*/0);
//     if (ts.rank() == 1) ts.recv(weft::stream::host(x.data(), n), 0, 0);
//     ts.barrier();
//   });
//
// Every call is made from the stream's own thread (the one running its body). Messages match
// as MPI's do: by source and tag, in the order they were sent; wildcards are not offered.
// A send of a host buffer up to WorldOptions::eager_bytes completes at once (its bytes are
// copied aside); a larger one, and every send of a device buffer, completes once the receiver
// has it, so two streams that both send large messages first and receive second wait for
// each other forever, as with MPI: pair a blocking send with an irecv, or use isend.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <limits>
#include <memory>
#include <string>

#include "weft/error.hpp"
#include "weft/stream/buffer.hpp"
#include "weft/stream/region.hpp"
#include "weft/stream/request.hpp"

// cudaStream_t as CUDA declares it, so that this header does not need CUDA's.
struct CUstream_st;
using cudaStream_t = CUstream_st*;

namespace weft::stream {

namespace detail {
class StreamCore;
struct StreamLife;
}  // namespace detail

/// The device a task stream drives.
struct DeviceInfo {
  bool is_host = true;  // no GPU: device memory is host memory, kernels run on the thread
  int logical = 0;      // the stream's logical GPU
  int physical = -1;    // the CUDA ordinal it maps to (-1 on the host)
  std::string name;     // "host" or the GPU's name
};

/// What a kernel launch is given: the stream to enqueue on (null on the host device, where
/// the launch function does its work before it returns).
struct Launch {
  cudaStream_t stream = nullptr;
  int device = -1;
  bool on_host = true;
};

/// Transfers a task stream has completed, by path (indexed by Path).
struct TransferCounts {
  std::uint64_t count[kPaths] = {};
  std::uint64_t bytes[kPaths] = {};
  [[nodiscard]] std::uint64_t of(Path p) const noexcept { return count[static_cast<int>(p)]; }
};

/// Device memory of a task stream's device, freed when it goes, or with its World if that goes
/// first (data() then still returns the freed address: nothing may use it).
class DeviceBytes {
 public:
  DeviceBytes() = default;
  /// `bytes` at `data`, allocated by `owner` (TaskStream::allocate).
  DeviceBytes(detail::StreamCore* owner, void* data, std::size_t bytes) noexcept;
  DeviceBytes(DeviceBytes&& o) noexcept;
  DeviceBytes& operator=(DeviceBytes&& o) noexcept;
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
  ~DeviceBytes();

  [[nodiscard]] void* data() const noexcept { return data_; }
  [[nodiscard]] std::size_t bytes() const noexcept { return bytes_; }

 private:
  detail::StreamCore* owner_ = nullptr;
  std::shared_ptr<detail::StreamLife> life_;
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

class TaskStream {
 public:
  explicit TaskStream(detail::StreamCore& core) noexcept : core_(&core) {}

  // ---- who and where ----
  [[nodiscard]] int rank() const noexcept;          // process_rank * streams + local_index
  [[nodiscard]] int size() const noexcept;          // ranks in the World
  [[nodiscard]] int local_index() const noexcept;   // 0 .. streams_per_process - 1
  [[nodiscard]] int process_rank() const noexcept;  // the MPI rank (0 without MPI)
  [[nodiscard]] const DeviceInfo& device() const noexcept;
  /// The stream's CUDA stream (null on the host device).
  [[nodiscard]] cudaStream_t cuda_stream() const noexcept;

  // ---- memory ----
  /// `bytes` of device memory (host memory on the host device).
  [[nodiscard]] DeviceBytes allocate(std::size_t bytes);
  /// A shared region of `count` elements (host side zeroed; state InHost).
  template <class T>
  [[nodiscard]] Region<T> region(std::size_t count, Policy policy) {
    if (count > std::numeric_limits<std::size_t>::max() / sizeof(T)) {
      throw InvalidArgument("weft::stream::TaskStream::region: " + std::to_string(count) +
                            " elements of " + std::to_string(sizeof(T)) + " bytes overflow size_t");
    }
    return Region<T>(make_region(count * sizeof(T), policy));
  }

  // ---- kernels ----
  /// Runs `kernel` on the stream after the copies its uses need under their regions' policies,
  /// and makes the copies that follow it (Simple and ImprovedSimple wait for the kernel
  /// there). Each region may appear once in `uses`.
  void launch(std::initializer_list<Use> uses, const std::function<void(const Launch&)>& kernel);
  /// Waits for everything enqueued on the stream: kernels, and the copies of its regions and
  /// messages.
  void synchronize();

  // ---- messages ----
  void send(const Buffer& buffer, int dest, int tag);
  void recv(const Buffer& buffer, int source, int tag);
  [[nodiscard]] Request isend(const Buffer& buffer, int dest, int tag);
  [[nodiscard]] Request irecv(const Buffer& buffer, int source, int tag);
  /// Every rank of the World calls the collectives, in the same order, with the same root and
  /// size; within a process a call that differs throws weft::MessageError.
  void barrier();
  void bcast(const Buffer& buffer, int root);
  /// Sums `count` elements across all ranks into every rank's buffer.
  void allreduce_sum(double* data, std::size_t count, Memory memory = Memory::Host);
  void allreduce_sum(float* data, std::size_t count, Memory memory = Memory::Host);
  void allreduce_sum(std::int64_t* data, std::size_t count, Memory memory = Memory::Host);
  /// The largest tag a program may use (tags run from 0).
  [[nodiscard]] int max_tag() const noexcept;

  [[nodiscard]] TransferCounts transfers() const noexcept;
  [[nodiscard]] detail::StreamCore& core() const noexcept { return *core_; }

 private:
  std::shared_ptr<detail::RegionCore> make_region(std::size_t bytes, Policy policy);
  detail::StreamCore* core_;
};

}  // namespace weft::stream
