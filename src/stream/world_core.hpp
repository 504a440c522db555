// A World's state (src/stream only): its processes and task streams, their devices, the
// mailboxes in-process messages meet in, the barrier, and the MPI transport between
// processes.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "stream/device.hpp"
#include "stream/operation.hpp"
#include "stream/stream_core.hpp"
#include "weft/stream/world.hpp"

namespace weft::stream::detail {

class MpiTransport;

/// Where the messages sent to one local stream wait for their receive, and its receives for
/// their message. Both lists keep posting order, which is what makes matching MPI's
/// (non-overtaking between one source and one destination with one tag).
/// spec/stream_mailbox.pml models how operations meet here and end when a stream ends.
struct Mailbox {
  std::mutex mutex;
  std::deque<OpPtr> sends;  // arrived, unmatched
  std::deque<OpPtr> recvs;  // posted, unmatched
  bool ended = false;       // its stream's body has ended (under mutex)
};

class WorldCore {
 public:
  explicit WorldCore(WorldOptions options);
  ~WorldCore();

  [[nodiscard]] const WorldOptions& options() const noexcept { return options_; }
  [[nodiscard]] int size() const noexcept { return processes_ * streams_; }
  [[nodiscard]] int processes() const noexcept { return processes_; }
  [[nodiscard]] int process_rank() const noexcept { return process_rank_; }
  [[nodiscard]] int streams() const noexcept { return streams_; }
  [[nodiscard]] bool is_local(int rank) const noexcept { return rank / streams_ == process_rank_; }
  [[nodiscard]] int local_of(int rank) const noexcept { return rank % streams_; }
  [[nodiscard]] int max_tag() const noexcept { return max_tag_; }
  /// Tags the collectives use, above every program's.
  [[nodiscard]] int bcast_tag() const noexcept { return max_tag_ + 1; }
  [[nodiscard]] int reduce_tag() const noexcept { return max_tag_ + 2; }
  [[nodiscard]] MpiTransport* mpi() const noexcept { return mpi_.get(); }
  [[nodiscard]] StreamCore& stream(int local) const { return *streams_core_[local]; }
  /// Whether a copy from `from`'s device to `to`'s can go over peer access.
  [[nodiscard]] bool peer_path(int from_local, int to_local) const;

  void post_local_send(const OpPtr& op);
  void post_local_recv(const OpPtr& op);
  /// Takes an unmatched send out of its mailbox (its stream ended without waiting for it);
  /// false when it was matched meanwhile.
  bool withdraw_local_send(const OpPtr& op);
  bool withdraw_local_recv(const OpPtr& op);
  /// True once local stream `local`'s body has ended in this run.
  [[nodiscard]] bool local_ended(int local) const noexcept;

  /// The barrier of every rank (called by each stream's thread).
  void barrier(StreamCore& stream);

  /// One collective call: its kind ("barrier", "bcast", "allreduce_sum of doubles", ...), root
  /// and bytes.
  struct Collective {
    std::string_view kind;
    int root = 0;
    std::size_t bytes = 0;
  };
  /// Checks that `stream`'s next collective call is the one every other stream of this process
  /// made (or will make) at the same place in the run: the first stream there records it, the
  /// others compare. Throws weft::MessageError naming both calls where they differ, so that
  /// the program fails instead of waiting in mismatched collectives. Streams of other
  /// processes are not compared.
  void check_collective(StreamCore& stream, Collective call);

  void run(const std::function<void(TaskStream&)>& body);
  [[nodiscard]] const std::vector<std::string>& errors() const noexcept { return errors_; }

 private:
  void make_devices();
  // The devices, the streams and their mailboxes.
  void build_streams();
  void stream_ended(StreamCore& stream);
  void fail_barrier_waiters_locked();
  [[nodiscard]] std::string barrier_blocker_locked(std::uint64_t generation) const;

  WorldOptions options_;
  std::unique_ptr<MpiTransport> mpi_;
  int processes_ = 1;
  int process_rank_ = 0;
  int streams_ = 1;
  int max_tag_ = 0;
  std::vector<std::unique_ptr<Device>> devices_;  // one per physical device used
  std::vector<int> device_of_local_;              // index into devices_
  std::vector<std::vector<bool>> peer_;           // by devices_ index
  std::vector<std::unique_ptr<StreamCore>> streams_core_;
  std::vector<std::unique_ptr<Mailbox>> mailboxes_;
  std::unique_ptr<std::atomic<bool>[]> ended_;
  std::atomic<bool> running_{false};  // while run() runs (World::run is not reentrant)

  // The barrier: streams of this process arrive; the last runs the processes' barrier.
  std::mutex barrier_mutex_;
  std::condition_variable barrier_cv_;
  int barrier_arrived_ = 0;
  std::uint64_t barrier_generation_ = 0;
  std::string barrier_failure_;

  // The collective calls of this run in order, each as the first stream to reach it made it.
  struct RecordedCollective {
    Collective call;
    int rank;
  };
  std::mutex collectives_mutex_;
  std::vector<RecordedCollective> collectives_;

  std::vector<std::string> errors_;
};

}  // namespace weft::stream::detail
