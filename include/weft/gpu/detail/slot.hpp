// weft/gpu/detail/slot.hpp - the task slots shared by the host scheduler and the resident
// blocks: records of tagged words.
//
// Slots live in pinned, host-mapped memory (host backend: ordinary memory). Each resident block
// owns a ring of K slots (K = ring depth, 1..kMaxRingDepth); the scheduler loads them in ring
// order and the block runs them in ring order. A slot holds one record, a sequence of 8-byte
// words, each a tag (high 32 bits) beside 32 bits of data:
//
//   word 0  request header: the task type                  written by the scheduler
//   word 1  request header: the payload's size in bytes,   written by the scheduler
//           or kExitMark (the block returns)
//   word 2  ended: the task ended (data 0)                 written by the block, last
//   word 3  status: the TaskStatus the task ended with     written by the block
//   word 4+ the payload, 4 bytes a word: the request's,    written by the scheduler, then
//           then the task's results in place                 (results) by the block
//
// The tag of a word is 2 * use + direction: `use` counts the slot's loads (1 for its first
// task, wrapping), direction 0 for a request and 1 for a result. An aligned 8-byte access is
// single-copy atomic, but nothing orders one word of a record against another: a reader may
// see any mix of old and new words (the H100 showed it, bench/results/h100/probes/
// tagged_mailbox-*.txt). So a reader takes a record only when every word it needs carries the
// tag it expects:
//  - the block takes use n of a slot when words 0, 1 and the payload words the size covers
//    carry request_tag(n); one read of the record is at once the poll and the payload's copy
//    (a state word, then the payload, took two PCIe round trips);
//  - the scheduler collects it when words 2, 3 and the covered payload words carry
//    result_tag(n), and only then loads use n + 1 (which rewrites words 0 and 1, and every
//    payload word it covers); nobody writes IDLE.
// The headers belong to the scheduler and words 2 and 3 to the block, so an EXIT record
// (words 0 and 1 of the block's next use) may be written over a slot whose task the watchdog
// gave up on while the block still runs it: the block's late results touch other words.
// Headers, ended and status words carry the use count, not only the direction: they are not
// rewritten by the other side, so a stale header of use n must not pass for use n + 1 (payload
// words would
// need only the direction, every result rewriting what its request covered). The slots start
// with every word tagged result_tag(0). spec/tagged_records.pml is the model spin checks.
//
// Ordering beyond a record's own words (a task's global-memory writes seen by the tasks and
// the host code that come after it): the block stores the ended word after a system-scope
// release fence and the scheduler loads it with acquire; the scheduler stores word 0 with
// release and the block loads it with acquire (docs/gpu.md, "Slots"). Status and results are
// written before that release, so they arrive with the ended word; the scheduler checks their
// tags all the same (a record is only ever trusted by its tags).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace weft::gpu::detail {

/// The most slots one block's ring may have (a warp polls them with a lane for each).
inline constexpr std::size_t kMaxRingDepth = 32;

inline constexpr std::size_t kTypeWord = 0;
inline constexpr std::size_t kSizeWord = 1;
inline constexpr std::size_t kEndedWord = 2;
inline constexpr std::size_t kStatusWord = 3;
inline constexpr std::size_t kPayloadWord = 4;  // the first payload word
inline constexpr std::size_t kBytesPerWord = 4;  // payload bytes one tagged word carries
/// Word 1's data in an EXIT record (no payload is that large).
inline constexpr std::uint32_t kExitMark = 0xFFFFFFFFu;

#if defined(__CUDACC__)
#define WEFT_SLOT_HD __host__ __device__
#else
#define WEFT_SLOT_HD
#endif

WEFT_SLOT_HD constexpr std::uint32_t request_tag(std::uint32_t use) noexcept { return use << 1; }
WEFT_SLOT_HD constexpr std::uint32_t result_tag(std::uint32_t use) noexcept {
  return (use << 1) | 1u;
}
WEFT_SLOT_HD constexpr std::uint64_t tagged(std::uint32_t tag, std::uint32_t data) noexcept {
  return (static_cast<std::uint64_t>(tag) << 32) | data;
}
WEFT_SLOT_HD constexpr std::uint32_t tag_of(std::uint64_t word) noexcept {
  return static_cast<std::uint32_t>(word >> 32);
}
WEFT_SLOT_HD constexpr std::uint32_t data_of(std::uint64_t word) noexcept {
  return static_cast<std::uint32_t>(word);
}
/// Payload words a payload of `size` bytes covers.
WEFT_SLOT_HD constexpr std::uint32_t payload_words(std::uint32_t size) noexcept {
  return (size + static_cast<std::uint32_t>(kBytesPerWord) - 1) /
         static_cast<std::uint32_t>(kBytesPerWord);
}

/// Words of a record with room for `payload_capacity` bytes.
WEFT_SLOT_HD constexpr std::size_t record_words(std::size_t payload_capacity) noexcept {
  return kPayloadWord + (payload_capacity + kBytesPerWord - 1) / kBytesPerWord;
}
/// Bytes between consecutive slots of a ring: a record rounded to 16 bytes (the device reads
/// and writes them as pairs of words).
constexpr std::size_t slot_stride(std::size_t payload_capacity) noexcept {
  return (record_words(payload_capacity) * 8 + 15) / 16 * 16;
}
/// Bytes between consecutive blocks' rings, rounded to 128 so that no two blocks share a
/// cache line or a PCIe read.
constexpr std::size_t ring_stride(std::size_t payload_capacity, std::size_t depth) noexcept {
  return (depth * slot_stride(payload_capacity) + 127) / 128 * 128;
}

