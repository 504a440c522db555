// weft/gpu/detail/chunk_queue.hpp - a FIFO of elements that arrive and leave in batches: a
// deque of chunks (vectors) and a read position in the first. Adding a batch moves one vector
// (O(1) under the caller's lock, however long the batch); taking copies the elements out.
// Emptied vectors are kept for reuse, so a steady stream allocates nothing. Not thread-safe:
// the pool's queues guard it with their mutex.
//
// Several queues may share their emptied vectors through a ChunkRecycler (thread-safe: its own
// lock). The pool's input shards do: a pushing thread always uses its own shard, so with
// spares kept per shard, every new pushing thread (the bench's pushers, a user's thread pool)
// found none and copied its batches into fresh memory, the vectors emptied for another shard
// lying unused. Fresh memory is page faults: 1-3 per 1000 tasks in the pusher on the H100
// machine, about 2 us each there, and runs with fewer faults were faster by about that
// (bench/results/h100/probes/lane_threads-369e762.txt).
#pragma once

#include <algorithm>
#include <cstddef>
#include <deque>
#include <mutex>
#include <utility>
#include <vector>

#include "weft/gpu/detail/adaptive_mutex.hpp"

namespace weft::gpu::detail {

/// Emptied vectors kept for reuse by any number of queues and threads (at most kMaxSpares,
/// none above kMaxSpareElements elements: one huge batch must not pin its memory for the
/// life of the pool).
template <class T>
class ChunkRecycler {
 public:
  static constexpr std::size_t kMaxSpares = 64;
  static constexpr std::size_t kMaxSpareElements = std::size_t{1} << 14;

  /// An emptied vector (the one given back last: its memory is the likeliest to be cached),
  /// or an empty one with no memory when none is kept.
  std::vector<T> take() {
    std::lock_guard<AdaptiveMutex> lock(mutex_);
    if (spares_.empty()) return {};
    std::vector<T> v = std::move(spares_.back());
    spares_.pop_back();
    return v;
  }
  /// Keeps `v` (cleared) for reuse, or frees it when the recycler is full or `v` is huge.
  void give(std::vector<T>&& v) {
    v.clear();
    if (v.capacity() == 0 || v.capacity() > kMaxSpareElements) return;
    std::lock_guard<AdaptiveMutex> lock(mutex_);
    if (spares_.size() < kMaxSpares) spares_.push_back(std::move(v));
  }
  /// Gives `v` a kept vector's memory when it has less than `n` elements' room and one is
  /// kept (v must be empty).
  void refill(std::vector<T>& v, std::size_t n) {
    if (v.capacity() >= n) return;
    std::vector<T> spare = take();
    if (spare.capacity() > v.capacity()) v.swap(spare);
    if (spare.capacity() != 0) give(std::move(spare));
  }
  [[nodiscard]] std::size_t spares() {
    std::lock_guard<AdaptiveMutex> lock(mutex_);
    return spares_.size();
  }
  [[nodiscard]] std::size_t spare_capacity() {
    std::lock_guard<AdaptiveMutex> lock(mutex_);
    std::size_t c = 0;
    for (const auto& v : spares_) c += v.capacity();
    return c;
  }

 private:
  AdaptiveMutex mutex_;
  std::vector<std::vector<T>> spares_;  // under mutex_
};

template <class T>
class ChunkQueue {
 public:
  ChunkQueue() = default;
  /// A queue whose emptied vectors go to `shared` (and whose pushes get theirs from it)
  /// instead of being kept by the queue itself. `shared` must outlive the queue.
  explicit ChunkQueue(ChunkRecycler<T>* shared) noexcept : shared_(shared) {}

  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  /// Emptied vectors kept for reuse by this queue itself (at most 16, none above 16384
  /// elements; none when the queue shares a recycler).
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
    if (shared_ != nullptr) {
      shared_->give(std::move(v));
      return;
    }
    v.clear();
    // Only ordinary batch sizes are kept: one huge batch must not pin its memory for the
    // life of the pool.
    if (spares_.size() < kMaxSpares && v.capacity() <= kMaxSpareElements) {
      spares_.push_back(std::move(v));
    }
  }
  std::vector<T> spare() {
    if (shared_ != nullptr) return shared_->take();
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
  ChunkRecycler<T>* shared_ = nullptr;  // when set, spares go there instead of spares_
};

}  // namespace weft::gpu::detail
