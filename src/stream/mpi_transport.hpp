// Messages between processes (src/stream only): task streams' sends and receives over MPI,
// and the news of streams that ended, which lets a receive from one fail instead of waiting
// forever.
//
// Each message is a header (its size, and its bytes too when it is small) and then its
// payload in messages of chunk_bytes, all on the World's own duplicate of MPI_COMM_WORLD, with
// an MPI tag that packs the program's tag, header or payload, and the two streams' local
// indices. A device buffer's chunks pass through pinned slots, copied and sent in a pipeline,
// unless the MPI is CUDA-aware, which is then given the device buffer itself. Between two
// processes of one node a device buffer goes from GPU to GPU instead: the header carries its
// CUDA IPC handle, the receiver maps it, copies, and replies; a receiver that cannot map it
// replies so, and the chunks follow as above.
// Messages of one stream to one rank with one tag go one after another, so that MPI's order
// is theirs.
//
// When a stream's body ends, its process tells every other process which messages it sent to
// whom (counts by destination and tag). A receive from a stream that has ended fails once as
// many headers from it have arrived as it sent; messages nobody received are taken in, and
// reported, when the run ends. spec/stream_processes.pml models this end of a run.
//
// A World that is destroyed tells every other process how many runs it made, and takes in
// what they send until each has done the same. A process in a run the destroyed one never
// made counts that process's streams as ended (having sent nothing, at no barrier): its
// receives from them, sends to them and barriers fail, and the run fails, naming it, instead
// of waiting; spec/world_close.pml models this
// (docs/decisions/048-world-close-handshake.md).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "stream/operation.hpp"
#include "weft/stream/world.hpp"

namespace weft::stream::detail {

class StreamCore;
class WorldCore;

/// True when an MPI launcher (mpirun, srun with PMI/PMIx) started this process.
[[nodiscard]] bool launched_by_mpi() noexcept;

class MpiTransport {
 public:
  /// nullptr where `use` does not call for MPI here; throws weft::InvalidState where it does
  /// and weft was built without MPI, or the MPI cannot serve threads.
  static std::unique_ptr<MpiTransport> create(MpiUse use);
  virtual ~MpiTransport() = default;

  [[nodiscard]] virtual int rank() const noexcept = 0;
  [[nodiscard]] virtual int size() const noexcept = 0;
  [[nodiscard]] virtual bool cuda_aware() const noexcept = 0;
  /// Throws weft::MessageError naming the values when the processes' options differ.
  virtual void check_agreement(int streams, std::size_t chunk_bytes, std::size_t eager_bytes) = 0;
  /// Every process says whether it built its part of the World; throws weft::InvalidState
  /// naming a process that did not, where this one did. Collective.
  virtual void agree_built(bool built) = 0;
  [[nodiscard]] virtual int max_user_tag(int streams) const noexcept = 0;
  virtual void attach(WorldCore& world) = 0;

  /// Takes a remote send or receive of `stream` (its thread).
  virtual void post(StreamCore& stream, const OpPtr& op) = 0;
  /// Moves `stream`'s MPI operations on (its thread).
  virtual void progress(StreamCore& stream) = 0;
  /// The stream's body has ended: its receives still pending are cancelled, and reported.
  virtual void abandon_receives(StreamCore& stream, std::vector<std::string>& problems) = 0;
  /// Tells the other processes what the stream sent (its sends in flight are finished by
  /// end_run).
  virtual void stream_ended(StreamCore& stream) = 0;
  /// Takes in the other processes' news (any thread).
  virtual void poll_notices(WorldCore& world) = 0;
  /// The processes' part of barrier `generation` (the last local stream to arrive calls it,
  /// and its MPI operations move on meanwhile).
  virtual void barrier(WorldCore& world, StreamCore& stream, std::uint64_t generation) = 0;
  virtual void begin_run(WorldCore& world) = 0;
  /// After every local stream's thread has ended: finishes their sends, takes in what was sent
  /// to them unreceived (each a problem), and waits for every other process to get here (one
  /// that destroyed its World before this run is left out, a problem too).
  virtual void end_run(WorldCore& world, std::vector<std::string>& problems) = 0;
};

}  // namespace weft::stream::detail
