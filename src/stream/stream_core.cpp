// A task stream's operations and the wait loop that moves them on.
#include "stream/stream_core.hpp"

#include <algorithm>
#include <string>

#include "stream/mpi_transport.hpp"
#include "stream/region_core.hpp"
#include "stream/world_core.hpp"
#include "weft/error.hpp"

namespace weft::stream::detail {

namespace {

std::string describe(const Operation& op) {
  return std::string(op.kind == OpKind::Send ? "send to rank " : "receive from rank ") +
         std::to_string(op.peer) + " (tag " + std::to_string(op.tag) + ", " +
         std::to_string(op.buffer.bytes) + " bytes)";
}

// From another thread than the stream's, `owner` may be gone by the time it is read (the run
// may end and the World go meanwhile): the refusal names the rank from the op alone.
[[noreturn]] void refuse_foreign_thread(const Operation& op, const char* call) {
  throw InvalidState(std::string("weft::stream::Request::") + call + " of rank " +
                     std::to_string(op.self) + " called from another thread than its own");
}

// Spins this many checks before a wait sleeps: a reply that comes within a few microseconds is
// seen without a futex round trip.
constexpr int kSpinsBeforeSleep = 2000;

}  // namespace

StreamCore::StreamCore(WorldCore& world, int local_index, Device& device, DeviceInfo info)
    : world_(world),
      local_index_(local_index),
      rank_(world.process_rank() * world.streams() + local_index),
      device_(device),
      info_(std::move(info)),
      queue_(device.make_queue()),
      transfers_(device.make_queue()) {}

StreamCore::~StreamCore() {
  release_handles();
  for (void*& slot : staging_.slot) {
    if (slot != nullptr) device_.release_pinned(slot);
  }
}

void StreamCore::release_handles() noexcept {
  try {
    queue_->synchronize();
    transfers_->synchronize();
  } catch (...) {  // a failed device: the memory goes all the same
  }
  const std::lock_guard lock(life_->mutex);
  try {
    // Again under the lock: a host access that ended on another thread meanwhile may have
    // queued its region's copy in (RegionCore::end_host holds this lock as it does).
    transfers_->synchronize();
  } catch (...) {
  }
  for (RegionCore* region : life_->regions) region->orphan();
  for (void* data : life_->allocations) device_.release(data);
  life_->regions.clear();
  life_->allocations.clear();
  // release: pairs with the acquire load of a handle that finds it false without the lock.
  life_->alive.store(false, std::memory_order_release);
}

void* StreamCore::allocate_tracked(std::size_t bytes) {
  void* data = device_.allocate(bytes);
  const std::lock_guard lock(life_->mutex);
  try {
    life_->allocations.insert(data);
  } catch (...) {
    device_.release(data);
    throw;
  }
  return data;
}

void StreamCore::release_tracked(StreamCore* owner, StreamLife& life, void* data) noexcept {
  const std::lock_guard lock(life.mutex);
  if (!life.alive.load(std::memory_order_relaxed)) return;  // the stream freed it (under lock)
  life.allocations.erase(data);
  owner->device().release(data);
}

void StreamCore::begin_run() {
  // Ops of earlier runs have all ended (the World finished them as those runs ended); the ones
  // never waited on go now rather than across every later run.
  std::erase_if(pending_, [](const OpPtr& op) { return op->ended(); });
  // release: pairs with is_current's and on_own_thread's acquire loads (a request of this run
  // may wait from now, on this thread).
  life_->thread.store(std::this_thread::get_id(), std::memory_order_release);
  life_->run.fetch_add(1, std::memory_order_release);
  life_->running.store(true, std::memory_order_release);
  device_.make_current();
  problems.clear();
  remote_sent.clear();
  remote_headers.clear();
  barriers = 0;
  collectives = 0;
}

void StreamCore::check_owner(const char* call) const {
  if (!life_->on_own_thread()) {
    throw InvalidState(std::string("weft::stream::TaskStream::") + call + " of rank " +
                       std::to_string(rank_) + " called from another thread than its own");
  }
}

OpPtr StreamCore::post(OpKind kind, const Buffer& buffer, int peer, int tag) {
  const char* what = kind == OpKind::Send ? "send" : "recv";
  check_owner(what);
  if (peer < 0 || peer >= world_.size()) {
    throw MessageError(std::string(what) + " on rank " + std::to_string(rank_) + ": rank " +
                       std::to_string(peer) + " does not exist (the World has " +
                       std::to_string(world_.size()) + " ranks)");
  }
  if (tag < 0 || tag > world_.max_tag() + 2) {
    throw MessageError(std::string(what) + " on rank " + std::to_string(rank_) + ": tag " +
                       std::to_string(tag) + " is outside 0.." + std::to_string(world_.max_tag()));
  }
  if (buffer.data == nullptr && buffer.bytes != 0) {
    throw InvalidArgument(std::string(what) + " on rank " + std::to_string(rank_) +
                          ": a null buffer of " + std::to_string(buffer.bytes) + " bytes");
  }
  auto op = std::make_shared<Operation>();
  op->kind = kind;
  op->self = rank_;
  op->peer = peer;
  op->tag = tag;
  op->buffer = buffer;
  op->owner = this;
  op->life = life_;
  op->run = life_->run.load(std::memory_order_relaxed);  // written by this thread
  // A device buffer's transfer waits for the kernels enqueued before it, unless the queue has
  // none left to run (the common case of a message after a synchronize costs no event then).
  // Copies the stream's regions put on its transfer queue (an Async write's) count as work
  // before it too: the kernel queue waits for the last one once, and everything after it on
  // that queue then follows it. Noting them costs no query of the transfer queue per message.
  if (buffer.memory == Memory::Device) {
    if (region_copy_) queue_->wait(std::exchange(region_copy_, nullptr));
    if (!queue_->idle()) op->ready = queue_->record();
  }
  pending_.push_back(op);
  if (!world_.is_local(peer)) {
    if (kind == OpKind::Send) ++remote_sent[{peer, tag}];
    if (kind == OpKind::Send && buffer.memory == Memory::Host &&
        buffer.bytes <= world_.options().eager_bytes) {
      // Buffered, as in a process: the send ends now, and a copy of it travels on its own.
      auto wire = std::make_shared<Operation>();
      wire->kind = kind;
      wire->self = rank_;
      wire->peer = peer;
      wire->tag = tag;
      wire->owner = this;
      wire->life = life_;
      wire->run = op->run;
      const auto* bytes = static_cast<const std::byte*>(buffer.data);
      wire->eager.assign(bytes, bytes + buffer.bytes);
      wire->is_eager = true;
      wire->buffer = Buffer{wire->eager.data(), buffer.bytes, Memory::Host};
      world_.mpi()->post(*this, wire);
      op->path = Path::Mpi;
      op->status.store(OpStatus::Done, std::memory_order_release);
      return op;
    }
    world_.mpi()->post(*this, op);
    return op;
  }
  if (kind == OpKind::Send && buffer.memory == Memory::Host &&
      buffer.bytes <= world_.options().eager_bytes) {
    const auto* bytes = static_cast<const std::byte*>(buffer.data);
    op->eager.assign(bytes, bytes + buffer.bytes);
    op->is_eager = true;
    op->path = Path::HostCopy;
    op->status.store(OpStatus::Done, std::memory_order_release);
  }
  if (kind == OpKind::Send) {
    world_.post_local_send(op);
  } else {
    world_.post_local_recv(op);
  }
  return op;
}

void StreamCore::notify() noexcept {
  wake_.fetch_add(1, std::memory_order_release);  // pairs with the acquire load in wait()
  wake_.notify_one();
}

void StreamCore::settle_copy(Operation& op) {
  // Copying: the copy is enqueued; the op is the owner's to end from here.
  try {
    op.copied->wait();
    op.status.store(OpStatus::Done, std::memory_order_release);
  } catch (...) {
    op.error = std::current_exception();
    op.status.store(OpStatus::Failed, std::memory_order_release);
  }
}

void StreamCore::progress() {
  if (!mpi_ops_.empty()) world_.mpi()->progress(*this);
}

bool StreamCore::test(Operation& op) {
  progress();
  if (op.status.load(std::memory_order_acquire) == OpStatus::Copying && op.copied->done()) {
    settle_copy(op);
  }
  if (!op.ended()) return false;
  observe(op);
  return true;
}

void StreamCore::wait_request(Operation& op) {
  if (op.life->is_current(op.run)) {
    if (!op.life->on_own_thread()) refuse_foreign_thread(op, "wait");
    op.owner->wait(op);
    return;
  }
  if (test_request(op)) return;
  throw InvalidState("weft::stream::Request::wait: the " + describe(op) + " of rank " +
                     std::to_string(op.self) +
                     " has not ended and its run is over (or its World destroyed): it can be "
                     "waited on only during the run that made it");
}

bool StreamCore::test_request(Operation& op) {
  if (op.life->is_current(op.run)) {
    if (!op.life->on_own_thread()) refuse_foreign_thread(op, "test");
    return op.owner->test(op);
  }
  // Outside its run the op is not moved on, only read: its status was stored with release
  // after its error (end_run, or whoever ended it).
  switch (op.status.load(std::memory_order_acquire)) {
    case OpStatus::Done:
      return true;
    case OpStatus::Failed:
      std::rethrow_exception(op.error);
    default:
      return false;
  }
}

void StreamCore::fail_unmatchable(Operation& op) {
  const auto it = std::find_if(pending_.begin(), pending_.end(),
                               [&](const OpPtr& p) { return p.get() == &op; });
  if (it == pending_.end()) return;
  const OpPtr held = *it;
  const bool withdrawn =
      op.kind == OpKind::Send ? world_.withdraw_local_send(held) : world_.withdraw_local_recv(held);
  if (!withdrawn) return;  // matched meanwhile: the wait goes on as usual
  op.error = std::make_exception_ptr(MessageError(
      "rank " + std::to_string(rank_) + " waits on a " + describe(op) +
      ", its own rank, that nothing has matched: only this stream could post the match, and it "
      "is waiting (post the matching isend or irecv before waiting)"));
  op.status.store(OpStatus::Failed, std::memory_order_release);  // pairs with wait's acquire
}

void StreamCore::wait(Operation& op) {
  if (op.peer == rank_ && op.status.load(std::memory_order_acquire) == OpStatus::Pending) {
    fail_unmatchable(op);
  }
  int spins = 0;
  for (;;) {
    const std::uint32_t seen = wake_.load(std::memory_order_acquire);
    progress();
    const OpStatus s = op.status.load(std::memory_order_acquire);
    if (s == OpStatus::Copying && mpi_ops_.empty()) settle_copy(op);
    if (s == OpStatus::Copying && !mpi_ops_.empty() && op.copied->done()) settle_copy(op);
    if (op.ended()) break;
    if (!mpi_ops_.empty() || s == OpStatus::Copying || ++spins < kSpinsBeforeSleep) {
      std::this_thread::yield();
      continue;
    }
    spins = 0;
    wake_.wait(seen, std::memory_order_acquire);
  }
  observe(op);
}

void StreamCore::observe(Operation& op) {
  if (!op.observed) {
    op.observed = true;
    std::erase_if(pending_, [&](const OpPtr& p) { return p.get() == &op; });
    if (op.status.load(std::memory_order_acquire) == OpStatus::Done) {
      const auto path = static_cast<int>(op.path);
      ++counts_.count[path];
      counts_.bytes[path] += op.buffer.bytes;
    }
  }
  if (op.status.load(std::memory_order_acquire) == OpStatus::Failed)
    std::rethrow_exception(op.error);
}

void StreamCore::end_run() {
  // However it ends, the run is over: its requests report how they ended from then on.
  struct RunOver {
    StreamLife& life;
    ~RunOver() { life.running.store(false, std::memory_order_release); }  // pairs: is_current
  } over{*life_};
  // What the body left unwaited: local ops still unmatched are withdrawn (their buffers may be
  // gone), copies in flight are waited for, MPI receives are cancelled; each is reported.
  std::vector<OpPtr> left;
  left.swap(pending_);
  for (const OpPtr& op : left) {
    const bool local = world_.is_local(op->peer);
    if (local && op->status.load(std::memory_order_acquire) == OpStatus::Pending) {
      const bool withdrawn = op->kind == OpKind::Send ? world_.withdraw_local_send(op)
                                                      : world_.withdraw_local_recv(op);
      if (withdrawn) {
        const std::string what =
            "rank " + std::to_string(rank_) + " ended with a " + describe(*op) + " pending";
        problems.push_back(what);
        // A Request kept past run() must not wait for it forever: it fails, saying so.
        op->error = std::make_exception_ptr(MessageError(what + "; it was withdrawn"));
        op->status.store(OpStatus::Failed, std::memory_order_release);  // pairs with wait's acquire
        continue;
      }
    }
    if (!local) continue;  // the MPI transport ends those (abandon_receives / finish_sends)
    for (;;) {
      const OpStatus s = op->status.load(std::memory_order_acquire);
      if (s == OpStatus::Copying) settle_copy(*op);
      if (op->ended()) break;
      std::this_thread::yield();
    }
    if (op->status.load(std::memory_order_acquire) == OpStatus::Failed && !op->observed) {
      try {
        std::rethrow_exception(op->error);
      } catch (const std::exception& e) {
        problems.push_back("rank " + std::to_string(rank_) + ": a " + describe(*op) +
                           " that was never waited on failed: " + e.what());
      }
    }
  }
  for (const OpPtr& op : left) {
    if (world_.is_local(op->peer)) continue;
    pending_.push_back(op);
    if (op->kind == OpKind::Send && !op->ended()) {
      problems.push_back("rank " + std::to_string(rank_) + " ended with a " + describe(*op) +
                         " not waited on (finished after the stream ended)");
    }
  }
  if (world_.mpi() != nullptr) world_.mpi()->abandon_receives(*this, problems);
}

}  // namespace weft::stream::detail
