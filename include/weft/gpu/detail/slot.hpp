// weft/gpu/detail/slot.hpp - the task slot shared by the host scheduler and one resident block.
//
// Slots live in pinned, host-mapped memory (host backend: ordinary memory); each resident block
// owns one. The state word is the only synchronisation between the two sides:
//
//        scheduler: task copied in        block: results written
//   IDLE ---------------------------> READY ----------------------> FINISHED
//    ^  \                                                             |
//    |   \ scheduler: shutdown                                        | scheduler: collected
//    |    `------------------------> EXIT (the block returns)         |
//    `----------------------------------------------------------------'
//
// The writer of the payload publishes it with a release store of the state; the reader
// acquires the state before reading the payload (system scope: the two sides are a CPU and a
// GPU). docs/gpu.md has the invariants; tests drive every illegal transition.
#pragma once

#include <cstddef>
#include <cstdint>

namespace weft::gpu::detail {

enum class SlotState : std::uint32_t { idle = 0, ready = 1, finished = 2, exit = 3 };

/// The transitions the protocol allows, and who makes them. Everything else is a bug.
constexpr bool slot_transition_allowed(SlotState from, SlotState to) noexcept {
  switch (from) {
    case SlotState::idle:
      return to == SlotState::ready || to == SlotState::exit;  // scheduler
    case SlotState::ready:
      return to == SlotState::finished;  // block
    case SlotState::finished:
      return to == SlotState::idle;  // scheduler
    case SlotState::exit:
      return false;  // terminal
  }
  return false;
}

const char* to_string(SlotState s) noexcept;

/// The head of every slot; the payload follows at kSlotHeaderBytes.
struct SlotHeader {
  std::uint32_t state;         // SlotState: the synchronisation word (atomic on both sides)
  std::uint32_t type;          // task type id: written by the scheduler before READY
  std::uint32_t payload_size;  // bytes of payload: written by the scheduler before READY
  std::uint32_t status;        // TaskStatus: written by the block before FINISHED
};
inline constexpr std::size_t kSlotHeaderBytes = 16;
static_assert(sizeof(SlotHeader) == kSlotHeaderBytes);

/// Bytes between consecutive slots: header + payload rounded to 128 so that no two blocks'
/// slots share a cache line or a PCIe read.
constexpr std::size_t slot_stride(std::size_t payload_capacity) noexcept {
  return (kSlotHeaderBytes + payload_capacity + 127) / 128 * 128;
}

}  // namespace weft::gpu::detail
