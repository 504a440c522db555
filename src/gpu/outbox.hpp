// What a scheduler lane remembers of a task it handed to a block (or the mailbox), and the
// lane's outbox: records of ended tasks, staged per output queue (and per callback) until the
// lane delivers them in one lock per queue.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "gpu/graph_layout.hpp"
#include "gpu/input_queue.hpp"
#include "gpu/record_buffer.hpp"
#include "weft/gpu/record.hpp"

namespace weft::gpu::detail {

/// A task in flight as its lane sees it (the payload lives in the slot itself).
struct SlotMeta {
  using Clock = std::chrono::steady_clock;
  std::uint64_t tag = 0;
  std::uint32_t out = 0;
  std::uint32_t type = 0;
  std::uint32_t size = 0;
  std::uint32_t callback = 0;
  bool lost = false;  // delivered as timed_out; the block still runs it
  Clock::time_point loaded{};

  static SlotMeta of_entry(const unsigned char* entry, Clock::time_point loaded) noexcept {
    EntryHead e;
    std::memcpy(&e, entry, sizeof e);
    return SlotMeta{e.tag, e.out, e.type, e.payload_size, e.callback, false, loaded};
  }
  static SlotMeta of_record(const unsigned char* record, std::size_t out,
                            Clock::time_point loaded) noexcept {
    RecordHead r;
    std::memcpy(&r, record, sizeof r);
    return SlotMeta{r.tag, static_cast<std::uint32_t>(out), r.type, r.payload_size, 0, false,
                    loaded};
  }
};

/// Writes a finished record's bytes: the head from `m` and `status`, then the results (zeros
/// when `results` is null: a task whose results are lost).
inline void write_record(unsigned char* to, const SlotMeta& m, TaskStatus status,
                         const unsigned char* results, std::size_t room) noexcept {
  const RecordHead h{m.type, m.size, m.tag, status};
  std::memcpy(to, &h, sizeof h);
  if (results != nullptr) {
    copy_payload(to + kRecordPayloadOffset, results, room, m.size);
  } else {
    std::memset(to + kRecordPayloadOffset, 0, room);
  }
}

class Outbox {
 public:
  Outbox(std::size_t outputs, std::size_t payload_capacity)
      : room_(payload_room(payload_capacity)),
        staged_(outputs, RecordBuffer(record_stride(payload_capacity))),
        callback_records_(record_stride(payload_capacity)) {}

  /// A task ended (finished, timed out, failed, cancelled): stage its record. Inlined into
  /// the lanes' per-task loops; the rare callback case is out of line.
  [[gnu::always_inline]] inline void stage(const SlotMeta& m, TaskStatus status,
                                           const unsigned char* results) {
    unsigned char* r;
    if (m.callback == 0) {
      r = staged_[m.out].append();
    } else {
      r = stage_callback(m);
      if (r == nullptr) return;  // the graph's fan-out task: the pool's own, never delivered
    }
    write_record(r, m, status, results, room_);
    failed_ += status != TaskStatus::ok;  // counted here: the delivery need not re-read
  }

  /// Staged records for each output queue.
  [[nodiscard]] std::vector<RecordBuffer>& by_queue() noexcept { return staged_; }
  /// Staged records for callbacks, and their callback handles (same order).
  [[nodiscard]] RecordBuffer& callback_records() noexcept { return callback_records_; }
  [[nodiscard]] std::vector<std::uint32_t>& callback_ids() noexcept { return callback_ids_; }
  /// Staged records whose status is not ok, since the last call.
  std::uint64_t take_failed() noexcept { return std::exchange(failed_, 0); }
  /// The graph table indices of the graph roots staged (kGraphTaskFlag), since the last call
  /// (the caller clears it).
  [[nodiscard]] std::vector<std::uint32_t>& graph_roots() noexcept { return graph_roots_; }
  /// The loaded graph's fan-out task (GraphLayout::fan_out, kNoFanOut: none): listed among
  /// the graph roots when its slot ends, but not staged for any queue, nor counted failed.
  void set_fan_out(std::uint32_t task) noexcept { fan_out_ = task; }

 private:
  // A callback's task, or a graph root (which goes to its queue).
  [[gnu::noinline]] unsigned char* stage_callback(const SlotMeta& m) {
    if ((m.callback & kGraphTaskFlag) != 0) {
      const std::uint32_t task = m.callback & ~kGraphTaskFlag;
      graph_roots_.push_back(task);
      return task == fan_out_ ? nullptr : staged_[m.out].append();
    }
    callback_ids_.push_back(m.callback);
    return callback_records_.append();
  }

  std::size_t room_;
  std::vector<RecordBuffer> staged_;  // by output queue
  RecordBuffer callback_records_;
  std::vector<std::uint32_t> callback_ids_;
  std::vector<std::uint32_t> graph_roots_;
  std::uint32_t fan_out_ = GraphLayout::kNoFanOut;
  std::uint64_t failed_ = 0;
};

}  // namespace weft::gpu::detail
