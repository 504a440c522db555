#include "gpu/lone_task_mailbox.hpp"

#include <cstring>
#include <thread>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace weft::gpu::detail {

namespace {

// The lone-task rule's clock, read by every single push: the TSC where there is one (one
// instruction, no call; steady_clock can cost tens of nanoseconds a read on a virtual
// machine), else steady_clock's nanoseconds.
std::uint64_t lone_ticks() noexcept {
#if defined(__x86_64__)
  return __rdtsc();
#else
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
#endif
}

// Ticks of lone_ticks() per microsecond, measured once per process against steady_clock over
// about 200 us (the rule is a heuristic: a few per cent of error do not matter).
double lone_ticks_per_us() {
#if defined(__x86_64__)
  static const double per_us = [] {
    using Clock = std::chrono::steady_clock;
    const Clock::time_point t0 = Clock::now();
    const std::uint64_t c0 = __rdtsc();
    Clock::time_point t1 = t0;
    while (t1 - t0 < std::chrono::microseconds(200)) t1 = Clock::now();
    const std::uint64_t c1 = __rdtsc();
    const double us = std::chrono::duration<double, std::micro>(t1 - t0).count();
    return c1 > c0 ? static_cast<double>(c1 - c0) / us : 1000.0;
  }();
  return per_us;
#else
  return 1000.0;
#endif
}

// `gap` in lone_ticks(), clamped: a gap too long to count means "never lone".
std::uint64_t gap_ticks(std::chrono::nanoseconds gap) {
  const double ticks = static_cast<double>(gap.count()) / 1000.0 * lone_ticks_per_us();
  constexpr double kMax = 1e18;  // some 15 years of a 2 GHz TSC
  return ticks >= kMax ? static_cast<std::uint64_t>(kMax) : static_cast<std::uint64_t>(ticks);
}

}  // namespace

LoneTaskMailbox::LoneTaskMailbox(std::uint64_t* box, std::chrono::nanoseconds lone_gap,
                                 std::size_t capacity, Watchdog& watchdog)
    : box_(box),
      lone_gap_ticks_(box != nullptr ? gap_ticks(lone_gap) : 0),
      room_(payload_room(capacity)),
      watchdog_(watchdog) {
  // relaxed: before the lanes start.
  state_.store(box != nullptr ? kFree : kClosed, std::memory_order_relaxed);
}

bool LoneTaskMailbox::claim(const unsigned char* record) {
  RecordHead r;
  std::memcpy(&r, record, sizeof r);
  if (box_ == nullptr || r.payload_size > kMailboxPayloadMax) return false;
  thread_local std::uint64_t last_push = 0;
  const std::uint64_t stamp = lone_ticks();
  const bool lone = stamp - last_push >= lone_gap_ticks_;
  last_push = stamp;
  if (!lone) return false;
  std::uint32_t expected = kFree;
  // relaxed load: a filter. acquire CAS: pairs with the last collector's release store of FREE
  // (its reads of the result words and of meta_ happen before this rewrites them).
  return state_.load(rx) == kFree &&
         state_.compare_exchange_strong(expected, kFilling, std::memory_order_acquire, rx);
}

void LoneTaskMailbox::fill(const unsigned char* record, std::size_t out, std::uint32_t callback) {
  RecordHead r;
  std::memcpy(&r, record, sizeof r);
  // relaxed (these four): hints for collectors, who read them again after their acquire CAS;
  // published by the seq_cst store of IN_FLIGHT below.
  const std::uint32_t use = use_.load(rx) + 1;
  use_.store(use, rx);
  out_.store(callback != 0 ? kNoQueue : static_cast<std::uint32_t>(out), rx);
  size_.store(r.payload_size, rx);
  const Clock::time_point now = Clock::now();  // the watchdog's start
  loaded_.store(now.time_since_epoch().count(), rx);
  meta_ = SlotMeta::of_record(record, out, now);
  meta_.callback = callback;
  mailbox_write_request(box_, use, r.type, r.payload_size, record + kRecordPayloadOffset);
  tasks_.fetch_add(1, rx);  // relaxed: a statistic
  // seq_cst: a release for the fields above (collectors acquire by CAS), and pairs with the
  // lanes' and consumers' looks before they sleep (they count themselves waiting, then look at
  // this; the pusher then looks at the waiters).
  state_.store(kInFlight, std::memory_order_seq_cst);
}

