#include "gpu/lane_rings.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <utility>
#include <vector>

namespace weft::gpu::detail {

namespace {

constexpr std::uint32_t word(SlotState s) noexcept { return static_cast<std::uint32_t>(s); }

std::atomic_ref<std::uint32_t> state_word(std::uint32_t* states, std::uint32_t j) noexcept {
  return std::atomic_ref<std::uint32_t>(states[j]);
}

}  // namespace

LaneRings::LaneRings(const RingLayout& layout, std::size_t first, std::size_t count,
                     const Options& options, Watchdog& watchdog)
    : layout_(layout),
      depth_(static_cast<std::uint32_t>(layout.depth)),
      first_(first),
      room_(payload_room(options.payload_capacity)),
      options_(options),
      watchdog_(watchdog),
      blocks_(count),  // idle_since: the epoch, long ago: the first load rings
      meta_(count * layout.depth),
      heads_(layout.depth + 1, kNil),
      level_size_(layout.depth + 1, 0),
      crowded_(static_cast<std::uint32_t>(layout.depth)) {
  for (BlockMeta& bm : blocks_) bm.loaded = bm.collected = options.count_origin;
  active_.reserve(count);
  finishing_.reserve(count);
  std::vector<std::uint32_t> own(count);
  for (std::size_t b = 0; b < count; ++b) own[b] = static_cast<std::uint32_t>(b);
  set_units(own.data());
}

void LaneRings::set_units(const std::uint32_t* units) {
  // Local unit indices in ascending order of the units' ids.
  std::vector<std::pair<std::uint32_t, std::uint32_t>> by_id;  // (id, block)
  by_id.reserve(blocks_.size());
  for (std::uint32_t b = 0; b < blocks_.size(); ++b) by_id.emplace_back(units[b], b);
  std::stable_sort(by_id.begin(), by_id.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  unit_first_.clear();
  unit_blocks_.clear();
  for (std::size_t i = 0; i < by_id.size(); ++i) {
    if (i == 0 || by_id[i].first != by_id[i - 1].first) {
      unit_first_.push_back(static_cast<std::uint32_t>(unit_blocks_.size()));
      blocks_per_unit_ = 1;
      for (std::size_t u = 0; u + 1 < unit_first_.size(); ++u) {
        blocks_per_unit_ =
            std::max<std::size_t>(blocks_per_unit_, unit_first_[u + 1] - unit_first_[u]);
      }
    }
    const std::uint32_t b = by_id[i].second;
    blocks_[b].unit = static_cast<std::uint32_t>(unit_first_.size() - 1);
    unit_blocks_.push_back(b);
  }
  unit_first_.push_back(static_cast<std::uint32_t>(unit_blocks_.size()));
  blocks_per_unit_ = 1;
  for (std::size_t u = 0; u + 1 < unit_first_.size(); ++u) {
    blocks_per_unit_ = std::max<std::size_t>(blocks_per_unit_, unit_first_[u + 1] - unit_first_[u]);
  }
  unit_load_.assign(unit_first_.size() - 1, 0);
  crowded_in_unit_.assign(unit_load_.size(), 0);
  idle_units_ = unit_load_.size();
  relink_all();
}

void LaneRings::restart_rings() {
  for (BlockMeta& bm : blocks_) bm.load_slot = bm.collect_slot = 0;
}

std::size_t LaneRings::lost_slots() const noexcept {
  std::size_t lost = 0;
  for (const BlockMeta& b : blocks_) lost += b.lost;
  return lost;
}

// ---- free-slot lists and the active set ----

void LaneRings::unlink(std::uint32_t b) {
  BlockMeta& m = blocks_[b];
  if (m.level == kNil) return;
  if (m.prev != kNil) {
    blocks_[m.prev].next = m.next;
  } else {
    heads_[m.level] = m.next;
  }
  if (m.next != kNil) blocks_[m.next].prev = m.prev;
  if (m.level == crowded_) --crowded_in_unit_[m.unit];
  free_capacity_ -= m.room;
  --level_size_[m.level];
  --listed_;
  m.level = m.prev = m.next = kNil;
}

// Puts b at the front of its list, if it can take a task: the list of its level (tasks in
// flight), except that an idle block on a busy unit is in the crowded list. (Level 0 may
// still hold blocks whose unit has become busy since: pick_block moves them when it meets
// them, so that a unit's first task costs no pass over its blocks.)
void LaneRings::link(std::uint32_t b) {
  BlockMeta& m = blocks_[b];
  const std::uint32_t in_flight = m.in_flight();
  if (m.lost != 0 || in_flight >= depth_) return;
  const std::uint32_t list = in_flight == 0 && unit_load_[m.unit] != 0 ? crowded_ : in_flight;
  m.level = list;
  if (list == crowded_) ++crowded_in_unit_[m.unit];
  m.room = depth_ - in_flight;
  m.prev = kNil;
  m.next = heads_[list];
  if (m.next != kNil) blocks_[m.next].prev = b;
  heads_[list] = b;
  free_capacity_ += m.room;
  ++level_size_[list];
  ++listed_;
}

// Every block again (set_units): linked from the last so that the lowest index is on top of
// its list (light load goes to the same few blocks, which keep polling fast).
void LaneRings::relink_all() {
  for (BlockMeta& m : blocks_) m.level = m.prev = m.next = kNil;
  std::fill(heads_.begin(), heads_.end(), kNil);
  std::fill(crowded_in_unit_.begin(), crowded_in_unit_.end(), 0);
  std::fill(level_size_.begin(), level_size_.end(), 0);
  listed_ = 0;
  free_capacity_ = 0;
  for (std::size_t b = blocks_.size(); b-- > 0;) link(static_cast<std::uint32_t>(b));
}

// The blocks of `unit` in list `from_level` go to the list they belong in now.
void LaneRings::relink_unit(std::uint32_t unit, std::uint32_t from_level) {
  for (std::uint32_t i = unit_first_[unit]; i < unit_first_[unit + 1]; ++i) {
    const std::uint32_t c = unit_blocks_[i];
    if (blocks_[c].level == from_level) relink(c);
  }
}

// A task went into block b (its unit's idle blocks leave level 0 lazily: see link).
void LaneRings::unit_loaded(std::uint32_t b) {
  if (unit_load_[blocks_[b].unit]++ == 0) --idle_units_;
}

// `tasks` of block b's slots were collected: once its unit has nothing in flight, the unit's
// crowded blocks go back to level 0.
void LaneRings::unit_unloaded(std::uint32_t b, std::uint32_t tasks) {
  const std::uint32_t u = blocks_[b].unit;
  unit_load_[u] -= tasks;
  if (unit_load_[u] == 0) {
    ++idle_units_;
    if (crowded_in_unit_[u] != 0) relink_unit(u, crowded_);
  }
}

void LaneRings::relink(std::uint32_t b) {
  unlink(b);
  link(b);
}

std::uint32_t LaneRings::pick_block() {
  // The standby block polls its ring all the time: a task there starts first.
  if (options_.standby && blocks_[0].level == 0 && unit_load_[blocks_[0].unit] == 0) return 0;
  for (std::uint32_t b = heads_[0]; b != kNil; b = heads_[0]) {
    if (unit_load_[blocks_[b].unit] == 0) return b;
    relink(b);  // its unit is busy: to the crowded list
  }
  if (heads_[crowded_] != kNil) return heads_[crowded_];
  for (std::uint32_t d = 1; d < depth_; ++d) {
    if (heads_[d] != kNil) return heads_[d];
  }
  return kNil;  // unreachable while free_capacity_ > 0
}

void LaneRings::activate(std::uint32_t b) {
  BlockMeta& m = blocks_[b];
  if (m.active_at != kNil) return;
  m.active_at = static_cast<std::uint32_t>(active_.size());
  active_.push_back(b);
}

void LaneRings::deactivate(std::uint32_t b) {
  BlockMeta& m = blocks_[b];
  const std::uint32_t at = m.active_at;
  const std::uint32_t last = active_.back();
  active_[at] = last;
  blocks_[last].active_at = at;
  active_.pop_back();
  m.active_at = kNil;
}

// ---- loading ----

// Asks for the cache lines of slot j of block b (header and `bytes` of payload). The lane's
// slot reads and writes are cache misses (the GPU wrote the lines over PCIe, which invalidated
// the host's copies); asked for together, the misses overlap instead of each stalling the
// lane in turn (docs/decisions/003-gpu-ring-loading.md).
void LaneRings::prefetch_slot(std::uint32_t b, std::uint32_t j, std::size_t bytes,
                              bool for_write) const {
  const unsigned char* p = slot(b, j);
  const auto first = reinterpret_cast<std::uintptr_t>(p) & ~std::uintptr_t{63};
  const auto end = reinterpret_cast<std::uintptr_t>(p) + kSlotHeaderBytes + bytes;
  for (std::uintptr_t a = first; a < end; a += 64) {
    if (for_write) {
      __builtin_prefetch(reinterpret_cast<const void*>(a), 1, 3);
    } else {
      __builtin_prefetch(reinterpret_cast<const void*>(a), 0, 3);
    }
  }
}

// Two passes: the first picks every task's slot (bookkeeping only) and asks for the slots'
// lines, the second writes them and publishes READY. With whole rings, the lane's writes go to
// adjacent lines and one control line, and the block finds them in one run.
void LaneRings::load(const RecordBuffer& batch, Clock::time_point now, bool whole_rings) {
  targets_.clear();
  const std::size_t n = batch.size();
  for (std::size_t i = 0; i < n;) {
    const std::uint32_t b = pick_block();
    do {
      const std::uint32_t j = reserve_slot(b, now);
      EntryHead e;
      std::memcpy(&e, batch.at(i), sizeof e);
      prefetch_slot(b, j, e.payload_size, true);
      targets_.emplace_back(b, j);
      ++i;
      // level kNil: the ring is full (or holds a lost task), no longer listed.
    } while (whole_rings && i < n && blocks_[b].level != kNil);
  }
  for (std::size_t i = 0; i < n; ++i) {
    const auto [b, j] = targets_[i];
    meta(b, j) = SlotMeta::of_entry(batch.at(i), now);
    write_slot(b, j, batch.at(i));
  }
}

bool LaneRings::take_doorbell() noexcept {
  const bool due = doorbell_;
  doorbell_ = false;
  return due;
}

// Takes block b's next slot for a task: the bookkeeping, before the slot is written.
std::uint32_t LaneRings::reserve_slot(std::uint32_t b, Clock::time_point now) {
  BlockMeta& bm = blocks_[b];
  const std::uint32_t j = bm.load_slot;
  // The standby block never sleeps in deep idle: no doorbell for it (a ring would wake every
  // deep-idle block of its GPU for nothing).
  const bool standby = options_.standby && b == 0;
  if (!standby && bm.in_flight() == 0 && now - bm.idle_since >= options_.ring_after) {
    doorbell_ = true;
  }
  ++bm.loaded;
  bm.load_slot = next_slot(bm.load_slot);
  ++unresolved_;
  unit_loaded(b);
  relink(b);
  activate(b);
  return j;
}

// The slot's memory: header and payload, then READY.
void LaneRings::write_slot(std::uint32_t b, std::uint32_t j, const unsigned char* entry) {
  EntryHead e;
  std::memcpy(&e, entry, sizeof e);
  unsigned char* s = slot(b, j);
  auto* h = reinterpret_cast<SlotHeader*>(s);
  h->type = e.type;
  h->payload_size = e.payload_size;
  h->status = 0;
  h->graph_task = (e.callback & kGraphTaskFlag) != 0 ? (e.callback & ~kGraphTaskFlag) + 1 : 0;
  copy_payload(s + kSlotHeaderBytes, entry + kEntryPayloadOffset, room_, e.payload_size);
  // release: type, size and payload are visible to the block's acquire load of READY.
  state_word(states(b), j).store(word(SlotState::ready), std::memory_order_release);
}

// ---- collecting ----

std::size_t LaneRings::collect(Outbox& outbox, Clock::time_point now) {
  // The control lines a block wrote are cache misses (the GPU's write over PCIe invalidated
  // them): ask for all of them first, so that the misses overlap instead of queueing. Likewise
  // the first slot each block may have finished (header, status and results).
  for (const std::uint32_t b : active_) {
    __builtin_prefetch(states(b), 0, 0);
    const std::uint32_t j = blocks_[b].collect_slot;
    prefetch_slot(b, j, meta(b, j).size, false);
  }
  // Then find the blocks whose next slot ended, in a loop with nothing else in it, so that its
  // loads of the control lines overlap with each other (found inside the collecting loop,
  // whose body is long, they were taken one after another:
  // docs/decisions/003-gpu-ring-loading.md). With a watchdog every active block is visited,
  // for its deadlines.
  finishing_.clear();
  const bool watchdog = watchdog_.on();
  for (const std::uint32_t b : active_) {
    const std::uint32_t j = blocks_[b].collect_slot;
    // relaxed: a filter only; collect_block loads the state again with acquire.
    if (watchdog ||
        state_word(states(b), j).load(std::memory_order_relaxed) == word(SlotState::finished)) {
      finishing_.push_back(b);
    }
  }
  std::size_t ended = 0;
  for (const std::uint32_t b : finishing_) {
    ended += collect_block(outbox, b, now);
    BlockMeta& bm = blocks_[b];
    if (bm.in_flight() == 0) {
      bm.idle_since = now;
      deactivate(b);  // moves the last active block to b's place in active_
    }
  }
  return ended;
}

std::size_t LaneRings::collect_block(Outbox& outbox, std::uint32_t b, Clock::time_point now) {
  BlockMeta& bm = blocks_[b];
  std::size_t ended = 0;
  std::uint32_t freed = 0;
  while (bm.collected != bm.loaded) {
    const std::uint32_t j = bm.collect_slot;
    // acquire: pairs with the block's release store of FINISHED; status and results are
    // visible.
    if (state_word(states(b), j).load(std::memory_order_acquire) != word(SlotState::finished)) {
      break;
    }
    SlotMeta& m = meta(b, j);
    if (m.lost) {
      // Delivered as timed_out already: the late result is dropped (exactly once).
      --bm.lost;
      watchdog_.reclaimed();
    } else {
      const unsigned char* s = slot(b, j);
      outbox.stage(m, static_cast<TaskStatus>(reinterpret_cast<const SlotHeader*>(s)->status),
                   s + kSlotHeaderBytes);
      --unresolved_;
      ++ended;
    }
    // relaxed: the block does not act on IDLE; the next READY publishes the next task.
    state_word(states(b), j).store(word(SlotState::idle), std::memory_order_relaxed);
    ++bm.collected;
    bm.collect_slot = next_slot(j);
    ++freed;
  }
  const std::size_t overdue = give_up_overdue(outbox, bm, b, now);
  ended += overdue;
  if (freed > 0) unit_unloaded(b, freed);
  if (freed > 0 || overdue > 0) relink(b);
  return ended;
}

// The watchdog's part of a collection: tasks of block b past the deadline are delivered as
// timed_out now, and the ring stays out of use until the block finishes them.
std::size_t LaneRings::give_up_overdue(Outbox& outbox, BlockMeta& bm, std::uint32_t b,
                                       Clock::time_point now) {
  if (!watchdog_.on()) return 0;
  std::size_t ended = 0;
  // Loaded in ring order, so the deadlines pass in ring order too.
  for (std::uint32_t p = bm.collected, j = bm.collect_slot; p != bm.loaded; ++p, j = next_slot(j)) {
    SlotMeta& m = meta(b, j);
    if (m.lost) continue;
    if (!watchdog_.passed(m.loaded, now)) break;
    outbox.stage(m, TaskStatus::timed_out, nullptr);
    m.lost = true;
    ++bm.lost;
    --unresolved_;
    ++ended;
    watchdog_.gave_up();
  }
  return ended;
}

std::size_t LaneRings::fail_in_flight(Outbox& outbox) {
  std::size_t n = 0;
  for (const std::uint32_t b : active_) {
    BlockMeta& bm = blocks_[b];
    for (std::uint32_t p = bm.collected, j = bm.collect_slot; p != bm.loaded;
         ++p, j = next_slot(j)) {
      const SlotMeta& m = meta(b, j);
      if (m.lost) continue;
      outbox.stage(m, TaskStatus::device_failed, nullptr);
      ++n;
    }
    bm.collected = bm.loaded;
    bm.collect_slot = bm.load_slot;
    bm.lost = 0;
    bm.active_at = kNil;
  }
  active_.clear();
  unresolved_ = 0;
  std::fill(unit_load_.begin(), unit_load_.end(), 0);
  idle_units_ = unit_load_.size();
  relink_all();
  return n;
}

void LaneRings::write_exit() {
  for (std::uint32_t b = 0; b < blocks_.size(); ++b) {
    for (std::uint32_t j = 0; j < depth_; ++j) {
      std::atomic_ref<std::uint32_t> s = state_word(states(b), j);
      std::uint32_t expected = s.load(std::memory_order_relaxed);
      // release: nothing to publish but the state itself; the block acquires it. A lost slot's
      // block may be finishing right now: the CAS loop makes sure EXIT is the last word (the
      // block's own FINISHED store is a CAS from READY when a watchdog is on, so it sees EXIT
      // and returns).
      while (!s.compare_exchange_weak(expected, word(SlotState::exit), std::memory_order_release,
                                      std::memory_order_relaxed)) {
      }
    }
  }
}

}  // namespace weft::gpu::detail
