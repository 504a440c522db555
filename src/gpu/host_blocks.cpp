// The host backend: blocks emulated by host threads over the same slot protocol as the GPU.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <thread>
#include <vector>

#include "gpu/graph_table.hpp"
#include "weft/cpu/detail/cpu_relax.hpp"
#include "weft/error.hpp"
#include "weft/gpu/detail/block_runtime.hpp"
#include "weft/gpu/detail/mailbox_record.hpp"
#include "weft/gpu/detail/slot.hpp"
#include "weft/gpu/record.hpp"

namespace weft::gpu::detail {

namespace {

using weft::cpu::detail::cpu_relax;

class HostBlocks final : public BlockRuntime {
 public:
  HostBlocks(std::size_t blocks, std::size_t depth, std::size_t capacity, std::size_t shared_bytes,
             HostDispatch dispatch, bool mailbox, std::size_t blocks_per_unit,
             std::size_t graph_capacity)
      : blocks_(blocks),
        blocks_per_unit_(blocks_per_unit == 0 ? 1 : blocks_per_unit),
        shared_bytes_(shared_bytes),
        dispatch_(dispatch),
        rings_bytes_(ring_stride(capacity, depth) * blocks),
        bytes_(rings_bytes_ + (mailbox ? kMailboxBytes : 0)),
        layout_(static_cast<unsigned char*>(::operator new (bytes_, std::align_val_t{128})),
                capacity, depth),
        graph_(graph_capacity == 0
                   ? nullptr
                   : std::make_unique<HostGraphTable>(graph_capacity, record_stride(capacity))) {
    if (blocks == 0) throw InvalidArgument("weft::gpu host backend: 0 blocks");
    std::memset(layout_.base, 0, bytes_);  // every slot IDLE, the mailbox at use 0
    if (mailbox) mailbox_ = reinterpret_cast<std::uint64_t*>(layout_.base + rings_bytes_);
    // One more block's shared memory: the mailbox server's.
    shared_.resize((blocks + 1) * (shared_bytes == 0 ? 1 : shared_bytes));
  }
  ~HostBlocks() override {
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
    ::operator delete (layout_.base, std::align_val_t{128});
  }

  [[nodiscard]] RingLayout rings() const noexcept override { return layout_; }
  [[nodiscard]] std::size_t num_blocks() const noexcept override { return blocks_; }

  [[nodiscard]] std::uint64_t* mailbox() const noexcept override { return mailbox_; }
  [[nodiscard]] GraphTable* graph_table() noexcept override { return graph_.get(); }

  [[nodiscard]] std::vector<std::uint32_t> block_units() const override {
    std::vector<std::uint32_t> units(blocks_);
    for (std::size_t b = 0; b < blocks_; ++b) {
      units[b] = static_cast<std::uint32_t>(b / blocks_per_unit_);
    }
    return units;
  }
  [[nodiscard]] std::size_t blocks_per_unit() const noexcept override { return blocks_per_unit_; }

  void start() override {
    join();
    threads_.clear();
    std::memset(layout_.base, 0, bytes_);  // every slot IDLE, the mailbox at use 0
    threads_.reserve(blocks_ + 1);
    for (std::size_t b = 0; b < blocks_; ++b) threads_.emplace_back([this, b] { block_main(b); });
    if (mailbox_ != nullptr) threads_.emplace_back([this] { mailbox_main(); });
  }
  void join() override {
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }
  std::string failure() override { return {}; }
  void abandon() noexcept override {
    for (auto& t : threads_) {
      if (t.joinable()) t.detach();  // a stuck task body: its thread outlives the pool
    }
  }

  [[nodiscard]] std::string describe() const override {
    return "host backend: " + std::to_string(blocks_) + " blocks (threads) of 1 thread, " +
           std::to_string(layout_.depth) + " slot(s) each" +
           (mailbox_ != nullptr ? ", and one serving the mailbox" : "");
  }

 private:
  static bool ready_or_exit(std::uint32_t s) {
    return s == static_cast<std::uint32_t>(SlotState::ready) ||
           s == static_cast<std::uint32_t>(SlotState::exit);
  }