bool LoneTaskMailbox::ready_for(std::size_t out) const noexcept {
  // relaxed (all): a hint; take checks again after its CAS.
  return box_ != nullptr && state_.load(rx) == kInFlight && out_.load(rx) == out &&
         mailbox_result_ready(box_, use_.load(rx), size_.load(rx));
}

bool LoneTaskMailbox::holds_task_for(std::size_t out) const noexcept {
  if (box_ == nullptr) return false;
  const std::uint32_t s = state_.load(std::memory_order_seq_cst);
  if (s != kInFlight && s != kCollecting) return false;
  // relaxed: a hint; a wake-up too many costs a futex call, never a lost task.
  return out == kAnyQueue || out_.load(rx) == out;
}

bool LoneTaskMailbox::held_longer(std::size_t out, Clock::time_point now,
                                  Clock::duration after) const noexcept {
  // relaxed: hints.
  if (box_ == nullptr || state_.load(rx) != kInFlight || out_.load(rx) != out) return false;
  return now - Clock::time_point{Clock::duration(loaded_.load(rx))} > after;
}

bool LoneTaskMailbox::busy() const noexcept {
  // relaxed: a hint for the lane's idling; the states it acts on are taken by CAS.
  const std::uint32_t s = state_.load(rx);
  return s == kInFlight || s == kCollecting || s == kLost;
}

// Takes the task if its result is back (and, unless `any`, it is for queue `out`): fills
// `record` and `m` and frees the mailbox. Returns whether it took it.
bool LoneTaskMailbox::take(std::size_t out, bool any, unsigned char* record, SlotMeta& m) {
  if (!any && !ready_for(out)) return false;
  std::uint32_t expected = kInFlight;
  // acquire: pairs with the pusher's seq_cst store of IN_FLIGHT (meta_ and the use are
  // visible).
  if (!state_.compare_exchange_strong(expected, kCollecting, std::memory_order_acquire, rx)) {
    return false;
  }
  m = meta_;
  // The hints above may have been of an earlier use: check the task this CAS took.
  // relaxed: written before the IN_FLIGHT this CAS acquired.
  if ((!any && (m.callback != 0 || m.out != out)) ||
      !mailbox_result_ready(box_, use_.load(rx), m.size)) {
    // release: nothing was written; the next collector acquires IN_FLIGHT again.
    state_.store(kInFlight, std::memory_order_release);
    return false;
  }
  finish_take(m, record);
  return true;
}

// The collector holding the mailbox (COLLECTING) with its task's result back: reads the
// result into `record` and frees the mailbox.
void LoneTaskMailbox::finish_take(const SlotMeta& m, unsigned char* record) {
  const RecordHead h{m.type, m.size, m.tag,
                     mailbox_read_result(box_, m.size, record + kRecordPayloadOffset)};
  std::memcpy(record, &h, sizeof h);
  // release: pairs with the next pusher's acquire CAS (this thread's reads of the result
  // happen before the next request overwrites it).
  state_.store(kFree, std::memory_order_release);
}

bool LoneTaskMailbox::take_for(std::size_t out, unsigned char* record) {
  SlotMeta m;
  if (box_ == nullptr || !take(out, false, record, m)) return false;
  RecordHead h;
  std::memcpy(&h, record, sizeof h);
  // relaxed: statistics.
  if (h.status != TaskStatus::ok) failed_.fetch_add(1, rx);
  taken_.fetch_add(1, rx);
  return true;
}

std::size_t LoneTaskMailbox::lane_round(Outbox& outbox, Clock::time_point now, bool now_or_never) {
  if (box_ == nullptr) return 0;
  // acquire: pairs with the releases of FREE/IN_FLIGHT/LOST (LOST is only stored by the lane;
  // the acquire matters for the use read below).
  const std::uint32_t s = state_.load(std::memory_order_acquire);
  if (s == kLost) {
    // relaxed: the use and size of the lost task, written before it went IN_FLIGHT.
    if (mailbox_result_ready(box_, use_.load(rx), size_.load(rx))) {
      watchdog_.reclaimed();
      state_.store(kFree, std::memory_order_release);  // release: as finish_take's
    }
    return 0;
  }
  if (s != kInFlight) return 0;
  const std::uint32_t use = use_.load(rx);  // relaxed: a hint
  if (!mailbox_result_ready(box_, use, size_.load(rx))) return time_out(outbox, now);
  // A consumer that waits for it takes it within a poll; give it the chance. Nobody but this
  // lane delivers a future's or callback's task. relaxed: a hint, as the use.
  if (!now_or_never && out_.load(rx) != kNoQueue) {
    if (seen_use_ != use) {
      seen_use_ = use;
      seen_ = now;
      return 0;
    }
    if (now - seen_ < kGrace) return 0;
  }
  alignas(16) unsigned char record[kRecordPayloadOffset + kMailboxPayloadMax + 8];
  SlotMeta m;
  if (!take(0, true, record, m)) return 0;  // a consumer took it meanwhile
  RecordHead h;
  std::memcpy(&h, record, sizeof h);
  outbox.stage(m, h.status, record + kRecordPayloadOffset);
  return 1;
}

