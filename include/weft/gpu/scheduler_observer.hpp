// weft/gpu/scheduler_observer.hpp - hooks for watching the GPU pool's scheduler at work
// (profilers, tracers, tests). A pool without one (PoolOptions::observer null, the default)
// pays one predictable branch per lane round and nothing per task.
//
//   struct Rounds final : weft::gpu::SchedulerObserver {
//     std::atomic<std::uint64_t> ended{0};
//     void on_round(const LaneRound& r) noexcept override { ended += r.ended; }
//   };
//   Rounds rounds;
//   weft::gpu::Pool<Tasks> pool({.observer = &rounds});  // must outlive the pool
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace weft::gpu {

/// Called by the pool's scheduler threads, several at once: implementations must be
/// thread-safe, short, must not throw, and must not call into the pool.
class SchedulerObserver {
 public:
  /// The parts of a scheduler lane's round, in the order they run.
  enum class Phase : std::uint8_t {
    collect,  // finished slots (and the lone-task mailbox) read, records staged
    deliver,  // staged records handed to output queues, futures and callbacks
    take,     // tasks taken from the input queue
    load,     // tasks written into ring slots, blocks woken
    idle,     // spinning, napping or sleeping after a quiet round
  };
  static constexpr std::size_t kPhases = 5;

  /// One round of one lane.
  struct LaneRound {
    std::size_t lane = 0;           // which scheduler lane
    std::size_t ended = 0;          // tasks that ended (finished, timed out) and were staged
    std::size_t loaded = 0;         // tasks written into slots
    std::size_t active_blocks = 0;  // blocks with tasks in flight when the round began
    std::array<std::uint64_t, kPhases> phase_ns{};  // steady-clock time spent in each phase
  };

  virtual ~SchedulerObserver() = default;
  /// After every round of every lane.
  virtual void on_round(const LaneRound& round) noexcept = 0;
  /// A lane found nothing to do for its idle spin and goes to sleep until a push needs it.
  virtual void on_lane_sleep(std::size_t lane) noexcept { (void)lane; }
};

}  // namespace weft::gpu