  // The GPU kernel's loop (include/weft/gpu/device.cuh) with one thread: wait until the slot
  // at the ring position is READY or EXIT, take the run of READY slots from there, run them in
  // ring order, publish each FINISHED.
  void block_main(std::size_t b) {
    std::uint32_t* states = layout_.states(b);
    const std::size_t depth = layout_.depth;
    void* shared = shared_.data() + b * (shared_bytes_ == 0 ? 1 : shared_bytes_);
    const BlockContext ctx(0, 1, static_cast<int>(b), shared);
    std::size_t pos = 0;
    for (;;) {
      run_graph_task(ctx);
      // std::atomic_ref here, cuda::atomic_ref<thread_scope_system> in the kernel: the same
      // acquire/release protocol; the host side needs no CUDA headers.
      std::atomic_ref<std::uint32_t> head(states[pos]);
      // acquire: pairs with the scheduler's release store of READY/EXIT; the task's type, size
      // and payload written before it are visible.
      std::uint32_t s = head.load(std::memory_order_acquire);
      // The graph table's ready tasks before the ring's, and again while waiting for the ring:
      // a task the table makes ready is on its graph's critical path. A block that finished a
      // graph task takes the successors it made ready itself, so a graph always makes progress; an
      // idle block joins in within its poll period (at most 128 us).
      for (int spin = 0; !ready_or_exit(s) && spin < 256; ++spin) {
        if (run_graph_task(ctx)) spin = 0;
        cpu_relax();
        s = head.load(std::memory_order_acquire);
      }
      // Idle: sleep and look again, 1 us at first, doubling up to 128 us (as a GPU block backs
      // off with __nanosleep). Not std::atomic wait/notify: with GCC 13's libstdc++ a block
      // slept through the lane's notify now and then, stranding one task of a million-task
      // stress test for good (docs/decisions/007-gpu-device-blocks.md). Polling cannot miss a
      // store.
      for (unsigned sleep_us = 1; !ready_or_exit(s); sleep_us = std::min(sleep_us * 2, 128u)) {
        if (run_graph_task(ctx)) sleep_us = 1;
        std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
        s = head.load(std::memory_order_acquire);  // acquire: as above
      }
      if (s == static_cast<std::uint32_t>(SlotState::exit)) return;
      // The run of READY slots from pos (what the GPU block reads in one pass).
      std::size_t n = 1;
      while (n < depth && std::atomic_ref<std::uint32_t>(states[(pos + n) % depth])
                                  .load(std::memory_order_acquire) ==  // acquire: as above
                              static_cast<std::uint32_t>(SlotState::ready)) {
        ++n;
      }
      // Like the GPU block, each task is published as soon as it ends.
      for (std::size_t t = 0; t < n; ++t) {
        const std::size_t j = (pos + t) % depth;
        auto* header = reinterpret_cast<SlotHeader*>(layout_.slot(b, j));
        TaskStatus status = TaskStatus::ok;  // the fan-out task of a graph: empty
        try {
          if (header->graph_task == 0 || header->type != kGraphFanOutTypeId) {
            status = dispatch_(header->type, layout_.slot(b, j) + kSlotHeaderBytes,
                               header->payload_size, ctx);
          }
        } catch (...) {
          // A host body that throws is the host's analogue of a device trap; the GPU cannot
          // throw, so the status the task reports is the one a faulting device task gets.
          status = TaskStatus::device_failed;
        }
        // A graph's root: its successors are counted down before its slot reports it.
        if (header->graph_task != 0) graph_->count_down(header->graph_task - 1, status);
        header->status = static_cast<std::uint32_t>(status);
        std::uint32_t expected = static_cast<std::uint32_t>(SlotState::ready);
        // release: the status and the payload's results are visible to the scheduler's
        // acquire load of FINISHED. A CAS: a scheduler that gave up on this task (watchdog)
        // and shut down has stored EXIT meanwhile, which must stay.
        if (!std::atomic_ref<std::uint32_t>(states[j]).compare_exchange_strong(
                expected, static_cast<std::uint32_t>(SlotState::finished),
                std::memory_order_release, std::memory_order_relaxed)) {
          return;  // EXIT
        }
      }
      pos = (pos + n) % depth;
    }
  }

  // Runs one of the graph table's ready tasks, if it has one (the successor step of
  // spec/device_graph.pml: finish() poisons, counts down, enqueues and publishes). Returns
  // whether it ran one. One at a time: the block looks at its ring between two, as a GPU
  // block's loader reads its ring while a graph task runs, so that a pushed task waits for at
  // most the graph task in hand, not for the whole graph.
  bool run_graph_task(const BlockContext& ctx) {
    if (!graph_) return false;
    const auto t = graph_->take();
    if (!t) return false;
    TaskStatus status = TaskStatus::cancelled;  // an input did not end ok, or shutdown
    if (graph_->runnable(*t)) {
      unsigned char* record = graph_->record(*t);
      RecordHead head;
      std::memcpy(&head, record, sizeof head);
      try {
        status = dispatch_(head.type, record + kRecordPayloadOffset, head.payload_size, ctx);
      } catch (...) {
        status = TaskStatus::device_failed;  // as in block_main
      }
    }
    graph_->finish(*t, status);
    return true;
  }

