// weft/gpu/detail/mailbox_record.hpp - the lone-task mailbox's record: one task at a time, outside
// the rings, for the latency of a task pushed to an idle pool (docs/gpu.md "The mailbox").
//
// A ring slot costs a task two trips over PCIe before its body starts (the block acquires the
// state word, then reads the payload) and a system-scope release of FINISHED; the lanes then
// collect the slot and hand the record to a consumer thread. The mailbox is one record in
// pinned host-mapped memory that one block of the pool (the server) polls and that the thread
// waiting for the task may collect itself:
//
//   request (written by the pusher): 32 words of 8 bytes, each (tag << 32) | data:
//     word 0: the task type, stored last, with release; word 1: the payload size (kMailboxExit:
//     the server returns); words 2..: the payload, 4 bytes a word (at most 120 bytes).
//   result (written by the server): word 0: the TaskStatus, stored last, with a system-scope
//     release; words 1..: the payload after the body ran, 4 bytes a word.
//
// The tag is the mailbox's use count, one more for each task. A relaxed or acquire 64-bit
// access of an aligned word is single-copy atomic on both sides, so a reader that sees the
// expected tag in every word it needs has the whole record, from the one read (one
// instruction, one word per lane on the GPU) that polled it: no second trip for the payload.
// Words from an earlier use carry an older tag and are read again. The release stores of
// word 0 and the acquire loads that see them order everything else: the pusher's writes
// before the push (data the task reads through pointers) before the body, and the body's
// writes (device or host memory) before the collector's reads.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "weft/gpu/task.hpp"

namespace weft::gpu::detail {

inline constexpr std::size_t kMailboxWords = 32;  // per direction: one warp, one word per lane
/// The request words, then the result words (on lines of their own), 128-byte aligned.
inline constexpr std::size_t kMailboxBytes = 2 * kMailboxWords * sizeof(std::uint64_t);
inline constexpr std::size_t kMailboxResultOffset = kMailboxWords;  // in words
/// The largest payload a mailbox task may have (30 words of 4 bytes).
inline constexpr std::uint32_t kMailboxPayloadMax = (kMailboxWords - 2) * 4;
/// The size word of the request that makes the server return (shutdown).
inline constexpr std::uint32_t kMailboxExit = 0xFFFFFFFFu;

WEFT_HD constexpr std::uint64_t mailbox_word(std::uint32_t tag, std::uint32_t data) noexcept {
  return (static_cast<std::uint64_t>(tag) << 32) | data;
}
WEFT_HD constexpr std::uint32_t mailbox_tag(std::uint64_t w) noexcept {
  return static_cast<std::uint32_t>(w >> 32);
}
WEFT_HD constexpr std::uint32_t mailbox_data(std::uint64_t w) noexcept {
  return static_cast<std::uint32_t>(w);
}
/// Payload words (4 bytes each) of a payload of `size` bytes.
WEFT_HD constexpr std::uint32_t mailbox_payload_words(std::uint32_t size) noexcept {
  return (size + 3) / 4;
}

/// The pusher: writes the request of use `tag` (size <= kMailboxPayloadMax). The task's
/// other words first, word 0 last with release (pairs with the server's acquire loads).
inline void mailbox_write_request(std::uint64_t* box, std::uint32_t tag, std::uint32_t type,
                                  std::uint32_t size, const unsigned char* payload) noexcept {
  const std::uint32_t words = mailbox_payload_words(size);
  for (std::uint32_t i = 0; i < words; ++i) {
    std::uint32_t data = 0;
    std::memcpy(&data, payload + 4 * i, std::min<std::uint32_t>(4, size - 4 * i));
    // relaxed: whole by its tag; ordered before the server's reads by word 0's release.
    std::atomic_ref<std::uint64_t>(box[2 + i])
        .store(mailbox_word(tag, data), std::memory_order_relaxed);
  }
  std::atomic_ref<std::uint64_t>(box[1]).store(mailbox_word(tag, size), std::memory_order_relaxed);
  // release: pairs with the server's acquire load of word 0.
  std::atomic_ref<std::uint64_t>(box[0]).store(mailbox_word(tag, type), std::memory_order_release);
}
/// Shutdown: the request of use `tag` that makes the server return.
inline void mailbox_write_exit(std::uint64_t* box, std::uint32_t tag) noexcept {
  std::atomic_ref<std::uint64_t>(box[1]).store(mailbox_word(tag, kMailboxExit),
                                               std::memory_order_relaxed);
  // release: as in mailbox_write_request.
  std::atomic_ref<std::uint64_t>(box[0]).store(mailbox_word(tag, 0), std::memory_order_release);
}

/// The collector: whether the result of use `tag` (a task of `size` payload bytes) has come
/// back whole. Word 0 is loaded with acquire first: when it carries the tag, the server's
/// stores before its release are visible, so the other words are read once.
inline bool mailbox_result_ready(std::uint64_t* box, std::uint32_t tag,
                                 std::uint32_t size) noexcept {
  std::uint64_t* r = box + kMailboxResultOffset;
  // acquire: pairs with the server's system-scope release store of result word 0.
  if (mailbox_tag(std::atomic_ref<std::uint64_t>(r[0]).load(std::memory_order_acquire)) != tag) {
    return false;
  }
  const std::uint32_t words = mailbox_payload_words(size);
  for (std::uint32_t i = 0; i < words; ++i) {
    // relaxed: ordered by word 0's acquire; the tag is checked all the same (a server that
    // broke the order would show here as a result never ready, not as wrong data).
    if (mailbox_tag(std::atomic_ref<std::uint64_t>(r[1 + i]).load(std::memory_order_relaxed)) !=
        tag) {
      return false;
    }
  }
  return true;
}
/// The collector, after mailbox_result_ready: the status, and the results into `out`.
inline TaskStatus mailbox_read_result(std::uint64_t* box, std::uint32_t size,
                                      unsigned char* out) noexcept {
  std::uint64_t* r = box + kMailboxResultOffset;
  const std::uint32_t words = mailbox_payload_words(size);
  for (std::uint32_t i = 0; i < words; ++i) {
    // relaxed: see mailbox_result_ready.
    const std::uint32_t data =
        mailbox_data(std::atomic_ref<std::uint64_t>(r[1 + i]).load(std::memory_order_relaxed));
    std::memcpy(out + 4 * i, &data, std::min<std::uint32_t>(4, size - 4 * i));
  }
  return static_cast<TaskStatus>(
      mailbox_data(std::atomic_ref<std::uint64_t>(r[0]).load(std::memory_order_relaxed)));
}

}  // namespace weft::gpu::detail
