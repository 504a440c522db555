// Shared regions: the four update policies of seed 001 (section 4.4) as one state machine.
#include <cstring>
#include <mutex>
#include <string>
#include <utility>

#include "stream/region_core.hpp"
#include "stream/stream_core.hpp"
#include "weft/error.hpp"

namespace weft::stream {

namespace detail {

namespace {

bool reads(Access a) noexcept { return a != Access::Write; }
bool writes(Access a) noexcept { return a != Access::Read; }

}  // namespace

RegionCore::RegionCore(StreamCore& stream, std::size_t bytes, Policy policy)
    : stream_(stream),
      life_(stream.life()),
      bytes_(bytes),
      policy_(policy),
      pinned_release_(stream.device().pinned_release()) {
  host_ = stream_.device().allocate_pinned(bytes_);
  try {
    device_ = stream_.device().allocate(bytes_);
    const std::lock_guard lock(life_->mutex);
    life_->regions.insert(this);
  } catch (...) {
    stream_.device().release(device_);
    stream_.device().release_pinned(host_);
    throw;
  }
  std::memset(host_, 0, bytes_);
}

// Whichever of the region and its stream goes first frees the memory (under the life's lock).
RegionCore::~RegionCore() {
  const std::lock_guard lock(life_->mutex);
  if (orphaned_) return;
  life_->regions.erase(this);
  try {
    stream_.queue().synchronize();
    stream_.transfers().synchronize();
  } catch (...) {  // a failed device: the memory goes all the same
  }
  release_memory();
}

void RegionCore::orphan() noexcept {
  // The stream synchronized its queues first.
  if (open_host_ == 0) {
    release_memory();
  } else {  // an access still points at the host buffer: the last one frees it (end_host)
    stream_.device().release(std::exchange(device_, nullptr));
    host_read_ = to_host_ = to_device_ = nullptr;
  }
  orphaned_ = true;
}

void RegionCore::release_memory() noexcept {
  stream_.device().release(std::exchange(device_, nullptr));
  stream_.device().release_pinned(std::exchange(host_, nullptr));
  host_read_ = to_host_ = to_device_ = nullptr;
}

void RegionCore::check_alive(const char* call) const {
  if (orphaned_) {
    throw InvalidState(std::string("weft::stream::Region: ") + call +
                       " on a region whose World was destroyed (its memory went with it)");
  }
}

void RegionCore::rethrow_deferred() {
  if (deferred_) std::rethrow_exception(std::exchange(deferred_, nullptr));
}

void RegionCore::copy_in_now() {
  Queue& q = stream_.queue();
  q.copy(device_, host_, bytes_);
  host_read_ = q.record();
  ++copies_.to_device;
  copies_.bytes_to_device += bytes_;
}

void RegionCore::copy_out_and_wait() {
  Queue& q = stream_.queue();
  q.copy(host_, device_, bytes_);
  q.synchronize();
  ++copies_.to_host;
  copies_.bytes_to_host += bytes_;
}

void RegionCore::wait_host_readers() {
  if (host_read_) std::exchange(host_read_, nullptr)->wait();
  if (to_device_) std::exchange(to_device_, nullptr)->wait();
}

void RegionCore::before_kernel(Access access) {
  rethrow_deferred();
  Queue& q = stream_.queue();
  switch (policy_) {
    case Policy::Simple:
      copy_in_now();
      state_ = RegionState::InAll;
      break;
    case Policy::ImprovedSimple:
      if (reads(access)) copy_in_now();
      state_ = RegionState::InAll;
      break;
    case Policy::ReadWrite:
      if (reads(access) && state_ == RegionState::InHost) {
        copy_in_now();
        state_ = RegionState::InAll;
      }
      break;
    case Policy::Async:
      // The kernel runs after the copy in a host write started; a writing kernel also after
      // the copy out still reading the device buffer.
      if (to_device_) {
        q.wait(to_device_);
        host_read_ = std::exchange(to_device_, nullptr);  // it still reads the host buffer
      }
      if (writes(access) && to_host_) q.wait(to_host_);
      if (reads(access) && state_ == RegionState::InHost) {
        copy_in_now();
        state_ = RegionState::InAll;
      }
      break;
  }
}

void RegionCore::after_kernel(Access access) {
  switch (policy_) {
    case Policy::Simple:
      copy_out_and_wait();
      state_ = RegionState::InAll;
      break;
    case Policy::ImprovedSimple:
      if (writes(access)) copy_out_and_wait();
      break;
    case Policy::ReadWrite:
      if (writes(access)) state_ = RegionState::InDevice;
      break;
    case Policy::Async:
      if (writes(access)) {
        Queue& out = stream_.transfers();
        out.wait(stream_.queue().record());
        out.copy(host_, device_, bytes_);
        to_host_ = out.record();
        stream_.note_region_copy(to_host_);
        ++copies_.to_host;
        copies_.bytes_to_host += bytes_;
        state_ = RegionState::InAll;
      }
      break;
  }
}

void* RegionCore::begin_host(Access access) {
  check_alive("host access");
  rethrow_deferred();
  if (writes(access)) wait_host_readers();
  switch (policy_) {
    case Policy::Simple:
    case Policy::ImprovedSimple:
      // Every kernel leaves the host current under these policies: nothing to copy.
      if (writes(access)) state_ = RegionState::InHost;
      break;
    case Policy::ReadWrite:
      if (reads(access) && state_ == RegionState::InDevice) {
        copy_out_and_wait();
        state_ = RegionState::InAll;
      }
      if (writes(access)) state_ = RegionState::InHost;
      break;
    case Policy::Async:
      if (to_host_) std::exchange(to_host_, nullptr)->wait();
      if (reads(access) && state_ == RegionState::InDevice) {
        copy_out_and_wait();
        state_ = RegionState::InAll;
      }
      if (writes(access)) state_ = RegionState::InHost;
      break;
  }
  const std::lock_guard lock(life_->mutex);  // orphan() reads the count
  ++open_host_;
  return host_;
}

// Under the life's lock throughout: an access may end on another thread while the World goes,
// and the stream's release (StreamCore::release_handles) then waits for the copy queued here
// before it orphans the region.
void RegionCore::end_host(Access access) noexcept {
  const std::lock_guard lock(life_->mutex);
  --open_host_;
  if (orphaned_) {
    // The World went while this access was open and left the host buffer to the last one.
    if (open_host_ == 0 && host_ != nullptr) pinned_release_(std::exchange(host_, nullptr));
    return;
  }
  if (policy_ != Policy::Async || !writes(access)) return;
  try {
    // The copy in waits for the kernels enqueued so far: they may still read the device buffer.
    Queue& in = stream_.transfers();
    in.wait(stream_.queue().record());
    in.copy(device_, host_, bytes_);
    to_device_ = in.record();
    stream_.note_region_copy(to_device_);
    ++copies_.to_device;
    copies_.bytes_to_device += bytes_;
    state_ = RegionState::InAll;
  } catch (...) {
    deferred_ = std::current_exception();
  }
}

void* begin_host_access(RegionCore& region, Access access) {
  region.check_alive("host access");
  region.stream().check_owner("region host access");
  return region.begin_host(access);
}

void end_host_access(RegionCore& region, Access access) noexcept { region.end_host(access); }

void refuse_empty_region(const char* call) {
  throw InvalidState(std::string("weft::stream::Region::") + call +
                     ": an empty region (default-constructed or moved from)");
}

}  // namespace detail

std::size_t RegionBytes::bytes() const noexcept { return core_ ? core_->bytes() : 0; }
Policy RegionBytes::policy() const noexcept { return core_ ? core_->policy() : Policy::Simple; }
RegionState RegionBytes::state() const noexcept {
  return core_ ? core_->state() : RegionState::InHost;
}
bool RegionBytes::copy_in_flight() const noexcept { return core_ && core_->copy_in_flight(); }
RegionCopies RegionBytes::copies() const noexcept {
  return core_ ? core_->copies() : RegionCopies{};
}
void* RegionBytes::device_bytes() const noexcept { return core_ ? core_->device() : nullptr; }

}  // namespace weft::stream