  // The GPU kernel's mailbox server (include/weft/gpu/device.cuh, mailbox_loop) with one
  // thread: wait for a request whose tag is not the last served and carried by every word
  // it needs, run the task,
  // write the results, then result word 0 with release. Polls as a ring block does.
  void mailbox_main() {
    void* shared = shared_.data() + blocks_ * (shared_bytes_ == 0 ? 1 : shared_bytes_);
    // The server's block index: one past the ring blocks (docs/gpu.md "The mailbox").
    const BlockContext ctx(0, 1, static_cast<int>(blocks_), shared);
    alignas(16) unsigned char payload[4 * kMailboxWords] = {};
    // Any tag but the last served is a new request (see the kernel's mailbox_loop).
    for (std::uint32_t served = 0;;) {
      std::uint32_t use = 0, type = 0, size = 0;
      auto whole = [&] {
        // acquire: pairs with the pusher's release store of word 0 (the request's other
        // words, and whatever the pusher wrote before, are visible).
        const std::uint64_t w0 =
            std::atomic_ref<std::uint64_t>(mailbox_[0]).load(std::memory_order_acquire);
        use = mailbox_tag(w0);
        if (use == served) return false;
        // relaxed: ordered by word 0's acquire; tags checked as on the GPU.
        const std::uint64_t w1 =
            std::atomic_ref<std::uint64_t>(mailbox_[1]).load(std::memory_order_relaxed);
        if (mailbox_tag(w1) != use) return false;
        type = mailbox_data(w0);
        size = mailbox_data(w1);
        if (size == kMailboxExit) return true;
        for (std::uint32_t i = 0; i < mailbox_payload_words(size); ++i) {
          const std::uint64_t w =
              std::atomic_ref<std::uint64_t>(mailbox_[2 + i]).load(std::memory_order_relaxed);
          if (mailbox_tag(w) != use) return false;
          const std::uint32_t data = mailbox_data(w);
          std::memcpy(payload + 4 * i, &data, 4);
        }
        return true;
      };
      bool got = whole();
      for (int spin = 0; !got && spin < 256; ++spin) {
        cpu_relax();
        got = whole();
      }
      for (unsigned sleep_us = 1; !got; sleep_us = std::min(sleep_us * 2, 128u)) {
        std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
        got = whole();
      }
      if (size == kMailboxExit) return;
      TaskStatus status;
      try {
        status = dispatch_(type, payload, size, ctx);
      } catch (...) {
        status = TaskStatus::device_failed;  // as in block_main
      }
      std::uint64_t* r = mailbox_ + kMailboxResultOffset;
      for (std::uint32_t i = 0; i < mailbox_payload_words(size); ++i) {
        std::uint32_t data = 0;
        std::memcpy(&data, payload + 4 * i, 4);
        // relaxed: ordered before the collector's reads by word 0's release below.
        std::atomic_ref<std::uint64_t>(r[1 + i]).store(mailbox_word(use, data),
                                                       std::memory_order_relaxed);
      }
      // release: pairs with the collector's acquire load (mailbox_result_ready); the results
      // and the body's writes are visible with it.
      std::atomic_ref<std::uint64_t>(r[0]).store(
          mailbox_word(use, static_cast<std::uint32_t>(status)), std::memory_order_release);
      served = use;
    }
  }

  std::size_t blocks_;
  std::size_t blocks_per_unit_;
  std::size_t shared_bytes_;
  HostDispatch dispatch_;
  std::size_t rings_bytes_;
  std::size_t bytes_;
  RingLayout layout_;
  std::vector<unsigned char> shared_;
  std::vector<std::thread> threads_;
  std::uint64_t* mailbox_ = nullptr;       // in the rings' allocation, after the rings
  std::unique_ptr<HostGraphTable> graph_;  // null: no task graphs
};

}  // namespace

std::unique_ptr<BlockRuntime> make_host_blocks(std::size_t blocks, std::size_t depth,
                                               std::size_t payload_capacity,
                                               std::size_t shared_bytes, HostDispatch dispatch,
                                               bool mailbox, std::size_t blocks_per_unit,
                                               std::size_t graph_capacity) {
  return std::make_unique<HostBlocks>(blocks, depth, payload_capacity, shared_bytes, dispatch,
                                      mailbox, blocks_per_unit, graph_capacity);
}

const char* to_string(SlotState s) noexcept {
  switch (s) {
    case SlotState::idle:
      return "IDLE";
    case SlotState::ready:
      return "READY";
    case SlotState::finished:
      return "FINISHED";
    case SlotState::exit:
      return "EXIT";
  }
  return "?";
}

}  // namespace weft::gpu::detail

namespace weft::gpu {
const char* to_string(TaskStatus s) noexcept {
  switch (s) {
    case TaskStatus::ok:
      return "ok";
    case TaskStatus::unknown_type:
      return "unknown task type (no registered type has this id)";
    case TaskStatus::bad_payload_size:
      return "payload size differs from the task type's Payload";
    case TaskStatus::cancelled:
      return "cancelled (the pool shut down before the task ran, or an input task of its graph "
             "did not end ok)";
    case TaskStatus::timed_out:
      return "timed out (exceeded the watchdog deadline)";
    case TaskStatus::device_failed:
      return "device failed (the task trapped, faulted or threw)";
  }
  return "?";
}
}  // namespace weft::gpu
