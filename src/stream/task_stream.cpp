// TaskStream: the public face of a stream's core, and the collectives built on its messages.
#include <algorithm>
#include <cstring>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "stream/region_core.hpp"
#include "stream/stream_core.hpp"
#include "stream/world_core.hpp"
#include "weft/error.hpp"
#include "weft/stream/task_stream.hpp"

namespace weft::stream {

using detail::OpKind;

namespace {

void check_user_tag(const detail::StreamCore& core, int tag, const char* call) {
  if (tag < 0 || tag > core.world().max_tag()) {
    throw MessageError(std::string(call) + " on rank " + std::to_string(core.rank()) + ": tag " +
                       std::to_string(tag) + " is outside 0.." +
                       std::to_string(core.world().max_tag()));
  }
}

}  // namespace

// ---- requests ----

void Request::wait() {
  if (op_) detail::StreamCore::wait_request(*op_);
}

bool Request::test() { return !op_ || detail::StreamCore::test_request(*op_); }

Path Request::path() const noexcept {
  return op_ && op_->status.load(std::memory_order_acquire) == detail::OpStatus::Done ? op_->path
                                                                                      : Path::None;
}

std::size_t Request::bytes() const noexcept { return op_ ? op_->buffer.bytes : 0; }

// ---- device memory ----

DeviceBytes::DeviceBytes(detail::StreamCore* owner, void* data, std::size_t bytes) noexcept
    : owner_(owner),
      life_(owner != nullptr ? owner->life() : nullptr),
      data_(data),
      bytes_(bytes) {}

DeviceBytes::DeviceBytes(DeviceBytes&& o) noexcept
    : owner_(std::exchange(o.owner_, nullptr)),
      life_(std::move(o.life_)),
      data_(std::exchange(o.data_, nullptr)),
      bytes_(std::exchange(o.bytes_, 0)) {}

DeviceBytes& DeviceBytes::operator=(DeviceBytes&& o) noexcept {
  if (this != &o) {
    DeviceBytes gone(std::move(*this));
    owner_ = std::exchange(o.owner_, nullptr);
    life_ = std::move(o.life_);
    data_ = std::exchange(o.data_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

DeviceBytes::~DeviceBytes() {
  if (owner_ != nullptr) detail::StreamCore::release_tracked(owner_, *life_, data_);
}

// ---- who and where ----

int TaskStream::rank() const noexcept { return core_->rank(); }
int TaskStream::size() const noexcept { return core_->world().size(); }
int TaskStream::local_index() const noexcept { return core_->local_index(); }
int TaskStream::process_rank() const noexcept { return core_->world().process_rank(); }
const DeviceInfo& TaskStream::device() const noexcept { return core_->info(); }
cudaStream_t TaskStream::cuda_stream() const noexcept { return core_->queue().native(); }
int TaskStream::max_tag() const noexcept { return core_->world().max_tag(); }
TransferCounts TaskStream::transfers() const noexcept { return core_->counts(); }

DeviceBytes TaskStream::allocate(std::size_t bytes) {
  core_->check_owner("allocate");
  return DeviceBytes(core_, core_->allocate_tracked(bytes), bytes);
}

std::shared_ptr<detail::RegionCore> TaskStream::make_region(std::size_t bytes, Policy policy) {
  core_->check_owner("region");
  if (static_cast<unsigned>(policy) > static_cast<unsigned>(Policy::Async)) {
    throw InvalidArgument("weft::stream::TaskStream::region: policy " +
                          std::to_string(static_cast<unsigned>(policy)) +
                          " is not Simple, ImprovedSimple, ReadWrite or Async");
  }
  return std::make_shared<detail::RegionCore>(*core_, bytes, policy);
}

// ---- kernels ----

void TaskStream::launch(std::initializer_list<Use> uses,
                        const std::function<void(const Launch&)>& kernel) {
  core_->check_owner("launch");
  if (!kernel) throw InvalidArgument("weft::stream::TaskStream::launch: an empty kernel");
  std::set<const detail::RegionCore*> seen;
  for (const Use& use : uses) {
    if (use.region == nullptr || use.region->empty()) {
      throw InvalidArgument("weft::stream::TaskStream::launch on rank " + std::to_string(rank()) +
                            ": an empty region among the uses");
    }
    const detail::RegionCore& r = use.region->core();
    r.check_alive("launch");
    if (&r.stream() != core_) {
      throw InvalidArgument("weft::stream::TaskStream::launch on rank " + std::to_string(rank()) +
                            ": a region of another task stream (rank " +
                            std::to_string(r.stream().rank()) + ") among the uses");
    }
    if (!seen.insert(&r).second) {
      throw InvalidArgument("weft::stream::TaskStream::launch on rank " + std::to_string(rank()) +
                            ": a region appears twice among the uses (use Access::ReadWrite)");
    }
    if (r.open_host_accesses() > 0) {
      throw InvalidState("weft::stream::TaskStream::launch on rank " + std::to_string(rank()) +
                         ": a region among the uses has a host access open (destroy its "
                         "HostAccess before the launch: the kernel and its copies would race "
                         "with the host's reads and writes)");
    }
  }
  for (const Use& use : uses) use.region->core().before_kernel(use.access);
  const DeviceInfo& info = core_->info();
  kernel(Launch{core_->queue().native(), info.physical, info.is_host});
  for (const Use& use : uses) use.region->core().after_kernel(use.access);
}

void TaskStream::synchronize() {
  core_->queue().synchronize();
  core_->transfers().synchronize();
}

// ---- messages ----

void TaskStream::send(const Buffer& buffer, int dest, int tag) { isend(buffer, dest, tag).wait(); }

void TaskStream::recv(const Buffer& buffer, int source, int tag) {
  irecv(buffer, source, tag).wait();
}

Request TaskStream::isend(const Buffer& buffer, int dest, int tag) {
  check_user_tag(*core_, tag, "send");
  return Request(core_->post(OpKind::Send, buffer, dest, tag));
}

Request TaskStream::irecv(const Buffer& buffer, int source, int tag) {
  check_user_tag(*core_, tag, "recv");
  return Request(core_->post(OpKind::Recv, buffer, source, tag));
}

void TaskStream::barrier() {
  core_->check_owner("barrier");
  core_->world().check_collective(*core_, {"barrier"});
  core_->world().barrier(*core_);
}

namespace {

// A binomial tree from the root: each rank receives once from its parent and sends to its
// children, so that a broadcast takes log2(size) rounds.
void bcast_tree(detail::StreamCore& core, const Buffer& buffer, int root) {
  const int n = core.world().size();
  const int tag = core.world().bcast_tag();
  const int relative = (core.rank() - root + n) % n;
  int mask = 1;
  while (mask < n) {
    if ((relative & mask) != 0) {
      Request(core.post(OpKind::Recv, buffer, (relative - mask + root) % n, tag)).wait();
      break;
    }
    mask <<= 1;
  }
  std::vector<Request> children;
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (relative + mask < n) {
      children.emplace_back(core.post(OpKind::Send, buffer, (relative + mask + root) % n, tag));
    }
  }
  for (Request& r : children) r.wait();
}

}  // namespace

void TaskStream::bcast(const Buffer& buffer, int root) {
  const int n = size();
  if (root < 0 || root >= n) {
    throw MessageError("bcast on rank " + std::to_string(rank()) + ": root " +
                       std::to_string(root) + " does not exist (the World has " +
                       std::to_string(n) + " ranks)");
  }
  core_->check_owner("bcast");
  core_->world().check_collective(*core_, {"bcast", root, buffer.bytes});
  bcast_tree(*core_, buffer, root);
}

namespace {

// Sums up a binomial tree to rank 0 on the host, then broadcasts the sum back down it.
template <class T>
void allreduce_on_host(TaskStream& ts, detail::StreamCore& core, T* data, std::size_t count) {
  const int n = ts.size();
  const int tag = core.world().reduce_tag();
  const int me = ts.rank();
  std::vector<T> incoming(count);
  for (int mask = 1; mask < n; mask <<= 1) {
    if ((me & mask) != 0) {
      Request(core.post(OpKind::Send, host(data, count), me - mask, tag)).wait();
      break;
    }
    if (me + mask < n) {
      Request(core.post(OpKind::Recv, host(incoming.data(), count), me + mask, tag)).wait();
      for (std::size_t i = 0; i < count; ++i) data[i] += incoming[i];
    }
  }
  bcast_tree(core, host(data, count), 0);
}

template <class T>
void allreduce(TaskStream& ts, detail::StreamCore& core, T* data, std::size_t count,
               Memory memory) {
  if (data == nullptr && count != 0) {
    throw InvalidArgument("allreduce_sum on rank " + std::to_string(ts.rank()) + ": null data");
  }
  core.check_owner("allreduce_sum");
  constexpr const char* kKind = std::is_same_v<T, double>  ? "allreduce_sum of doubles"
                                : std::is_same_v<T, float> ? "allreduce_sum of floats"
                                                           : "allreduce_sum of int64s";
  core.world().check_collective(core, {kKind, 0, count * sizeof(T)});
  if (memory == Memory::Host) {
    allreduce_on_host(ts, core, data, count);
    return;
  }
  // Device data is summed on the host: the reduction is of a few values per rank, not worth a
  // kernel per type, and its copies are two per rank.
  std::vector<T> staged(count);
  detail::Queue& q = core.queue();
  q.copy(staged.data(), data, count * sizeof(T));
  q.synchronize();
  allreduce_on_host(ts, core, staged.data(), count);
  q.copy(data, staged.data(), count * sizeof(T));
  q.synchronize();
}

}  // namespace

void TaskStream::allreduce_sum(double* data, std::size_t count, Memory memory) {
  allreduce(*this, *core_, data, count, memory);
}
void TaskStream::allreduce_sum(float* data, std::size_t count, Memory memory) {
  allreduce(*this, *core_, data, count, memory);
}
void TaskStream::allreduce_sum(std::int64_t* data, std::size_t count, Memory memory) {
  allreduce(*this, *core_, data, count, memory);
}

}  // namespace weft::stream
