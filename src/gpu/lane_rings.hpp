// The rings of one scheduler lane's blocks, as the lane sees them: which slot of each ring to
// load and collect next, the tasks in flight, and lists of blocks by how many tasks they hold.
// Only the lane's own thread touches it; the slots' state words are its only contact with the
// blocks (detail/slot.hpp: IDLE -> READY by the lane, READY -> FINISHED by the block,
// FINISHED -> IDLE by the lane; EXIT at shutdown).
//
// Loading: a task goes to an idle block on an idle unit (an SM with nothing in flight: blocks
// that share an SM share its cores), then to an idle block on a busy unit, then to the block
// with the fewest tasks in flight; so a batch spreads over SMs first, then over blocks, and
// only then queues behind another task in a ring. A lane's standby block (its first) is
// picked before any other while it and its unit are idle. Collecting: slots are collected in
// ring order, as the block runs them.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "gpu/outbox.hpp"
#include "gpu/record_buffer.hpp"
#include "gpu/watchdog.hpp"
#include "weft/gpu/detail/slot.hpp"

namespace weft::gpu::detail {

// The per-task helpers below run for every task a lane loads or collects; they are forced
// inline into load() and collect() (one call each per round), since a call per task was a
// measurable share of a lane's cost.
#define WEFT_LANE_INLINE [[gnu::always_inline]] inline

class LaneRings {
 public:
  using Clock = std::chrono::steady_clock;

  struct Options {
    std::size_t payload_capacity = 16;
    // The first block is a standby block: picked first while idle, never rung (it never
    // sleeps in deep idle).
    bool standby = false;
    // Ring the doorbell after loading a block idle at least this long (it may be in deep
    // idle); 0: after every load.
    std::chrono::nanoseconds ring_after{0};
    // Where every block's counts of loaded and collected tasks start (tests: near 2^32).
    std::uint32_t count_origin = 0;
  };

  /// Blocks [first, first + count) of `layout`.
  LaneRings(const RingLayout& layout, std::size_t first, std::size_t count, const Options& options,
            Watchdog& watchdog);

  [[nodiscard]] std::size_t first_block() const noexcept { return first_; }
  [[nodiscard]] std::size_t num_blocks() const noexcept { return blocks_.size(); }
  /// Free slots of the blocks that can take a task (no lost slot, ring not full).
  [[nodiscard]] std::size_t free_capacity() const noexcept { return free_capacity_; }
  /// Blocks that can take a task.
  [[nodiscard]] std::size_t listed() const noexcept { return listed_; }
  /// Units (SMs) of the lane's blocks.
  [[nodiscard]] std::size_t num_units() const noexcept { return unit_load_.size(); }
  /// Blocks of the lane's largest unit.
  [[nodiscard]] std::size_t blocks_per_unit() const noexcept { return blocks_per_unit_; }
  /// Units with nothing in flight in any of their blocks.
  [[nodiscard]] std::size_t idle_units() const noexcept { return idle_units_; }
  /// Blocks with nothing in flight (on idle units or not).
  [[nodiscard]] std::size_t idle_blocks() const noexcept {
    return level_size_[0] + level_size_[crowded_];
  }

  /// Which unit each block is on (`units[b]` for block first_block() + b; equal ids: one
  /// unit). Only while nothing is in flight. Until it is called every block is a unit of its
  /// own.
  void set_units(const std::uint32_t* units);
  /// A paused pool's blocks start again at slot 0 of their rings: only while nothing is in
  /// flight.
  void restart_rings();
  /// Blocks with tasks in flight.
  [[nodiscard]] std::size_t active_blocks() const noexcept { return active_.size(); }
  /// Tasks in flight not yet delivered (lost ones are delivered).
  [[nodiscard]] std::size_t unresolved() const noexcept { return unresolved_; }
  /// Slots whose task the watchdog gave up on and whose block has not finished it.
  [[nodiscard]] std::size_t lost_slots() const noexcept;

  /// Writes the entries of `batch` (of InputQueue's layout) into slots and publishes them
  /// (READY). With `whole_rings` (a backlog: every free slot gets a task anyway) each block
  /// picked gets as many entries as its ring has room for, in consecutive slots. The batch
  /// must fit free_capacity().
  void load(const RecordBuffer& batch, Clock::time_point now, bool whole_rings);
  /// Whether a block loaded since the last call may be in deep idle (the doorbell is due).
  bool take_doorbell() noexcept;

  /// Stages the tasks whose slots finished, and (with a watchdog) those past the deadline.
  /// Returns how many ended.
  std::size_t collect(Outbox& outbox, Clock::time_point now);
  /// The blocks died: stages every task in flight as device_failed and forgets them. Returns
  /// how many.
  std::size_t fail_in_flight(Outbox& outbox);
  /// Shutdown, with nothing in flight but lost slots: sets every slot to EXIT.
  void write_exit();