/// Where things are in a ring memory of `blocks` rings (host addresses or device addresses).
struct RingLayout {
  unsigned char* base = nullptr;
  std::size_t depth = 1;
  std::size_t capacity = 0;    // payload bytes of a record
  std::size_t slot_bytes = 0;  // slot_stride
  std::size_t ring_bytes = 0;  // ring_stride

  RingLayout() = default;
  RingLayout(unsigned char* b, std::size_t cap, std::size_t k) noexcept
      : base(b),
        depth(k),
        capacity(cap),
        slot_bytes(slot_stride(cap)),
        ring_bytes(ring_stride(cap, k)) {}
  /// Slot j of block `block`: its record's words.
  [[nodiscard]] std::uint64_t* slot(std::size_t block, std::size_t j) const noexcept {
    return reinterpret_cast<std::uint64_t*>(base + block * ring_bytes + j * slot_bytes);
  }
};

/// Before any block starts: every word of `blocks` rings tagged result_tag(0), as a slot is
/// after its results were collected (zeroed memory would carry request tags).
inline void init_rings(const RingLayout& layout, std::size_t blocks) noexcept {
  const std::uint64_t collected = tagged(result_tag(0), 0);
  const std::size_t words = layout.ring_bytes * blocks / 8;
  auto* w = reinterpret_cast<std::uint64_t*>(layout.base);
  for (std::size_t i = 0; i < words; ++i) w[i] = collected;
}

// ---- the host's side of a record (the scheduler, and the host backend's blocks) ----
// std::atomic_ref on the words: the other side reads and writes them concurrently (a GPU
// block, or a host thread under ThreadSanitizer); on x86-64 a relaxed 8-byte access is a plain
// move.

inline std::uint64_t load_word(const std::uint64_t& w, std::memory_order order) noexcept {
  return std::atomic_ref<std::uint64_t>(const_cast<std::uint64_t&>(w)).load(order);
}
inline void store_word(std::uint64_t& w, std::uint64_t v, std::memory_order order) noexcept {
  std::atomic_ref<std::uint64_t>(w).store(v, order);
}

/// Writes `size` bytes of `data` into payload words [first, ...) of `record`, tagged `tag`
/// (relaxed: each word vouches for itself by its tag). Bytes past `size` in the last word are 0.
inline void write_payload_words(std::uint64_t* record, std::uint32_t tag, const void* data,
                                std::uint32_t size) noexcept {
  const auto* bytes = static_cast<const unsigned char*>(data);
  const std::uint32_t words = payload_words(size);
  for (std::uint32_t i = 0; i < words; ++i) {
    std::uint32_t v = 0;
    const std::uint32_t n = size - i * 4 < 4 ? size - i * 4 : 4;
    std::memcpy(&v, bytes + i * 4, n);
    store_word(record[kPayloadWord + i], tagged(tag, v), std::memory_order_relaxed);
  }
}

/// Reads the payload words covering `size` bytes into `out` (relaxed). Returns false, with
/// `out` partly written, when one of them does not carry `tag` (its new value is not visible
/// yet).
inline bool read_payload_words(const std::uint64_t* record, std::uint32_t tag, void* out,
                               std::uint32_t size) noexcept {
  auto* bytes = static_cast<unsigned char*>(out);
  const std::uint32_t words = payload_words(size);
  for (std::uint32_t i = 0; i < words; ++i) {
    const std::uint64_t w = load_word(record[kPayloadWord + i], std::memory_order_relaxed);
    if (tag_of(w) != tag) return false;
    const std::uint32_t v = data_of(w);
    const std::uint32_t n = size - i * 4 < 4 ? size - i * 4 : 4;
    std::memcpy(bytes + i * 4, &v, n);
  }
  return true;
}

/// Whether every payload word covering `size` bytes carries `tag` (relaxed loads).
inline bool payload_tagged(const std::uint64_t* record, std::uint32_t tag,
                           std::uint32_t size) noexcept {
  const std::uint32_t words = payload_words(size);
  for (std::uint32_t i = 0; i < words; ++i) {
    if (tag_of(load_word(record[kPayloadWord + i], std::memory_order_relaxed)) != tag) return false;
  }
  return true;
}

/// The scheduler's load of use `use` of a slot: payload words and the size word relaxed, then
/// the type word with release (pairs with the block's acquire load of it: what the scheduler
/// saw before, such as an earlier task's results, is visible to the task).
inline void write_request(std::uint64_t* record, std::uint32_t use, std::uint32_t type,
                          std::uint32_t size, const void* payload) noexcept {
  const std::uint32_t tag = request_tag(use);
  write_payload_words(record, tag, payload, size);
  store_word(record[kSizeWord], tagged(tag, size), std::memory_order_relaxed);
  store_word(record[kTypeWord], tagged(tag, type), std::memory_order_release);
}
/// An EXIT record as use `use` of a slot (release: as write_request).
inline void write_exit(std::uint64_t* record, std::uint32_t use) noexcept {
  const std::uint32_t tag = request_tag(use);
  store_word(record[kSizeWord], tagged(tag, kExitMark), std::memory_order_relaxed);
  store_word(record[kTypeWord], tagged(tag, 0), std::memory_order_release);
}

}  // namespace weft::gpu::detail
