// weft/gpu/detail/slot.hpp - the task slots shared by the host scheduler and the resident
// blocks.
//
// Slots live in pinned, host-mapped memory (host backend: ordinary memory). Each resident block
// owns a ring of K slots (K = ring depth, 1..kMaxRingDepth): one control line holding the K
// state words, then the K slots (header + payload). The scheduler loads a block's slots in
// ring order and the block runs them in ring order, so one read of the control line tells the
// block every task waiting for it, and one coalesced pass reads all their payloads. The state
// word of each slot is the only synchronisation between the two sides:
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
// GPU). docs/gpu.md has the invariants, spec/slot_protocol.pml the model that spin checks.
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

/// The most slots one block's ring may have: the states fill one 128-byte control line, and a
/// warp reads them with one lane each.
inline constexpr std::size_t kMaxRingDepth = 32;
/// The control line at the head of each block's ring: state word j at offset 4 * j.
inline constexpr std::size_t kRingControlBytes = 128;

/// The head of every slot; the payload follows at kSlotHeaderBytes.
struct SlotHeader {
  std::uint32_t type;          // task type id: written by the scheduler before READY
  std::uint32_t payload_size;  // bytes of payload: written by the scheduler before READY
  std::uint32_t status;        // TaskStatus: written by the block before FINISHED
  // The root of a task graph: its index in the blocks' graph table + 1 (0: a plain task),
  // written by the scheduler before READY. The block counts its successors down before
  // FINISHED.
  std::uint32_t graph_task;
};
inline constexpr std::size_t kSlotHeaderBytes = 16;
static_assert(sizeof(SlotHeader) == kSlotHeaderBytes);

/// Bytes between consecutive slots of a ring: header + payload rounded to 16-byte words.
constexpr std::size_t slot_stride(std::size_t payload_capacity) noexcept {
  return (kSlotHeaderBytes + payload_capacity + 15) / 16 * 16;
}
/// Bytes between consecutive blocks' rings, rounded to 128 so that no two blocks share a
/// cache line or a PCIe read.
constexpr std::size_t ring_stride(std::size_t payload_capacity, std::size_t depth) noexcept {
  return (kRingControlBytes + depth * slot_stride(payload_capacity) + 127) / 128 * 128;
}

/// Where things are in a ring memory of `blocks` rings (host addresses or device addresses).
struct RingLayout {
  unsigned char* base = nullptr;
  std::size_t depth = 1;
  std::size_t slot_bytes = 0;  // slot_stride
  std::size_t ring_bytes = 0;  // ring_stride

  RingLayout() = default;
  RingLayout(unsigned char* b, std::size_t capacity, std::size_t k) noexcept
      : base(b),
        depth(k),
        slot_bytes(slot_stride(capacity)),
        ring_bytes(ring_stride(capacity, k)) {}
  [[nodiscard]] std::uint32_t* states(std::size_t block) const noexcept {
    return reinterpret_cast<std::uint32_t*>(base + block * ring_bytes);
  }
  [[nodiscard]] unsigned char* slot(std::size_t block, std::size_t j) const noexcept {
    return base + block * ring_bytes + kRingControlBytes + j * slot_bytes;
  }
};

}  // namespace weft::gpu::detail
