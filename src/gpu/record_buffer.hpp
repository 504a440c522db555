// The scheduler's storage of fixed-stride byte elements (queue entries, finished records),
// whose stride is known only at run time (the pool's payload capacity), and the payload copy
// every one of them goes through.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>
#include <utility>

namespace weft::gpu::detail {

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

/// A growable array of elements of `stride` bytes each. Not thread-safe. Hand-written rather
/// than a std::vector of bytes: appending an element must be a bounds check and a pointer bump
/// (the lanes stage and load every task through one), growth must not zero memory the caller
/// overwrites, and a range must be appended as one memcpy; a vector with an allocator that
/// skips zeroing copies ranges element by element.
class RecordBuffer {
 public:
  explicit RecordBuffer(std::size_t stride = 1) noexcept : stride_(stride) {}
  RecordBuffer(const RecordBuffer& other) : stride_(other.stride_) {
    append(other.data_.get(), other.count_);
  }
  RecordBuffer& operator=(const RecordBuffer& other) {
    if (this != &other) {
      if (stride_ != other.stride_) release();  // capacity_ counts elements of the old stride
      stride_ = other.stride_;
      count_ = 0;
      append(other.data_.get(), other.count_);
    }
    return *this;
  }
  RecordBuffer(RecordBuffer&& other) noexcept
      : stride_(other.stride_),
        data_(std::move(other.data_)),
        count_(std::exchange(other.count_, 0)),
        capacity_(std::exchange(other.capacity_, 0)) {}
  RecordBuffer& operator=(RecordBuffer&& other) noexcept {
    stride_ = other.stride_;
    data_ = std::move(other.data_);
    count_ = std::exchange(other.count_, 0);
    capacity_ = std::exchange(other.capacity_, 0);
    return *this;
  }
  ~RecordBuffer() = default;

  [[nodiscard]] std::size_t stride() const noexcept { return stride_; }
  [[nodiscard]] std::size_t size() const noexcept { return count_; }
  [[nodiscard]] bool empty() const noexcept { return count_ == 0; }
  [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }
  [[nodiscard]] unsigned char* at(std::size_t i) noexcept { return data_.get() + i * stride_; }
  [[nodiscard]] const unsigned char* at(std::size_t i) const noexcept {
    return data_.get() + i * stride_;
  }
  void clear() noexcept { count_ = 0; }
  /// Empties it and gives its memory back.
  void release() noexcept {
    data_.reset();
    count_ = capacity_ = 0;
  }
  void reserve(std::size_t elements) {
    if (elements > capacity_) grow_to(elements);
  }
  /// Appends an element whose bytes the caller writes; returns it.
  unsigned char* append() {
    if (count_ == capacity_) grow_to(count_ + 1);
    return data_.get() + count_++ * stride_;
  }
  /// Appends `n` elements copied from `from`.
  void append(const void* from, std::size_t n) {
    if (n == 0) return;
    if (count_ + n > capacity_) grow_to(count_ + n);
    std::memcpy(data_.get() + count_ * stride_, from, n * stride_);
    count_ += n;
  }

 private:
  void grow_to(std::size_t need) {
    const std::size_t capacity = std::max({need, 2 * capacity_, std::size_t{16}});
    auto data = std::make_unique_for_overwrite<unsigned char[]>(capacity * stride_);
    if (count_ != 0) std::memcpy(data.get(), data_.get(), count_ * stride_);
    data_ = std::move(data);
    capacity_ = capacity;
  }

  std::size_t stride_;
  std::unique_ptr<unsigned char[]> data_;
  std::size_t count_ = 0;     // elements
  std::size_t capacity_ = 0;  // elements
};

}  // namespace weft::gpu::detail
