// A World: its devices, in-process message matching, the barrier, and run().
#include "stream/world_core.hpp"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>
#include <thread>

#include "common/flag_claim.hpp"
#include "stream/mpi_transport.hpp"
#include "weft/error.hpp"

namespace weft::stream::detail {

namespace {

std::string rank_name(int rank) { return "rank " + std::to_string(rank); }

void fail(const OpPtr& op, const std::string& what) {
  op->error = std::make_exception_ptr(MessageError(what));
  op->status.store(OpStatus::Failed, std::memory_order_release);  // pairs with wait's acquire
  op->owner->notify();
}

Path local_path(const WorldCore& world, const Operation& send, const Operation& recv) {
  const bool from_device = send.buffer.memory == Memory::Device;
  const bool to_device = recv.buffer.memory == Memory::Device;
  if (!from_device && !to_device) return Path::HostCopy;
  if (!from_device) return Path::HostToDevice;
  if (!to_device) return Path::DeviceToHost;
  const StreamCore& a = *send.owner;
  const StreamCore& b = *recv.owner;
  if (a.info().physical == b.info().physical) return Path::DeviceCopy;
  return world.peer_path(a.local_index(), b.local_index()) ? Path::PeerCopy : Path::StagedCopy;
}

// Device to device through the receiver's two pinned chunks: chunk i is copied out on the
// sender's transfer queue and in on the receiver's, so that chunk i+1 leaves the sender's GPU
// while chunk i enters the receiver's.
void staged_copy(const Operation& send, const Operation& recv, std::size_t chunk) {
  StreamCore& to = *recv.owner;
  Queue& out = send.owner->transfers();
  Queue& in = to.transfers();
  Staging& staging = to.staging();
  std::lock_guard lock(staging.mutex);
  for (void*& slot : staging.slot) {
    if (slot == nullptr) slot = to.device().allocate_pinned(chunk);
  }
  if (send.ready) out.wait(send.ready);
  if (recv.ready) in.wait(recv.ready);
  const auto* src = static_cast<const std::byte*>(send.buffer.data);
  auto* dst = static_cast<std::byte*>(recv.buffer.data);
  for (std::size_t offset = 0, i = 0; offset < send.buffer.bytes; offset += chunk, ++i) {
    const std::size_t n = std::min(chunk, send.buffer.bytes - offset);
    const std::size_t s = i % 2;
    if (staging.free_after[s]) out.wait(staging.free_after[s]);
    out.copy(staging.slot[s], src + offset, n);
    in.wait(out.record());
    in.copy(dst + offset, staging.slot[s], n);
    staging.free_after[s] = in.record();
  }
}

}  // namespace

namespace {

// Why the options' streams or chunk size are out of range, or empty.
std::string range_error(const WorldOptions& o) {
  if (o.streams_per_process < 1 || o.streams_per_process > 1024) {
    return "weft::stream::World: streams_per_process must be in 1..1024, not " +
           std::to_string(o.streams_per_process);
  }
  // At most 2^30: MPI counts a chunk in an int, and a larger one would be cut short.
  if (o.chunk_bytes < 4096 || o.chunk_bytes > (std::size_t{1} << 30)) {
    return "weft::stream::World: chunk_bytes must be in 4096..1073741824, not " +
           std::to_string(o.chunk_bytes);
  }
  return {};
}

}  // namespace

WorldCore::WorldCore(WorldOptions options) : options_(std::move(options)) {
  // Checked after the processes compare their options, not before: a process whose options
  // are out of range would otherwise throw alone while the others wait in the transport's
  // collectives. Where they differ, this process throws its range error and the others the
  // comparison's.
  const std::string out_of_range = range_error(options_);
  streams_ = options_.streams_per_process;
  mpi_ = MpiTransport::create(options_.mpi);
  if (mpi_) {
    processes_ = mpi_->size();
    process_rank_ = mpi_->rank();
    try {
      mpi_->check_agreement(streams_, options_.chunk_bytes, options_.eager_bytes);
    } catch (const MessageError&) {
      if (!out_of_range.empty()) throw InvalidArgument(out_of_range);
      throw;
    }
  }
  if (!out_of_range.empty()) throw InvalidArgument(out_of_range);
  if (mpi_) {
    max_tag_ = mpi_->max_user_tag(streams_);
    if (max_tag_ < 0) {
      throw InvalidArgument("weft::stream::World: " + std::to_string(streams_) +
                            " streams a process leave no tags within this MPI's tag range");
    }
  } else {
    max_tag_ = INT_MAX - 3;
  }
  if (!mpi_) {
    build_streams();
    return;
  }
  // Every process builds its part, then all agree: a process that failed throws its own error
  // and the others one naming it, together, so that none goes on to runs or collectives that
  // the failed one never joins.
  // Where any process failed, the transport closes here, while the devices it may use are
  // still there (members would go in the other order).
  try {
    build_streams();
  } catch (...) {
    try {
      mpi_->agree_built(false);
    } catch (...) {  // the build's own error is the one to report
    }
    mpi_.reset();
    throw;
  }
  try {
    mpi_->agree_built(true);
  } catch (...) {
    mpi_.reset();
    throw;
  }
  mpi_->attach(*this);
}

void WorldCore::build_streams() {
  make_devices();
  ended_ = std::make_unique<std::atomic<bool>[]>(static_cast<std::size_t>(streams_));
  for (int i = 0; i < streams_; ++i) {
    mailboxes_.push_back(std::make_unique<Mailbox>());
    Device& device = *devices_[static_cast<std::size_t>(device_of_local_[i])];
    DeviceInfo info{device.is_host(), i, device.ordinal(), device.name()};
    streams_core_.push_back(std::make_unique<StreamCore>(*this, i, device, std::move(info)));
  }
}

WorldCore::~WorldCore() {
  mpi_.reset();  // its pinned slots go back to a device, which must still be there
  streams_core_.clear();
  devices_.clear();
}

void WorldCore::make_devices() {
  const int gpus = options_.device == DeviceChoice::Host ? 0 : usable_cuda_devices();
  if (options_.device == DeviceChoice::Cuda && gpus == 0) {
    throw InvalidState("weft::stream::World: CUDA devices asked for, but none is usable");
  }
  std::vector<int> physical = options_.gpus;
  if (gpus > 0 && physical.empty()) {
    for (int g = 0; g < gpus; ++g) physical.push_back(g);
  }
  if (gpus == 0) {
    devices_.push_back(host_device_maker()());
    device_of_local_.assign(static_cast<std::size_t>(streams_), 0);
    peer_.assign(1, std::vector<bool>(1, true));
    return;
  }
  std::vector<int> ordinals;
  for (int i = 0; i < streams_; ++i) {
    const int g = physical[static_cast<std::size_t>(i) % physical.size()];
    if (g < 0 || g >= gpus) {
      throw InvalidArgument("weft::stream::World: gpus names GPU " + std::to_string(g) + ", but " +
                            std::to_string(gpus) + " are usable");
    }
    auto at = std::find(ordinals.begin(), ordinals.end(), g);
    if (at == ordinals.end()) {
      ordinals.push_back(g);
      devices_.push_back(make_cuda_device(g));
      at = ordinals.end() - 1;
    }
    device_of_local_.push_back(static_cast<int>(at - ordinals.begin()));
  }
  // Peer access is set up here, once, not on the first message: enabling it takes long.
  peer_.assign(ordinals.size(), std::vector<bool>(ordinals.size(), false));
  for (std::size_t a = 0; a < ordinals.size(); ++a) {
    for (std::size_t b = 0; b < ordinals.size(); ++b) {
      peer_[a][b] =
          a == b || (options_.peer_access && enable_peer_access(ordinals[a], ordinals[b]) &&
                     enable_peer_access(ordinals[b], ordinals[a]));
    }
  }
}

bool WorldCore::peer_path(int from_local, int to_local) const {
  return peer_[static_cast<std::size_t>(device_of_local_[static_cast<std::size_t>(from_local)])]
              [static_cast<std::size_t>(device_of_local_[static_cast<std::size_t>(to_local)])];
}

bool WorldCore::local_ended(int local) const noexcept {
  return ended_[static_cast<std::size_t>(local)].load(std::memory_order_acquire);
}

namespace {

// Makes the copy of a matched pair (on whichever thread matched them, outside the mailbox's
// lock) and hands both ops to their owners.
void transfer(const WorldCore& world, const OpPtr& send, const OpPtr& recv) {
  if (send->buffer.bytes != recv->buffer.bytes) {
    const std::string what = rank_name(send->self) + " sent " + std::to_string(send->buffer.bytes) +
                             " bytes with tag " + std::to_string(send->tag) + " to " +
                             rank_name(recv->self) + ", whose receive is of " +
                             std::to_string(recv->buffer.bytes) + " bytes";
    fail(recv, what);
    if (!send->is_eager) fail(send, what);
    return;
  }
  const Path path = local_path(world, *send, *recv);
  try {
    if (path == Path::HostCopy) {
      if (send->buffer.bytes != 0) {
        std::memcpy(recv->buffer.data, send->source_bytes(), send->buffer.bytes);
      }
      recv->path = path;
      recv->status.store(OpStatus::Done, std::memory_order_release);
      recv->owner->notify();
      if (!send->is_eager) {
        send->path = path;
        send->status.store(OpStatus::Done, std::memory_order_release);
        send->owner->notify();
      }
      return;
    }
    EventPtr copied;
    if (path == Path::StagedCopy) {
      staged_copy(*send, *recv, world.options().chunk_bytes);
      copied = recv->owner->transfers().record();
    } else {
      Queue& in = recv->owner->transfers();
      if (send->ready) in.wait(send->ready);
      if (recv->ready) in.wait(recv->ready);
      if (path == Path::PeerCopy) {
        in.copy_peer(recv->buffer.data, recv->owner->info().physical, send->buffer.data,
                     send->owner->info().physical, send->buffer.bytes);
      } else {
        in.copy(recv->buffer.data, send->source_bytes(), send->buffer.bytes);
      }
      copied = in.record();
    }
    // An eager send's bytes live in the op: keep it until the copy out of them is done.
    if (send->is_eager) copied->wait();
    for (const OpPtr& op : {recv, send}) {
      if (op->is_eager) continue;
      op->copied = copied;
      op->path = path;
      op->status.store(OpStatus::Copying, std::memory_order_release);
      op->owner->notify();
    }
  } catch (const std::exception& e) {
    fail(recv, std::string("copy of a message failed: ") + e.what());
    if (!send->is_eager) fail(send, std::string("copy of a message failed: ") + e.what());
  }
}

template <class Pred>
OpPtr take_first(std::deque<OpPtr>& ops, Pred pred) {
  const auto it = std::find_if(ops.begin(), ops.end(), pred);
  if (it == ops.end()) return nullptr;
  OpPtr op = *it;
  ops.erase(it);
  return op;
}

}  // namespace

void WorldCore::post_local_send(const OpPtr& op) {
  Mailbox& box = *mailboxes_[static_cast<std::size_t>(local_of(op->peer))];
  OpPtr recv;
  {
    std::lock_guard lock(box.mutex);
    if (box.ended) {
      if (op->is_eager) op->status.store(OpStatus::Pending, std::memory_order_relaxed);
      fail(op, rank_name(op->self) + " sent a message (tag " + std::to_string(op->tag) + ") to " +
                   rank_name(op->peer) + ", which has ended");
      return;
    }
    recv = take_first(box.recvs,
                      [&](const OpPtr& r) { return r->peer == op->self && r->tag == op->tag; });
    if (!recv) {
      box.sends.push_back(op);
      return;
    }
  }
  transfer(*this, op, recv);
}

void WorldCore::post_local_recv(const OpPtr& op) {
  Mailbox& box = *mailboxes_[static_cast<std::size_t>(local_of(op->self))];
  OpPtr send;
  {
    std::lock_guard lock(box.mutex);
    send = take_first(box.sends,
                      [&](const OpPtr& s) { return s->self == op->peer && s->tag == op->tag; });
    if (!send) {
      if (local_ended(local_of(op->peer))) {
        fail(op, rank_name(op->self) + " waits for a message (tag " + std::to_string(op->tag) +
                     ") from " + rank_name(op->peer) + ", which ended without sending it");
        return;
      }
      box.recvs.push_back(op);
      return;
    }
  }
  transfer(*this, send, op);
}

bool WorldCore::withdraw_local_send(const OpPtr& op) {
  Mailbox& box = *mailboxes_[static_cast<std::size_t>(local_of(op->peer))];
  std::lock_guard lock(box.mutex);
  return take_first(box.sends, [&](const OpPtr& s) { return s == op; }) != nullptr;
}

bool WorldCore::withdraw_local_recv(const OpPtr& op) {
  Mailbox& box = *mailboxes_[static_cast<std::size_t>(local_of(op->self))];
  std::lock_guard lock(box.mutex);
  return take_first(box.recvs, [&](const OpPtr& r) { return r == op; }) != nullptr;
}

void WorldCore::stream_ended(StreamCore& stream) {
  const int local = stream.local_index();
  const int rank = stream.rank();
  {
    Mailbox& box = *mailboxes_[static_cast<std::size_t>(local)];
    std::lock_guard lock(box.mutex);
    box.ended = true;
    for (const OpPtr& send : box.sends) {
      const std::string what = rank_name(send->self) + " sent a message (tag " +
                               std::to_string(send->tag) + ", " +
                               std::to_string(send->buffer.bytes) + " bytes) to " +
                               rank_name(rank) + ", which ended without receiving it";
      if (send->is_eager) {
        stream.problems.push_back(what);
      } else {
        fail(send, what);
      }
    }
    box.sends.clear();
  }
  ended_[static_cast<std::size_t>(local)].store(true, std::memory_order_release);
  for (const auto& other : mailboxes_) {
    std::lock_guard lock(other->mutex);
    std::erase_if(other->recvs, [&](const OpPtr& r) {
      if (r->peer != rank) return false;
      fail(r, rank_name(r->self) + " waits for a message (tag " + std::to_string(r->tag) +
                  ") from " + rank_name(rank) + ", which ended without sending it");
      return true;
    });
  }
  std::lock_guard lock(barrier_mutex_);
  barrier_cv_.notify_all();
}

std::string WorldCore::barrier_blocker_locked(std::uint64_t generation) const {
  for (const auto& s : streams_core_) {
    if (local_ended(s->local_index()) && s->barriers <= generation) {
      return rank_name(s->rank()) + " ended without reaching barrier " + std::to_string(generation);
    }
  }
  return {};
}

void WorldCore::barrier(StreamCore& stream) {
  std::unique_lock lock(barrier_mutex_);
  const std::uint64_t generation = barrier_generation_;
  if (++barrier_arrived_ == streams_) {
    barrier_arrived_ = 0;
    if (mpi_) {
      lock.unlock();
      std::string failure;
      try {
        mpi_->barrier(*this, stream, generation);
      } catch (const std::exception& e) {
        failure = e.what();
      }
      lock.lock();
      if (!failure.empty()) {
        ++stream.barriers;
        barrier_failure_ = failure;
        barrier_cv_.notify_all();
        throw MessageError(failure);
      }
    }
    ++barrier_generation_;
    ++stream.barriers;
    barrier_cv_.notify_all();
    return;
  }
  for (;;) {
    if (barrier_generation_ != generation) break;
    // A stream that leaves a failed barrier counts as having reached it: the blame stays with
    // the stream that never came.
    if (!barrier_failure_.empty()) {
      ++stream.barriers;
      throw MessageError(barrier_failure_);
    }
    const std::string blocker = barrier_blocker_locked(generation);
    if (!blocker.empty()) {
      ++stream.barriers;
      throw MessageError("barrier on " + rank_name(stream.rank()) + ": " + blocker);
    }
    if (stream.mpi_ops().empty()) {
      barrier_cv_.wait(lock);
    } else {
      // Its sends and receives between processes move on only when it moves them.
      lock.unlock();
      stream.progress_messages();
      lock.lock();
      barrier_cv_.wait_for(lock, std::chrono::microseconds(50));
    }
  }
  ++stream.barriers;
}

namespace {

std::string describe(const WorldCore::Collective& c) {
  if (c.kind == "barrier") return "barrier";
  return std::string(c.kind) + " (root " + std::to_string(c.root) + ", " + std::to_string(c.bytes) +
         " bytes)";
}

}  // namespace

void WorldCore::check_collective(StreamCore& stream, Collective call) {
  const std::size_t index = stream.collectives;
  const std::lock_guard lock(collectives_mutex_);
  if (index == collectives_.size()) {
    collectives_.push_back({call, stream.rank()});
  } else {
    const RecordedCollective& first = collectives_[index];
    if (first.call.kind != call.kind || first.call.root != call.root ||
        first.call.bytes != call.bytes) {
      // Not counted: a body that catches this and makes the right call is compared in place.
      throw MessageError("collective call " + std::to_string(index + 1) + " (counting from 1) of " +
                         rank_name(stream.rank()) + " is " + describe(call) + " where " +
                         rank_name(first.rank) + "'s is " + describe(first.call) +
                         ": every rank makes the same collective calls in the same order");
    }
  }
  ++stream.collectives;
}

void WorldCore::run(const std::function<void(TaskStream&)>& body) {
  if (!body) throw InvalidArgument("weft::stream::World::run: an empty body");
  // A nested or concurrent run would reset the mailboxes of the live one.
  const weft::detail::FlagClaim claim(running_,
                                      "weft::stream::World::run: a run is already in "
                                      "progress (run is not reentrant)");
  errors_.clear();
  barrier_arrived_ = 0;
  barrier_generation_ = 0;
  barrier_failure_.clear();
  collectives_.clear();
  for (int i = 0; i < streams_; ++i) {
    ended_[static_cast<std::size_t>(i)].store(false, std::memory_order_relaxed);
    Mailbox& box = *mailboxes_[static_cast<std::size_t>(i)];
    box.ended = false;
    box.sends.clear();
    box.recvs.clear();
  }
  if (mpi_) mpi_->begin_run(*this);
  std::vector<std::string> thrown(static_cast<std::size_t>(streams_));
  std::vector<std::exception_ptr> thrown_ptr(static_cast<std::size_t>(streams_));
  std::atomic<int> running{streams_};
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(streams_));
  for (int i = 0; i < streams_; ++i) {
    threads.emplace_back([&, i] {
      StreamCore& s = *streams_core_[static_cast<std::size_t>(i)];
      try {
        s.begin_run();
        TaskStream ts(s);
        body(ts);
      } catch (const std::exception& e) {
        thrown[static_cast<std::size_t>(i)] = rank_name(s.rank()) + ": " + e.what();
        thrown_ptr[static_cast<std::size_t>(i)] = std::current_exception();
      } catch (...) {
        thrown_ptr[static_cast<std::size_t>(i)] = std::current_exception();
        thrown[static_cast<std::size_t>(i)] =
            rank_name(s.rank()) + ": an exception not derived from std::exception";
      }
      try {
        s.end_run();
        stream_ended(s);
        if (mpi_) mpi_->stream_ended(s);
      } catch (const std::exception& e) {
        s.problems.push_back(rank_name(s.rank()) + ": ending the stream failed: " + e.what());
      }
      running.fetch_sub(1, std::memory_order_release);  // pairs with the acquire load below
    });
  }
  // The caller's thread moves MPI along meanwhile: it takes the other processes' news of
  // ended streams, which the streams waiting on them need.
  while (mpi_ && running.load(std::memory_order_acquire) > 0) {
    mpi_->poll_notices(*this);
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  for (std::thread& t : threads) t.join();
  std::vector<std::string> problems;
  if (mpi_) {
    try {
      mpi_->end_run(*this, problems);
    } catch (const std::exception& e) {
      problems.push_back(e.what());
    }
  }
  for (int i = 0; i < streams_; ++i) {
    if (!thrown[static_cast<std::size_t>(i)].empty())
      errors_.push_back(thrown[static_cast<std::size_t>(i)]);
  }
  for (const auto& s : streams_core_) {
    for (const std::string& p : s->problems) problems.push_back(p);
  }
  errors_.insert(errors_.end(), problems.begin(), problems.end());
  for (const std::exception_ptr& e : thrown_ptr) {
    if (e) std::rethrow_exception(e);  // the body's own error, as it threw it
  }
  if (!errors_.empty()) {
    std::string what = errors_.front();
    if (errors_.size() > 1)
      what += " (and " + std::to_string(errors_.size() - 1) + " more: World::errors())";
    throw MessageError(what);
  }
}

}  // namespace weft::stream::detail
