// A shared region's state machine (src/stream only): where its newest bytes are, the copies in
// flight, and what each policy does before and after a kernel and around a host access.
#pragma once

#include <cstddef>
#include <exception>
#include <memory>

#include "stream/device.hpp"
#include "stream/stream_life.hpp"
#include "weft/stream/region.hpp"

namespace weft::stream::detail {

class StreamCore;

class RegionCore {
 public:
  RegionCore(StreamCore& stream, std::size_t bytes, Policy policy);
  ~RegionCore();
  RegionCore(const RegionCore&) = delete;
  RegionCore& operator=(const RegionCore&) = delete;

  /// The stream that made it; valid only while !orphaned().
  [[nodiscard]] StreamCore& stream() const noexcept { return stream_; }
  /// True once the World was destroyed before the region: its memory is freed (the host
  /// buffer once no access is open), and every new access throws weft::InvalidState.
  [[nodiscard]] bool orphaned() const noexcept { return orphaned_; }
  /// Called by the stream as it is destroyed, under its life's lock. A host buffer that an
  /// access still points at stays until the last such access ends (end_host).
  void orphan() noexcept;
  /// Host accesses begun and not yet ended (a kernel may not use the region meanwhile).
  [[nodiscard]] int open_host_accesses() const noexcept { return open_host_; }
  [[nodiscard]] std::size_t bytes() const noexcept { return bytes_; }
  [[nodiscard]] Policy policy() const noexcept { return policy_; }
  [[nodiscard]] RegionState state() const noexcept { return state_; }
  [[nodiscard]] bool copy_in_flight() const noexcept { return to_host_ || to_device_; }
  [[nodiscard]] const RegionCopies& copies() const noexcept { return copies_; }
  [[nodiscard]] void* device() const noexcept { return device_; }

  /// Around a kernel that uses the region with `access`.
  void before_kernel(Access access);
  void after_kernel(Access access);
  /// Around a host access.
  void* begin_host(Access access);
  void end_host(Access access) noexcept;

  /// Throws weft::InvalidState naming `call` once the region is orphaned.
  void check_alive(const char* call) const;

 private:
  void release_memory() noexcept;
  void copy_in_now();        // host to device on the kernels' queue, before what follows
  void copy_out_and_wait();  // device to host after the kernels so far, waited for
  void wait_host_readers();  // copies still reading the host buffer
  void rethrow_deferred();

  StreamCore& stream_;
  std::shared_ptr<StreamLife> life_;
  bool orphaned_ = false;  // under life_->mutex when written
  int open_host_ = 0;      // under life_->mutex when written (orphan() reads it)
  std::size_t bytes_;
  Policy policy_;
  // Frees the host buffer once the World is gone: the last access open then frees it.
  Device::PinnedRelease pinned_release_ = nullptr;
  RegionState state_ = RegionState::InHost;
  void* host_ = nullptr;
  void* device_ = nullptr;
  EventPtr host_read_;  // the last copy in enqueued (it reads the host buffer until done)
  EventPtr to_host_;    // Async: the copy out a device write started
  EventPtr to_device_;  // Async: the copy in a host write started
  RegionCopies copies_;
  std::exception_ptr deferred_;
};

}  // namespace weft::stream::detail
