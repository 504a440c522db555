// The scheduler's storage of fixed-stride byte elements (queue entries, finished records),
// whose stride is known only at run time (the pool's payload capacity), and the payload copy
// every one of them goes through.
#pragma once

#include <cstddef>
#include <cstring>
#include <memory>
#include <new>
#include <utility>
#include <vector>

namespace weft::gpu::detail {

/// An allocator whose value-initialisation leaves bytes as they are: growing a buffer by an
/// element does not zero bytes that the caller writes right after.
template <class T>
struct UninitAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = UninitAllocator<U>;
  };
  UninitAllocator() = default;
  template <class U>
  explicit UninitAllocator(const UninitAllocator<U>&) noexcept {}
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};
using Bytes = std::vector<unsigned char, UninitAllocator<unsigned char>>;

/// Copies a payload of `size` bytes between buffers that reserve `room` bytes for it. Rooms of
/// up to 64 bytes are copied whole, as fixed-size moves the compiler turns into a few vector
/// instructions instead of a call (docs/decisions/002-gpu-input-queue.md); the bytes past
/// `size` carry no meaning.
inline void copy_payload(void* to, const void* from, std::size_t room, std::size_t size) noexcept {
  switch (room) {
    case 16:
      std::memcpy(to, from, 16);
      return;
    case 32:
      std::memcpy(to, from, 32);
      return;
    case 48:
      std::memcpy(to, from, 48);
      return;
    case 64:
      std::memcpy(to, from, 64);
      return;
    default:
      std::memcpy(to, from, size);
  }
}

/// Copies one element of `stride` bytes (strides of up to 96 bytes as fixed-size moves).
inline void copy_element(void* to, const void* from, std::size_t stride) noexcept {
  switch (stride) {
    case 40:
      std::memcpy(to, from, 40);
      return;
    case 48:
      std::memcpy(to, from, 48);
      return;
    case 56:
      std::memcpy(to, from, 56);
      return;
    case 64:
      std::memcpy(to, from, 64);
      return;
    case 80:
      std::memcpy(to, from, 80);
      return;
    case 88:
      std::memcpy(to, from, 88);
      return;
    case 96:
      std::memcpy(to, from, 96);
      return;
    default:
      std::memcpy(to, from, stride);
  }
}

/// A growable array of elements of `stride` bytes each. Not thread-safe.
class RecordBuffer {
 public:
  explicit RecordBuffer(std::size_t stride = 1) noexcept : stride_(stride) {}

  [[nodiscard]] std::size_t stride() const noexcept { return stride_; }
  [[nodiscard]] std::size_t size() const noexcept { return bytes_.size() / stride_; }
  [[nodiscard]] bool empty() const noexcept { return bytes_.empty(); }
  [[nodiscard]] std::size_t capacity() const noexcept { return bytes_.capacity() / stride_; }
  [[nodiscard]] unsigned char* at(std::size_t i) noexcept { return bytes_.data() + i * stride_; }
  [[nodiscard]] const unsigned char* at(std::size_t i) const noexcept {
    return bytes_.data() + i * stride_;
  }
  void clear() noexcept { bytes_.clear(); }
  void reserve(std::size_t elements) { bytes_.reserve(elements * stride_); }
  /// Appends an element whose bytes the caller writes; returns it.
  unsigned char* append() {
    bytes_.resize(bytes_.size() + stride_);
    return bytes_.data() + bytes_.size() - stride_;
  }
  /// Appends `n` elements copied from `from`.
  void append(const void* from, std::size_t n) {
    const auto* p = static_cast<const unsigned char*>(from);
    bytes_.insert(bytes_.end(), p, p + n * stride_);
  }
  void pop_back() noexcept { bytes_.resize(bytes_.size() - stride_); }
  /// The storage, for moving whole buffers between queues.
  [[nodiscard]] Bytes& bytes() noexcept { return bytes_; }

 private:
  std::size_t stride_;
  Bytes bytes_;
};

}  // namespace weft::gpu::detail
