#include "gpu/graph_feed.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <utility>

namespace weft::gpu::detail {

GraphFeed::Node GraphFeed::make_node(std::shared_ptr<const GraphLayout> layout,
                                     const unsigned char* records, std::size_t out) {
  const std::size_t bytes = layout->tasks() * stride_;
  const bool fan_out = layout->fan_out != GraphLayout::kNoFanOut;
  Node node;
  node.push_back(Graph{std::move(layout), {}, out});
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!spares_.empty()) {
      node.back().records = std::move(spares_.back());
      spares_.pop_back();
    }
  }
  node.back().records.assign(records, records + bytes);
  if (fan_out) {  // the fan-out task's record: the pool's type id, no payload
    node.back().records.resize(bytes + stride_, 0);
    RecordHead head;
    std::memset(&head, 0, sizeof head);  // no stray padding bytes on their way to the GPU
    head.type = kGraphFanOutTypeId;
    head.status = TaskStatus::ok;
    std::memcpy(node.back().records.data() + bytes, &head, sizeof head);
  }
  return node;
}

void GraphFeed::recycle(std::vector<unsigned char>&& records) noexcept {
  if (records.capacity() == 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (spares_.size() < kSpareBuffers) spares_.push_back(std::move(records));
}

void GraphFeed::add(Node& node) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  waiting_.splice(waiting_.end(), node);
}

bool GraphFeed::load_next() {
  if (left_ > 0) return false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (waiting_.empty()) return false;
    current_ = std::move(waiting_.front());
    waiting_.pop_front();
  }
  const std::size_t tasks = current_.layout->inputs.size();
  table_->load_graph(current_.layout, current_.records.data());
  done_.assign(tasks, 0);
  next_root_ = 0;
  left_ = tasks;
  return true;
}

std::size_t GraphFeed::take_roots(RecordBuffer& batch, std::size_t max, const InputQueue& input) {
  std::size_t n = 0;
  for (; n < max && next_root_ < current_roots(); ++n, ++next_root_) {
    // The roots from the counts the host wrote, never from the live ones
    // (spec/device_graph.pml); loading a root's slot publishes the table to its block.
    const std::uint32_t r = current_.layout->roots[next_root_];
    input.write_entry(batch.append(), current_.records.data() + r * stride_, current_.out,
                      kGraphTaskFlag | r);
  }
  return n;
}

std::size_t GraphFeed::collect(Outbox& outbox, std::size_t max) {
  std::size_t n = 0;
  while (left_ > 0 && n < max) {
    // A run of published completions first, their records prefetched, then staged: the
    // records are scattered by task index and on a GPU were written by it (each a cache miss),
    // so fetched together their misses overlap instead of following one another.
    GraphTable::Completion run[kCollectRun];
    const std::size_t want = std::min({kCollectRun, max - n, left_});
    std::size_t got = 0;
    for (; got < want; ++got) {
      const auto c = table_->collect();
      if (!c) break;
      run[got] = *c;
      prefetch_record(table_->result(c->task));
    }
    for (std::size_t i = 0; i < got; ++i) {
      stage(outbox, table_->result(run[i].task), current_.out, run[i].status);
      delivered(run[i].task);
    }
    n += got;
    if (got < want) break;  // nothing more published yet
  }
  return n;
}

void GraphFeed::prefetch_record(const unsigned char* record) const noexcept {
  for (std::size_t at = 0; at < stride_; at += 64) __builtin_prefetch(record + at);
}

std::size_t GraphFeed::roots_ended(std::vector<std::uint32_t>& roots) {
  std::size_t fan_outs = 0;
  for (const std::uint32_t r : roots) {
    fan_outs += r == fan_out() ? 1 : 0;
    delivered(r);
  }
  roots.clear();
  return fan_outs;
}

void GraphFeed::delivered(std::uint32_t t) {
  if (t >= done_.size() || done_[t] != 0 || left_ == 0) {
    throw std::logic_error("weft::gpu graph feed: task " + std::to_string(t) +
                           " delivered twice or out of the graph");
  }
  done_[t] = 1;
  // The graph's records are no longer read once its last task is delivered: their buffer
  // takes the next push's copy (a graph pushed after the last one ended finds it spare).
  if (--left_ == 0) recycle(std::move(current_.records));
}

std::size_t GraphFeed::cancel(Outbox& outbox) {
  table_->cancel_unrun();
  return cancel_waiting(outbox);
}

std::size_t GraphFeed::fail(Outbox& outbox, TaskStatus status) {
  std::size_t n = 0;
  for (std::uint32_t t = 0; t < done_.size() && left_ > 0; ++t) {
    if (done_[t] != 0) continue;
    if (t != fan_out()) {  // the pool's own task ends unseen
      stage(outbox, current_.records.data() + t * stride_, current_.out, status);
      ++n;
    }
    delivered(t);
  }
  next_root_ = current_roots();
  return n + cancel_waiting(outbox);
}

std::size_t GraphFeed::cancel_waiting(Outbox& outbox) {
  std::list<Graph> waiting;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    waiting.swap(waiting_);
  }
  std::size_t n = 0;
  for (const Graph& g : waiting) {
    for (std::size_t t = 0; t < g.layout->tasks(); ++t) {
      stage(outbox, g.records.data() + t * stride_, g.out, TaskStatus::cancelled);
      ++n;
    }
  }
  return n;
}

void GraphFeed::stage(Outbox& outbox, const unsigned char* record, std::size_t out,
                      TaskStatus status) {
  outbox.stage(SlotMeta::of_record(record, out, std::chrono::steady_clock::time_point{}), status,
               record + kRecordPayloadOffset);
}

}  // namespace weft::gpu::detail
