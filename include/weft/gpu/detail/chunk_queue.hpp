// weft/gpu/detail/chunk_queue.hpp - a FIFO of elements that arrive and leave in batches: a
// deque of chunks (vectors) and a read position in the first. Adding a batch moves one vector
// (O(1) under the caller's lock, however long the batch); taking copies the elements out.
// Emptied vectors are kept for reuse, so a steady stream allocates nothing. Not thread-safe:
// the pool's queues guard it with their mutex.
#pragma once

#include <algorithm>
#include <cstddef>
#include <deque>
#include <utility>
#include <vector>

namespace weft::gpu::detail {

template <class T>
class ChunkQueue {
 public:
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  /// Emptied vectors kept for reuse (at most 16, none above 16384 elements).
  [[nodiscard]] std::size_t spares() const noexcept { return spares_.size(); }
  [[nodiscard]] std::size_t spare_capacity() const noexcept {
    std::size_t c = 0;
    for (const auto& v : spares_) c += v.capacity();
    return c;
  }

  /// Appends the elements of `chunk` (moved in; `chunk` is left empty, possibly with the
  /// capacity of a recycled vector).
  void push_chunk(std::vector<T>& chunk) {
    if (chunk.empty()) return;
    size_ += chunk.size();
    chunks_.push_back(std::move(chunk));
    chunk = spare();
  }
  /// Appends one element (to the last chunk while it is short: no allocation per element).
  void push_one(T&& v) {
    if (chunks_.empty() || chunks_.back().size() >= kShortChunk) {
      chunks_.push_back(spare());
      chunks_.back().reserve(kShortChunk);
    }
    chunks_.back().push_back(std::move(v));
    ++size_;
  }
  /// Moves up to `max` elements to `out` (appended); returns how many.
  template <class Out>
  std::size_t take(Out& out, std::size_t max) {
    std::size_t taken = 0;
    while (taken < max && !chunks_.empty()) {
      std::vector<T>& front = chunks_.front();
      const std::size_t n = std::min(max - taken, front.size() - head_);
      out.insert(out.end(),
                 std::make_move_iterator(front.begin() + static_cast<std::ptrdiff_t>(head_)),
                 std::make_move_iterator(front.begin() + static_cast<std::ptrdiff_t>(head_ + n)));
      head_ += n;
      taken += n;
      if (head_ == front.size()) pop_front_chunk();
    }
    size_ -= taken;
    return taken;
  }
  /// Moves the first element into `out`. The queue must not be empty.
  void take_one(T& out) {
    std::vector<T>& front = chunks_.front();
    out = std::move(front[head_]);
    ++head_;
    --size_;
    if (head_ == front.size()) pop_front_chunk();
  }
  /// Moves up to `max` elements into the array `out`; returns how many.
  std::size_t take_into(T* out, std::size_t max) {
    std::size_t taken = 0;
    while (taken < max && !chunks_.empty()) {
      std::vector<T>& front = chunks_.front();
      const std::size_t n = std::min(max - taken, front.size() - head_);
      std::move(front.begin() + static_cast<std::ptrdiff_t>(head_),
                front.begin() + static_cast<std::ptrdiff_t>(head_ + n), out + taken);
      head_ += n;
      taken += n;
      if (head_ == front.size()) pop_front_chunk();
    }
    size_ -= taken;
    return taken;
  }

 private:
  void pop_front_chunk() {
    std::vector<T> v = std::move(chunks_.front());
    chunks_.pop_front();
    head_ = 0;
    v.clear();
    // Only ordinary batch sizes are kept: one huge batch must not pin its memory for the
    // life of the pool.
    if (spares_.size() < kMaxSpares && v.capacity() <= kMaxSpareElements) {
      spares_.push_back(std::move(v));
    }
  }
  std::vector<T> spare() {
    if (spares_.empty()) return {};
    std::vector<T> v = std::move(spares_.back());
    spares_.pop_back();
    return v;
  }

  static constexpr std::size_t kMaxSpares = 16;
  static constexpr std::size_t kMaxSpareElements = std::size_t{1} << 14;
  static constexpr std::size_t kShortChunk = 256;
  std::deque<std::vector<T>> chunks_;
  std::size_t head_ = 0;  // read position in chunks_.front()
  std::size_t size_ = 0;
  std::vector<std::vector<T>> spares_;
};

}  // namespace weft::gpu::detail
