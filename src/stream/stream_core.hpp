// A task stream's state (src/stream only): its identity, device and queues, its pending
// operations, and the wait loop that moves them on.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "stream/device.hpp"
#include "stream/operation.hpp"
#include "stream/stream_life.hpp"
#include "weft/stream/task_stream.hpp"

namespace weft::stream::detail {

class WorldCore;

/// Two pinned chunks a stream's incoming copies between GPUs without peer access pass
/// through, and the events after which each may be written again.
struct Staging {
  std::mutex mutex;
  void* slot[2] = {nullptr, nullptr};
  EventPtr free_after[2];
};

class StreamCore {
 public:
  StreamCore(WorldCore& world, int local_index, Device& device, DeviceInfo info);
  ~StreamCore();
  StreamCore(const StreamCore&) = delete;
  StreamCore& operator=(const StreamCore&) = delete;

  [[nodiscard]] WorldCore& world() const noexcept { return world_; }
  [[nodiscard]] int rank() const noexcept { return rank_; }
  [[nodiscard]] int local_index() const noexcept { return local_index_; }
  [[nodiscard]] const DeviceInfo& info() const noexcept { return info_; }
  [[nodiscard]] Device& device() const noexcept { return device_; }
  /// Kernels and region copies.
  [[nodiscard]] Queue& queue() const noexcept { return *queue_; }
  /// Message copies into this stream's buffers (and the staging of its MPI sends).
  [[nodiscard]] Queue& transfers() const noexcept { return *transfers_; }
  [[nodiscard]] Staging& staging() noexcept { return staging_; }
  /// A region's copy enqueued on transfers() (owner only): the next device message posted
  /// waits for it, as it waits for the kernels before it.
  void note_region_copy(EventPtr copy) { region_copy_ = std::move(copy); }

  /// Called on the stream's thread as its body starts and after it ends.
  void begin_run();
  void end_run();
  /// Throws weft::InvalidState unless the caller is the stream's own thread.
  void check_owner(const char* call) const;

  /// Posts a send or receive, validated, and returns it pending (or already ended).
  [[nodiscard]] OpPtr post(OpKind kind, const Buffer& buffer, int peer, int tag);
  /// Blocks until `op` ends; throws its error. An op to or from this stream's own rank that
  /// is still unmatched fails at once: only this thread could post its match.
  void wait(Operation& op);
  /// Moves pending work on once; true when `op` has ended (throws its error).
  [[nodiscard]] bool test(Operation& op);
  /// Request::wait and Request::test: during the run that posted `op`, the owner's wait and
  /// test from the owner's thread (weft::InvalidState from another); after that run, or once
  /// the World is gone, how `op` ended, without the owner.
  static void wait_request(Operation& op);
  [[nodiscard]] static bool test_request(Operation& op);

  /// Shared with the handles this stream gives out (stream_life.hpp).
  [[nodiscard]] const std::shared_ptr<StreamLife>& life() const noexcept { return life_; }
  /// Device memory for a DeviceBytes, recorded so that the stream frees it if it goes first;
  /// and its release by the handle (a no-op once the stream has freed it).
  [[nodiscard]] void* allocate_tracked(std::size_t bytes);
  static void release_tracked(StreamCore* owner, StreamLife& life, void* data) noexcept;

  /// Moves the stream's MPI operations on once (its own thread, or the World's after it ended).
  void progress_messages() { progress(); }

  /// Wakes the stream's thread if it sleeps in wait (any thread).
  void notify() noexcept;

  [[nodiscard]] TransferCounts counts() const noexcept { return counts_; }
  /// The stream's MPI operations in the order posted (owner only; the MPI transport's).
  [[nodiscard]] std::deque<OpPtr>& mpi_ops() noexcept { return mpi_ops_; }
  /// Remote messages this stream has sent, by (destination rank, tag); and remote messages
  /// whose header it has received, by (source rank, tag) (owner only; read once it ended).
  std::map<std::pair<int, int>, std::uint64_t> remote_sent;
  std::map<std::pair<int, int>, std::uint64_t> remote_headers;
  /// Barriers this stream has passed (written by its thread; read by others under the
  /// barrier's lock).
  std::uint64_t barriers = 0;
  /// Collective calls this stream has made in the run (its thread only).
  std::size_t collectives = 0;
  /// Requests of the last run ended without having been waited on, and unreceived messages:
  /// what end_run found, for World::run to report.
  std::vector<std::string> problems;

 private:
  void progress();
  void observe(Operation& op);
  void settle_copy(Operation& op);
  void fail_unmatchable(Operation& op);
  /// ~StreamCore: frees what the handles still alive hold, and marks them so.
  void release_handles() noexcept;

  WorldCore& world_;
  int local_index_;
  int rank_;
  Device& device_;
  DeviceInfo info_;
  std::unique_ptr<Queue> queue_;
  std::unique_ptr<Queue> transfers_;
  Staging staging_;
  EventPtr region_copy_;  // the last region copy on transfers_ no message has waited for yet
  /// Bumped (release) and notified by whoever ends one of this stream's operations; the
  /// stream's wait reads it (acquire) before it checks, and sleeps only while it is unchanged.
  std::atomic<std::uint32_t> wake_{0};
  std::vector<OpPtr> pending_;
  std::deque<OpPtr> mpi_ops_;
  TransferCounts counts_;
  std::shared_ptr<StreamLife> life_ = std::make_shared<StreamLife>();
};

}  // namespace weft::stream::detail
