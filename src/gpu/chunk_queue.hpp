// A FIFO of fixed-stride elements that arrive and leave in batches: a deque of chunks (record
// buffers) and a read position in the first. Adding a batch moves one vector (O(1) under the
// caller's lock, however long the batch); taking copies the elements out. Emptied vectors are
// kept for reuse, so a steady stream allocates nothing. Not thread-safe: the pool's queues
// guard it with their mutex.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <deque>
#include <utility>
#include <vector>

#include "gpu/record_buffer.hpp"

namespace weft::gpu::detail {

class ChunkQueue {
 public:
  explicit ChunkQueue(std::size_t stride) noexcept : stride_(stride) {}

  [[nodiscard]] std::size_t stride() const noexcept { return stride_; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  /// Emptied buffers kept for reuse (at most kMaxSpares, none above kMaxSpareElements).
  [[nodiscard]] std::size_t spares() const noexcept { return spares_.size(); }
  /// Elements the kept buffers have room for.
  [[nodiscard]] std::size_t spare_capacity() const noexcept {
    std::size_t c = 0;
    for (const auto& v : spares_) c += v.capacity();
    return c;
  }

  /// Appends the elements of `chunk` (of this queue's stride; moved in, `chunk` is left empty,
  /// possibly with the capacity of a recycled buffer).
  void push_chunk(RecordBuffer& chunk) {
    if (chunk.empty()) return;
    size_ += chunk.size();
    chunks_.push_back(std::move(chunk));
    chunk = spare();
  }
  /// Appends one element (to the last chunk while it is short: no allocation per element).
  void push_one(const void* element) {
    if (chunks_.empty() || chunks_.back().size() >= kShortChunk) {
      chunks_.push_back(spare());
      chunks_.back().reserve(kShortChunk);
    }
    copy_element(chunks_.back().append(), element, stride_);
    ++size_;
  }
  /// Copies up to `max` elements to the end of `out`; returns how many.
  std::size_t take(RecordBuffer& out, std::size_t max) {
    std::size_t taken = 0;
    while (taken < max && !chunks_.empty()) {
      taken +=
          take_span(max - taken, [&](const unsigned char* p, std::size_t k) { out.append(p, k); });
    }
    size_ -= taken;
    return taken;
  }
  /// Copies the first element into `out`. The queue must not be empty.
  void take_one(void* out) {
    copy_element(out, chunks_.front().at(head_), stride_);
    ++head_;
    --size_;
    if (head_ == chunks_.front().size()) pop_front_chunk();
  }
  /// Copies up to `max` elements into the array `out`; returns how many.
  std::size_t take_into(void* out, std::size_t max) {
    auto* to = static_cast<unsigned char*>(out);
    std::size_t taken = 0;
    while (taken < max && !chunks_.empty()) {
      taken += take_span(max - taken, [&](const unsigned char* p, std::size_t k) {
        std::memcpy(to + taken * stride_, p, k * stride_);
      });
    }
    size_ -= taken;
    return taken;
  }

 private:
  // Hands up to `max` consecutive elements of the first chunk to sink(pointer, count) and
  // advances past them. Returns how many.
  template <class Sink>
  std::size_t take_span(std::size_t max, Sink sink) {
    RecordBuffer& front = chunks_.front();
    const std::size_t n = std::min(max, front.size() - head_);
    sink(front.at(head_), n);
    head_ += n;
    if (head_ == front.size()) pop_front_chunk();
    return n;
  }
  void pop_front_chunk() {
    RecordBuffer v = std::move(chunks_.front());
    chunks_.pop_front();
    head_ = 0;
    v.clear();
    // Only ordinary batch sizes are kept: one huge batch must not pin its memory for the
    // life of the pool.
    if (spares_.size() < kMaxSpares && v.capacity() <= kMaxSpareElements) {
      spares_.push_back(std::move(v));
    }
  }
  RecordBuffer spare() {
    if (spares_.empty()) return RecordBuffer(stride_);
    RecordBuffer v = std::move(spares_.back());
    spares_.pop_back();
    return v;
  }

  static constexpr std::size_t kMaxSpares = 16;
  static constexpr std::size_t kMaxSpareElements = std::size_t{1} << 14;
  static constexpr std::size_t kShortChunk = 256;
  std::size_t stride_;
  std::deque<RecordBuffer> chunks_;
  std::size_t head_ = 0;  // read position in chunks_.front(), in elements
  std::size_t size_ = 0;
  std::vector<RecordBuffer> spares_;
};

}  // namespace weft::gpu::detail
