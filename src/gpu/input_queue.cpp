#include "gpu/input_queue.hpp"

#include <algorithm>
#include <cstring>

namespace weft::gpu::detail {

InputQueue::InputQueue(QueueOrder order, std::size_t payload_capacity, std::size_t shards)
    : order_(order),
      room_(detail::payload_room(payload_capacity)),
      stride_(detail::entry_stride(payload_capacity)),
      ranked_entries_(stride_) {
  shards_.reserve(std::max<std::size_t>(shards, 1));
  for (std::size_t s = 0; s < std::max<std::size_t>(shards, 1); ++s) {
    shards_.push_back(std::make_unique<Shard>(stride_));
  }
}

void InputQueue::close() {
  // relaxed: the locks taken below publish it (see closed()).
  closed_.store(true, std::memory_order_relaxed);
  for (auto& s : shards_) {
    std::lock_guard<AdaptiveMutex> lock(s->mutex);
  }
  std::lock_guard<std::mutex> lock(heap_mutex_);
}

std::uint64_t InputQueue::accepted() const noexcept {
  std::uint64_t n = 0;
  for (const auto& s : shards_) n += s->accepted.load(std::memory_order_seq_cst);
  return n;
}

void InputQueue::add_ranked(const unsigned char* record, std::size_t out, std::uint32_t callback,
                            int priority) {
  std::uint32_t at;
  if (!free_at_.empty()) {
    at = free_at_.back();
    free_at_.pop_back();
  } else {
    at = static_cast<std::uint32_t>(ranked_entries_.size());
    (void)ranked_entries_.append();
  }
  write_entry(ranked_entries_.at(at), record, out, callback);
  heap_.push_back(Ranked{priority, next_seq_++, at});
  std::push_heap(heap_.begin(), heap_.end(), RankedLess{});
}

std::size_t InputQueue::take_ranked(RecordBuffer& out, std::size_t max) {
  std::lock_guard<std::mutex> lock(heap_mutex_);
  std::size_t taken = 0;
  while (taken < max && !heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end(), RankedLess{});
    const std::uint32_t at = heap_.back().at;
    heap_.pop_back();
    copy_element(out.append(), ranked_entries_.at(at), stride_);
    free_at_.push_back(at);
    ++taken;
  }
  if (heap_.empty()) {  // a drained heap reuses its entries from the start
    ranked_entries_.clear();
    free_at_.clear();
  }
  // release: as a shard's size after a take (input_queue.hpp); ordered with the pushes by
  // heap_mutex_.
  heap_size_.store(heap_.size(), std::memory_order_release);
  return taken;
}

}  // namespace weft::gpu::detail