 private:
  static constexpr std::uint32_t kNil = ~std::uint32_t{0};

  // A block's ring. Slots are loaded and collected in ring order, so two counts and two ring
  // indexes say everything: load_slot is the next to load, collect_slot the next to collect,
  // loaded - collected are in flight. The counts wrap after 2^32 tasks; only their difference
  // is used (the slots are not the counts modulo the depth, which would lose their place at
  // the wrap for a depth that does not divide 2^32).
  struct BlockMeta {
    std::uint32_t loaded = 0;
    std::uint32_t collected = 0;
    std::uint32_t load_slot = 0;
    std::uint32_t collect_slot = 0;
    std::uint32_t lost = 0;      // slots of the ring whose task the watchdog gave up on
    std::uint32_t level = kNil;  // the free-slot list it is in (see link), kNil: none
    std::uint32_t room = 0;      // its free slots, as counted in free_capacity_ while listed
    std::uint32_t unit = 0;      // its unit (an index into unit_load_)
    std::uint32_t prev = kNil, next = kNil;
    std::uint32_t active_at = kNil;  // index in active_, kNil: nothing in flight
    Clock::time_point idle_since{};  // when its ring last became empty (or the epoch)
    [[nodiscard]] std::uint32_t in_flight() const { return loaded - collected; }
  };

  WEFT_LANE_INLINE void unlink(std::uint32_t b);
  WEFT_LANE_INLINE void link(std::uint32_t b);
  WEFT_LANE_INLINE void relink(std::uint32_t b);
  WEFT_LANE_INLINE void unit_loaded(std::uint32_t b);
  WEFT_LANE_INLINE void unit_unloaded(std::uint32_t b, std::uint32_t tasks);
  void relink_unit(std::uint32_t unit, std::uint32_t from_level);
  void relink_all();
  [[nodiscard]] WEFT_LANE_INLINE std::uint32_t pick_block();
  WEFT_LANE_INLINE void activate(std::uint32_t b);
  WEFT_LANE_INLINE void deactivate(std::uint32_t b);
  [[nodiscard]] std::uint32_t next_slot(std::uint32_t j) const noexcept {
    return j + 1 == depth_ ? 0 : j + 1;
  }
  WEFT_LANE_INLINE std::uint32_t reserve_slot(std::uint32_t b, Clock::time_point now);
  WEFT_LANE_INLINE void write_slot(std::uint32_t b, std::uint32_t j, const unsigned char* entry);
  WEFT_LANE_INLINE void prefetch_slot(std::uint32_t b, std::uint32_t j, std::size_t bytes,
                                      bool for_write) const;
  WEFT_LANE_INLINE std::size_t collect_block(Outbox& outbox, std::uint32_t b,
                                             Clock::time_point now);
  std::size_t give_up_overdue(Outbox& outbox, BlockMeta& bm, std::uint32_t b,
                              Clock::time_point now);
  [[nodiscard]] std::uint32_t* states(std::uint32_t b) const noexcept {
    return layout_.states(first_ + b);
  }
  [[nodiscard]] unsigned char* slot(std::uint32_t b, std::uint32_t j) const noexcept {
    return layout_.slot(first_ + b, j);
  }
  [[nodiscard]] SlotMeta& meta(std::uint32_t b, std::uint32_t j) noexcept {
    return meta_[b * depth_ + j];
  }

  RingLayout layout_;
  std::uint32_t depth_;
  std::size_t first_;
  std::size_t room_;
  Options options_;
  Watchdog& watchdog_;
  std::vector<BlockMeta> blocks_;
  std::vector<SlotMeta> meta_;  // block * depth + slot
  // Loadable blocks by list (see link): heads_[d] starts list d; level_size_[d] counts it.
  std::vector<std::uint32_t> heads_;
  std::vector<std::uint32_t> level_size_;
  // The crowded list's index: idle blocks on a busy unit (after level 0, before level 1).
  std::uint32_t crowded_;
  // Per unit: tasks in flight in its blocks; its blocks, unit u's at
  // unit_blocks_[unit_first_[u] .. unit_first_[u + 1]).
  std::vector<std::uint32_t> unit_load_;
  std::vector<std::uint32_t> crowded_in_unit_;  // its blocks in the crowded list
  std::vector<std::uint32_t> unit_first_;
  std::vector<std::uint32_t> unit_blocks_;
  std::size_t idle_units_ = 0;
  std::size_t blocks_per_unit_ = 1;
  std::size_t listed_ = 0;
  std::size_t free_capacity_ = 0;
  std::vector<std::uint32_t> active_;  // blocks with tasks in flight
  std::size_t unresolved_ = 0;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> targets_;  // load: (block, slot) per entry
  std::vector<std::uint32_t> finishing_;  // collect: active blocks whose next slot ended
  bool doorbell_ = false;
};

}  // namespace weft::gpu::detail

#undef WEFT_LANE_INLINE
