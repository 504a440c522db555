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

#include "weft/cpu/detail/cpu_relax.hpp"
#include "weft/error.hpp"
#include "weft/gpu/detail/block_runtime.hpp"
#include "weft/gpu/detail/slot.hpp"

namespace weft::gpu::detail {

namespace {

using weft::cpu::detail::cpu_relax;

class HostBlocks final : public BlockRuntime {
 public:
  HostBlocks(std::size_t blocks, std::size_t depth, std::size_t capacity, std::size_t shared_bytes,
             HostDispatch dispatch)
      : blocks_(blocks),
        shared_bytes_(shared_bytes),
        dispatch_(dispatch),
        bytes_(ring_stride(capacity, depth) * blocks),
        layout_(static_cast<unsigned char*>(::operator new (bytes_, std::align_val_t{128})),
                capacity, depth) {
    if (blocks == 0) throw InvalidArgument("weft::gpu host backend: 0 blocks");
    init_rings(layout_, blocks);  // every slot as after a collection
    shared_.resize(blocks * (shared_bytes == 0 ? 1 : shared_bytes));
  }
  ~HostBlocks() override {
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
    ::operator delete (layout_.base, std::align_val_t{128});
  }

  [[nodiscard]] RingLayout rings() const noexcept override { return layout_; }
  [[nodiscard]] std::size_t num_blocks() const noexcept override { return blocks_; }

  void start() override {
    threads_.reserve(blocks_);
    for (std::size_t b = 0; b < blocks_; ++b) threads_.emplace_back([this, b] { block_main(b); });
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
           std::to_string(layout_.depth) + " slot(s) each";
  }

 private:
  // Whether `record` holds use `use` in full: its headers carry the request tag (the type word
  // loaded with acquire: pairs with the scheduler's release store of it) and so do the payload
  // words its size covers, which are copied into `payload` (an EXIT record has none).
  bool take_request(const std::uint64_t* record, std::uint32_t use, std::uint32_t& type,
                    std::uint32_t& size, unsigned char* payload) const {
    const std::uint32_t tag = request_tag(use);
    const std::uint64_t w0 = load_word(record[kTypeWord], std::memory_order_acquire);
    if (tag_of(w0) != tag) return false;
    // relaxed: the word vouches for itself by its tag.
    const std::uint64_t w1 = load_word(record[kSizeWord], std::memory_order_relaxed);
    if (tag_of(w1) != tag) return false;
    type = data_of(w0);
    size = data_of(w1);
    if (size == kExitMark) return true;
    // A size past the capacity: the task fails with bad_payload_size, nothing more is read.
    return size > layout_.capacity || read_payload_words(record, tag, payload, size);
  }

  // The GPU kernel's loop (include/weft/gpu/device.cuh) with one thread: wait until the
  // record at the ring position holds its next use in full, run it, write the results and the
  // status back, go on to the next slot; return at an EXIT record.
  void block_main(std::size_t b) {
    const std::size_t depth = layout_.depth;
    void* shared = shared_.data() + b * (shared_bytes_ == 0 ? 1 : shared_bytes_);
    const BlockContext ctx(0, 1, static_cast<int>(b), shared);
    // The task's payload while it runs (the GPU block's shared-memory copy).
    std::vector<unsigned char> payload(layout_.capacity + 16);
    std::vector<std::uint32_t> uses(depth, 0);  // slot j's uses so far
    std::size_t pos = 0;
    for (;;) {
      std::uint64_t* record = layout_.slot(b, pos);
      const std::uint32_t use = uses[pos] + 1;
      std::uint32_t type = 0, size = 0;
      bool taken = take_request(record, use, type, size, payload.data());
      for (int spin = 0; !taken && spin < 256; ++spin) {
        cpu_relax();
        taken = take_request(record, use, type, size, payload.data());
      }
      // Idle: sleep and look again, 1 us at first, doubling up to 128 us (as a GPU block backs
      // off with __nanosleep). Not std::atomic wait/notify: with GCC 13's libstdc++ on the
      // 16-core H100 machine a block slept through the lane's notify now and then, stranding
      // one task of the million-task stress test for good (scripts/probes/
      // host_stress_probe.cpp on the tree of 33f7e6f: 999 999 of 1 000 000 delivered in 2 of 3
      // runs; never seen with GCC 12 on 2 cores). Polling cannot miss a store.
      for (unsigned sleep_us = 1; !taken; sleep_us = std::min(sleep_us * 2, 128u)) {
        std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
        taken = take_request(record, use, type, size, payload.data());
      }
      uses[pos] = use;
      if (size == kExitMark) return;
      TaskStatus status = TaskStatus::bad_payload_size;
      if (size <= layout_.capacity) {
        try {
          status = dispatch_(type, payload.data(), size, ctx);
        } catch (...) {
          // A host body that throws is the host's analogue of a device trap; the GPU cannot
          // throw, so the status the task reports is the one a faulting device task gets.
          status = TaskStatus::device_failed;
        }
        // The results over the payload words (relaxed: each vouches for itself by its tag).
        write_payload_words(record, result_tag(use), payload.data(), size);
      }
      // relaxed: vouches for itself by its tag.
      store_word(record[kStatusWord], tagged(result_tag(use), static_cast<std::uint32_t>(status)),
                 std::memory_order_relaxed);
      // release: pairs with the scheduler's acquire load of the ended word; the task's effects
      // are visible to whoever the scheduler delivers it to.
      store_word(record[kEndedWord], tagged(result_tag(use), 0), std::memory_order_release);
      pos = pos + 1 == depth ? 0 : pos + 1;
    }
  }

  std::size_t blocks_;
  std::size_t shared_bytes_;
  HostDispatch dispatch_;
  std::size_t bytes_;
  RingLayout layout_;
  std::vector<unsigned char> shared_;
  std::vector<std::thread> threads_;
};

}  // namespace

std::unique_ptr<BlockRuntime> make_host_blocks(std::size_t blocks, std::size_t depth,
                                               std::size_t payload_capacity,
                                               std::size_t shared_bytes, HostDispatch dispatch) {
  return std::make_unique<HostBlocks>(blocks, depth, payload_capacity, shared_bytes, dispatch);
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
      return "cancelled (the pool shut down before the task ran)";
    case TaskStatus::timed_out:
      return "timed out (exceeded the watchdog deadline)";
    case TaskStatus::device_failed:
      return "device failed (the task trapped, faulted or threw)";
  }
  return "?";
}
}  // namespace weft::gpu
