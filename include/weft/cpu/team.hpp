// weft/cpu/team.hpp - pipeline parallelism: a team of participants that signal each other
// point to point.
//
//   // IS-like critical region in blocks: participant r handles block b after r-1 did.
//   weft::cpu::run_team(ex, ex.num_workers(), [&](weft::cpu::Team& t) {
//     for (int b = 0; b < blocks; ++b) {
//       t.wait_prev();          // rank r-1 finished block b
//       add_my_part(t.rank(), b);
//       t.signal_next();        // rank r+1 may take block b
//     }
//   });
//
// Signals are counting: each signal_next() releases exactly one wait_prev() of the next rank,
// so a pipeline over many blocks needs no other synchronisation. A signal touches one cache
// line that only its receiver polls, instead of a flag that every participant polls.
// Iteration signals (iter_wait/iter_post) do the same over a statically partitioned loop: the
// team finds the participant that owns iteration i, and signals only cross part boundaries.
//
// All participants run at once, as tasks that idle workers take (a calling worker is rank 0
// itself; a caller outside the pool sleeps until the team is done). Waiting participants
// spin, then sleep; they never run other tasks (a participant nested under another could wait
// for it forever). A team therefore needs its size in workers that are free or become free.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "weft/cpu/executor.hpp"
#include "weft/cpu/partition.hpp"

namespace weft::cpu {

/// Number of independent signal tags per participant: a participant may wait on several
/// orders at once (in an LU wavefront, one tag orders row i after i-1, another holds i back until
/// the previous sweep has read it), each counted apart.
inline constexpr int kTeamTags = 4;

class Team {
 public:
  Team(std::size_t size, std::int64_t first, std::int64_t last);
  Team(const Team&) = delete;
  Team& operator=(const Team&) = delete;

  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  /// The calling participant's rank. Only valid inside run_team's body.
  [[nodiscard]] std::size_t rank() const noexcept;

  /// Waits for one signal from rank-1 (rank 0 returns at once).
  void wait_prev(int tag = 0);
  /// Signals rank+1 (the last rank does nothing).
  void signal_next(int tag = 0);
  /// Waits for one signal sent to this rank with `tag` by signal_to.
  void wait_signal(int tag = 0);
  /// Sends one signal to `rank` with `tag`. Throws weft::InvalidArgument for a bad rank or tag.
  void signal_to(std::size_t rank, int tag = 0);

  // ---- iteration signals over [first, last), statically partitioned over the team ----
  [[nodiscard]] std::int64_t my_begin() const noexcept;
  [[nodiscard]] std::int64_t my_end() const noexcept;
  [[nodiscard]] std::size_t owner_of(std::int64_t i) const noexcept;
  /// Waits until iteration i has been posted, when i belongs to another participant; returns at
  /// once when i is this participant's own (it runs its iterations in order) or outside the loop.
  void iter_wait(std::int64_t i, int tag = 0);
  /// Posts iteration i to the participant owning it, when that is another participant.
  void iter_post(std::int64_t i, int tag = 0);

  /// All participants meet here.
  void barrier();

  /// Waits of any team in this process (wait_prev, iter_wait, wait_signal, barrier) whose sleep
  /// ended by its 50 ms limit rather than a wake-up (a diagnostic: with partners that keep each
  /// other waiting less than that, a timeout is a lost wake-up).
  static std::uint64_t sleep_timeouts() noexcept;

  // For run_team.
  void set_rank_of_this_thread(std::size_t r) noexcept;

 private:
  struct alignas(64) Channel {
    std::atomic<std::uint32_t> posted{0};    // written by senders, polled by the receiver
    std::atomic<std::uint32_t> sleeping{0};  // 1 while the receiver sleeps (or is about to)
    std::uint32_t consumed = 0;              // receiver only
  };
  // A central-counter barrier whose sleep is bounded like every sleep in the executor
  // (std::barrier's waits are not).
  class Barrier {
   public:
    explicit Barrier(std::uint32_t size) noexcept : size_(size) {}
    void arrive_and_wait() noexcept;

   private:
    std::uint32_t size_;
    std::atomic<std::uint32_t> arrived_{0};
    std::atomic<std::uint32_t> generation_{0};
    std::atomic<std::uint32_t> sleepers_{0};
  };
  Channel& channel(std::size_t rank, int tag);
  void wait_on(Channel& c);

  std::size_t size_;
  StaticPartition part_;
  std::unique_ptr<Channel[]> channels_;  // size_ * kTeamTags
  Barrier barrier_;
};

/// Runs body(team) on `size` participants at once and returns when all have returned.
/// Throws weft::InvalidArgument when size is 0 or larger than the executor's worker count, and
/// rethrows the first exception of a participant (the others must not then wait for it
/// forever: a throwing participant should be the last to need its neighbours).
void run_team_erased(Executor& ex, std::size_t size, std::int64_t first, std::int64_t last,
                     void (*body)(void*, Team&), void* ctx);

template <class Body>
void run_team(Executor& ex, std::size_t size, Body&& body) {
  run_team_erased(
      ex, size, 0, 0, [](void* c, Team& t) { (*static_cast<Body*>(c))(t); },
      static_cast<void*>(&body));
}

/// As run_team, with the loop [first, last) partitioned statically over the team for
/// iter_wait/iter_post and my_begin/my_end.
template <class Body>
void run_team(Executor& ex, std::size_t size, std::int64_t first, std::int64_t last, Body&& body) {
  run_team_erased(
      ex, size, first, last, [](void* c, Team& t) { (*static_cast<Body*>(c))(t); },
      static_cast<void*>(&body));
}

}  // namespace weft::cpu
