#include "gpu/graph_feed.hpp"

#include <chrono>
#include <cstring>
#include <utility>

namespace weft::gpu::detail {

void GraphFeed::add(Node& node) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  waiting_.splice(waiting_.end(), node);
}

bool GraphFeed::load_next() {
  if (left_ > 0) return false;
  Graph g;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (waiting_.empty()) return false;
    g = std::move(waiting_.front());
    waiting_.pop_front();
  }
  const std::size_t tasks = g.layout.inputs.size();
  for (std::size_t t = 0; t < tasks; ++t) {
    std::memcpy(table_->record(static_cast<std::uint32_t>(t)), g.records.data() + t * stride_,
                stride_);
  }
  table_->load(g.layout);
  out_ = g.out;
  left_ = tasks;
  // The roots from the counts just written, never from the live ones (spec/device_graph.pml).
  // Each enqueue publishes the records and counts above to the block that takes it.
  for (const std::uint32_t r : g.layout.roots) table_->enqueue(r);
  return true;
}

std::size_t GraphFeed::collect(Outbox& outbox) {
  std::size_t n = 0;
  while (left_ > 0) {
    const auto c = table_->collect();
    if (!c) break;
    stage(outbox, table_->record(c->task), out_, c->status);
    --left_;
    ++n;
  }
  return n;
}

std::size_t GraphFeed::cancel(Outbox& outbox) {
  table_->cancel_unrun();
  std::list<Graph> waiting;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    waiting.swap(waiting_);
  }
  std::size_t n = 0;
  for (const Graph& g : waiting) {
    for (std::size_t t = 0; t < g.layout.inputs.size(); ++t) {
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