// The task's result is not back: past the deadline, it is delivered as timed_out and the
// mailbox is LOST until the result comes back.
std::size_t LoneTaskMailbox::time_out(Outbox& outbox, Clock::time_point now) {
  // relaxed: a hint; checked again below after the CAS.
  if (!watchdog_.passed(Clock::time_point{Clock::duration(loaded_.load(rx))}, now)) return 0;
  std::uint32_t expected = kInFlight;
  // acquire: as in take.
  if (!state_.compare_exchange_strong(expected, kCollecting, std::memory_order_acquire, rx)) {
    return 0;
  }
  const SlotMeta m = meta_;
  if (!watchdog_.passed(m.loaded, now)) {
    state_.store(kInFlight, std::memory_order_release);  // release: as in take
    return 0;
  }
  if (mailbox_result_ready(box_, use_.load(rx), m.size)) {
    alignas(16) unsigned char record[kRecordPayloadOffset + kMailboxPayloadMax + 8];
    finish_take(m, record);  // it ended after all, between the two looks
    RecordHead h;
    std::memcpy(&h, record, sizeof h);
    outbox.stage(m, h.status, record + kRecordPayloadOffset);
    return 1;
  }
  outbox.stage(m, TaskStatus::timed_out, nullptr);
  watchdog_.gave_up();
  // release: only the lane moves it on from LOST.
  state_.store(kLost, std::memory_order_release);
  return 1;
}

std::size_t LoneTaskMailbox::fail(Outbox& outbox) {
  if (box_ == nullptr) return 0;
  for (;;) {
    // acquire: as in lane_round.
    std::uint32_t s = state_.load(std::memory_order_acquire);
    if (s == kCollecting) {  // a consumer is reading it; it frees it in a moment
      std::this_thread::yield();
      continue;
    }
    if (s == kInFlight) {
      // acquire: as in take.
      if (!state_.compare_exchange_strong(s, kCollecting, std::memory_order_acquire, rx)) {
        continue;
      }
      outbox.stage(meta_, TaskStatus::device_failed, nullptr);
      state_.store(kClosed, std::memory_order_release);  // release: terminal
      return 1;
    }
    // FREE, LOST (the block that ran it is gone) or CLOSED already.
    if (s == kClosed || state_.compare_exchange_strong(s, kClosed, rx, rx)) return 0;
  }
}

bool LoneTaskMailbox::close_for_shutdown() {
  if (box_ == nullptr) return false;
  // relaxed: the lanes have been joined.
  const bool lost = state_.load(rx) == kLost;
  // The server returns at the next use's EXIT (after the timed-out task, if it ever ends).
  mailbox_write_exit(box_, use_.load(rx) + 1);
  return lost;
}

bool LoneTaskMailbox::close_for_pause() {
  if (box_ == nullptr) return true;
  std::uint32_t expected = kFree;
  // acquire: pairs with the last collector's release store of FREE (the result was read).
  if (!state_.compare_exchange_strong(expected, kClosed, std::memory_order_acquire, rx)) {
    return false;
  }
  const std::uint32_t use = use_.load(rx) + 1;  // relaxed: only pushers holding FILLING write it
  use_.store(use, rx);
  mailbox_write_exit(box_, use);
  return true;
}

void LoneTaskMailbox::reopen_after_pause() {
  if (box_ == nullptr) return;
  if (use_.load(rx) == ~std::uint32_t{0}) use_.store(0, rx);  // relaxed: nobody pushes to it
  // release: the use above is visible to the pusher whose acquire CAS takes FREE.
  state_.store(kFree, std::memory_order_release);
}

}  // namespace weft::gpu::detail
