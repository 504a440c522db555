// weft/stream/region.hpp - shared regions: a host buffer and a device buffer of one task
// stream, kept coherent by the runtime under one of seed 001's four update policies.
//
//   auto a = ts.region<float>(n, weft::stream::Policy::ReadWrite);
//   { auto h = a.host(weft::stream::Access::Write); fill(h.data(), n); }  // host holds it
//   ts.launch({weft::stream::reads(a), weft::stream::writes(c)}, [&](const weft::stream::Launch& l)
//   {
//     scale<<<blocks, 256, 0, l.stream>>>(a.device_data(), c.device_data(), n);
//   });
//   { auto h = c.host(weft::stream::Access::Read); use(h.data()); }       // copied back here
//
// The region tracks where its newest bytes are (RegionState) and copies only where its policy
// says. Access::Write promises that the access writes the whole region before anything reads
// it (nothing of the old contents is needed, so no copy brings them); an access that reads or
// updates part of the region is Access::ReadWrite. A region belongs to the task stream that
// made it and is used from that stream's thread only. docs/streams.md draws each policy's
// state diagram.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <utility>

namespace weft::stream {

/// How a region keeps its host and device buffers coherent (seed 001, section 4.4).
enum class Policy : std::uint8_t {
  /// Every kernel that uses the region copies it in before and out after (synchronously).
  Simple,
  /// A kernel copies in only the regions it reads, and out only those it wrote.
  ImprovedSimple,
  /// No copy until an access reads a side that is not current (the copy runs then).
  ReadWrite,
  /// As ReadWrite, but a write starts the copy to the other side at once, asynchronously; the
  /// next access of the other side waits for it.
  Async,
};

/// Where a region's newest contents are.
enum class RegionState : std::uint8_t { InHost, InDevice, InAll };

enum class Access : std::uint8_t { Read, Write, ReadWrite };

[[nodiscard]] std::string_view to_string(Policy policy) noexcept;
[[nodiscard]] std::string_view to_string(RegionState state) noexcept;

/// Copies a region has made, for tests and tuning.
struct RegionCopies {
  std::uint64_t to_device = 0;
  std::uint64_t to_host = 0;
  std::uint64_t bytes_to_device = 0;
  std::uint64_t bytes_to_host = 0;
};

namespace detail {
class RegionCore;
/// Begins a host access: copies or waits as the policy needs; returns the host buffer.
void* begin_host_access(RegionCore& region, Access access);
/// Ends it (an Async write starts its copy to the device here). A failure to start that copy
/// is kept and thrown by the region's next access.
void end_host_access(RegionCore& region, Access access) noexcept;
/// Throws weft::InvalidState: `call` on an empty region.
[[noreturn]] void refuse_empty_region(const char* call);
}  // namespace detail

/// The untyped region; Region<T> below is what programs use.
class RegionBytes {
 public:
  RegionBytes() = default;
  explicit RegionBytes(std::shared_ptr<detail::RegionCore> core) noexcept
      : core_(std::move(core)) {}

  /// An empty region (default-constructed or moved from) reports 0 bytes, Policy::Simple,
  /// InHost, no copies and a null device buffer; its host access throws weft::InvalidState.
  [[nodiscard]] bool empty() const noexcept { return core_ == nullptr; }
  [[nodiscard]] std::size_t bytes() const noexcept;
  [[nodiscard]] Policy policy() const noexcept;
  [[nodiscard]] RegionState state() const noexcept;
  /// True while an Async copy started by a write has not been waited for.
  [[nodiscard]] bool copy_in_flight() const noexcept;
  [[nodiscard]] RegionCopies copies() const noexcept;
  /// The device buffer, for kernels launched with this region in their uses.
  [[nodiscard]] void* device_bytes() const noexcept;
  [[nodiscard]] detail::RegionCore& core() const noexcept { return *core_; }

 protected:
  [[nodiscard]] const std::shared_ptr<detail::RegionCore>& shared_core() const noexcept {
    return core_;
  }

 private:
  std::shared_ptr<detail::RegionCore> core_;
};

/// A host access to a region: the host buffer, current for `access`, until it is destroyed
/// (under Policy::Async the end of a write starts the copy to the device). It keeps its region
/// alive (an access to a temporary Region is safe), and the host buffer too when the region's
/// World is destroyed first: the World then leaves the buffer to the last access, which frees
/// it as it ends.
template <class T>
class HostAccess {
 public:
  HostAccess(std::shared_ptr<detail::RegionCore> region, std::size_t count, Access access)
      : region_(std::move(region)),
        data_(static_cast<T*>(detail::begin_host_access(*region_, access))),
        count_(count),
        access_(access) {}
  HostAccess(const HostAccess&) = delete;
  HostAccess& operator=(const HostAccess&) = delete;
  HostAccess(HostAccess&& o) noexcept
      : region_(std::move(o.region_)), data_(o.data_), count_(o.count_), access_(o.access_) {}
  HostAccess& operator=(HostAccess&&) = delete;
  ~HostAccess() {
    if (region_ != nullptr) detail::end_host_access(*region_, access_);
  }

  [[nodiscard]] T* data() const noexcept { return data_; }
  [[nodiscard]] std::size_t size() const noexcept { return count_; }
  T& operator[](std::size_t i) const noexcept { return data_[i]; }
  T* begin() const noexcept { return data_; }
  T* end() const noexcept { return data_ + count_; }

 private:
  std::shared_ptr<detail::RegionCore> region_;
  T* data_;
  std::size_t count_;
  Access access_;
};

template <class T>
class Region : public RegionBytes {
 public:
  Region() = default;
  explicit Region(std::shared_ptr<detail::RegionCore> core) noexcept
      : RegionBytes(std::move(core)) {}

  [[nodiscard]] std::size_t size() const noexcept { return bytes() / sizeof(T); }
  [[nodiscard]] T* device_data() const noexcept { return static_cast<T*>(device_bytes()); }
  /// The host buffer for `access` (see the file comment for what Write promises).
  [[nodiscard]] HostAccess<T> host(Access access) const {
    if (empty()) detail::refuse_empty_region("host");
    return HostAccess<T>(shared_core(), size(), access);
  }
};

/// One region a kernel uses, and how.
struct Use {
  const RegionBytes* region;
  Access access;
};
[[nodiscard]] inline Use reads(const RegionBytes& r) noexcept { return {&r, Access::Read}; }
[[nodiscard]] inline Use writes(const RegionBytes& r) noexcept { return {&r, Access::Write}; }
[[nodiscard]] inline Use updates(const RegionBytes& r) noexcept { return {&r, Access::ReadWrite}; }

}  // namespace weft::stream
