#include "gpu/graph_table.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <new>
#include <stdexcept>
#include <thread>

#include "weft/error.hpp"

namespace weft::gpu::detail {

HostGraphTable::HostGraphTable(std::size_t capacity, std::size_t record_stride)
    : capacity_(capacity),
      record_stride_(record_stride),
      // At least two: with one cell, "free for ticket p" and "holding ticket p - 1" are the
      // same sequence number, and an overfill would pass unseen.
      slots_(std::bit_ceil(std::max<std::size_t>(capacity, 2))),
      inputs_(new std::atomic<std::uint32_t>[capacity]),
      poisoned_(new std::atomic<std::uint8_t>[capacity]),
      entries_(new Entry[slots_]),
      records_(record_stride == 0 ? nullptr
                                  : static_cast<unsigned char*>(::operator new (
                                        capacity* record_stride, std::align_val_t{16}))) {
  if (capacity == 0) throw InvalidArgument("weft::gpu graph table: capacity 0");
  for (ReadyQueue& q : queues_) q.cells.reset(new Cell[slots_]);
  for (std::size_t i = 0; i < slots_; ++i) {
    // relaxed: before any other thread uses the table (it is handed over by its owner).
    for (ReadyQueue& q : queues_) q.cells[i].sequence.store(i, std::memory_order_relaxed);
    entries_[i].sequence.store(i, std::memory_order_relaxed);
  }
}

void HostGraphTable::load(std::shared_ptr<const GraphLayout> layout) {
  if (layout->inputs.size() > capacity_) {
    throw std::logic_error("weft::gpu graph table: a graph larger than the table was loaded");
  }
  layout_ = std::move(layout);
  for (std::size_t t = 0; t < layout_->inputs.size(); ++t) {
    // relaxed: published to the blocks by the roots' enqueue (release), which they take with
    // acquire before they read or decrement anything of this graph.
    inputs_[t].store(layout_->inputs[t], std::memory_order_relaxed);
    poisoned_[t].store(0, std::memory_order_relaxed);
  }
}

void HostGraphTable::enqueue(std::uint32_t t) {
  enqueue(queues_[layout_->is_urgent(t) ? kUrgent : kNormal], t);
}

std::optional<std::uint32_t> HostGraphTable::take() {
  if (auto t = take(queues_[kUrgent])) return t;
  return take(queues_[kNormal]);
}

void HostGraphTable::enqueue(ReadyQueue& q, std::uint32_t t) {
  // relaxed: a claim; the cell's sequence (release, below) publishes the task.
  const std::uint64_t pos = q.enqueue_at.fetch_add(1, std::memory_order_relaxed);
  Cell& cell = q.cells[pos & (slots_ - 1)];
  // acquire: pairs with take()'s release of the cell (its previous task was read).
  if (cell.sequence.load(std::memory_order_acquire) != pos) {
    // Every task of a graph is enqueued at most once, a graph has at most capacity() tasks, and
    // the next graph is loaded only once every task of the last was taken.
    throw std::logic_error("weft::gpu graph table: the ready queue is full");
  }
  cell.task = t;
  // release: the task, and everything this thread wrote before (the table, a finished task's
  // results and poison), to the block whose take() acquires it.
  cell.sequence.store(pos + 1, std::memory_order_release);
  // relaxed: a count of claims (the put above is done); the sequence publishes the task.
  q.available.fetch_add(1, std::memory_order_relaxed);
}

std::optional<std::uint32_t> HostGraphTable::take(ReadyQueue& q) {
  // relaxed: claims; the cell's sequence (acquire, below) orders the task's read.
  if (q.available.load(std::memory_order_relaxed) <= 0) return std::nullopt;
  if (q.available.fetch_sub(1, std::memory_order_relaxed) <= 0) {
    q.available.fetch_add(1, std::memory_order_relaxed);  // none after all: back out
    return std::nullopt;
  }
  const std::uint64_t pos = q.dequeue_at.fetch_add(1, std::memory_order_relaxed);
  Cell& cell = q.cells[pos & (slots_ - 1)];
  // acquire: pairs with enqueue()'s release of the cell. Its put is at most in flight (the
  // count grows only once a put is done, so an enqueue has claimed this position).
  while (cell.sequence.load(std::memory_order_acquire) != pos + 1) std::this_thread::yield();
  const std::uint32_t t = cell.task;
  // release: the read above happens before the cell's next enqueue (one lap later).
  cell.sequence.store(pos + slots_, std::memory_order_release);
  return t;
}

void HostGraphTable::FreeAligned::operator()(unsigned char* p) const noexcept {
  ::operator delete (p, std::align_val_t{16});
}

bool HostGraphTable::runnable(std::uint32_t t) const {
  // relaxed: ordered by the take() of t (acquire), after every input's poison (see finish).
  // relaxed (cancelled_): a request to stop early; a block that misses it runs t, which is
  // also a correct end (shutdown waits for every completion either way).
  return poisoned_[t].load(std::memory_order_relaxed) == 0 &&
         !cancelled_.load(std::memory_order_relaxed);
}

bool HostGraphTable::cancelled() const noexcept {
  return cancelled_.load(std::memory_order_relaxed);  // relaxed: see runnable()
}

void HostGraphTable::cancel_unrun() noexcept {
  cancelled_.store(true, std::memory_order_relaxed);  // relaxed: see runnable()
}

void HostGraphTable::load_graph(const std::shared_ptr<const GraphLayout>& layout,
                                const unsigned char* records) {
  for (std::size_t t = 0; t < layout->inputs.size(); ++t) {
    std::memcpy(record(static_cast<std::uint32_t>(t)), records + t * record_stride_,
                record_stride_);
  }
  load(layout);
}

void HostGraphTable::finish(std::uint32_t t, TaskStatus status) {
  count_down(t, status);
  publish(t, status);
}

void HostGraphTable::count_down(std::uint32_t t, TaskStatus status) {
  const bool ok = status == TaskStatus::ok;
  const GraphLayout& g = *layout_;
  for (std::uint32_t i = g.successor_start[t]; i < g.successor_start[t + 1]; ++i) {
    const std::uint32_t s = g.successors[i];
    // relaxed: published by the decrement's release just after, before the count can reach
    // zero (the poison first: the other order lets s run on a failed input; mutant 2 of
    // spec/device_graph.pml).
    if (!ok) poisoned_[s].store(1, std::memory_order_relaxed);
    // acq_rel: the release sequence of s's count carries every input's poison to the block
    // that takes the count to zero (acquire), which enqueues s. One read-modify-write: a
    // decrement then a separate read lets two blocks both see zero (mutant 3).
    if (inputs_[s].fetch_sub(1, std::memory_order_acq_rel) == 1) enqueue(s);
  }
}

void HostGraphTable::publish(std::uint32_t t, TaskStatus status) {
  // relaxed: a claim; the entry's sequence (release) publishes what is written into it.
  const std::uint64_t at = claimed_.fetch_add(1, std::memory_order_relaxed);
  Entry& e = entries_[at & (slots_ - 1)];
  // acquire: pairs with collect()'s release (the entry's previous completion was read).
  if (e.sequence.load(std::memory_order_acquire) != at) {
    // At most capacity() completions are uncollected: a graph's tasks, the last graph's all
    // collected before the next was loaded.
    throw std::logic_error("weft::gpu graph table: the completion ring is full");
  }
  e.task = t;
  e.status = status;
  // release: the completion (and t's results, written before finish) to the lane's acquire.
  e.sequence.store(at + 1, std::memory_order_release);
}

std::optional<HostGraphTable::Completion> HostGraphTable::collect() {
  Entry& e = entries_[collected_ & (slots_ - 1)];
  // acquire: pairs with publish()'s release.
  if (e.sequence.load(std::memory_order_acquire) != collected_ + 1) return std::nullopt;
  const Completion c{e.task, e.status};
  // release: the reads above happen before the entry's next publish (one lap later).
  e.sequence.store(collected_ + slots_, std::memory_order_release);
  ++collected_;
  return c;
}

}  // namespace weft::gpu::detail
