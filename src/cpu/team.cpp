#include "weft/cpu/team.hpp"

#include "weft/cpu/detail/cpu_relax.hpp"
#include "weft/cpu/detail/futex.hpp"

#include <exception>
#include <string>
#include <thread>

#include "weft/cpu/task_group.hpp"

namespace weft::cpu {

namespace {
thread_local std::size_t tl_team_rank = 0;

// relaxed: a statistic, read after the fact.
std::atomic<std::uint64_t> g_team_timeouts{0};
void count_team_timeout() noexcept { g_team_timeouts.fetch_add(1, std::memory_order_relaxed); }

// The spin before a participant sleeps: 1024 pauses, then 1024 yields. Returns whether `done`
// became true meanwhile.
template <class Done>
bool spin_until(Done done) {
  for (int spin = 0; spin < 2048; ++spin) {
    if (done()) return true;
    if (spin < 1024) {
      detail::cpu_relax();
    } else {
      std::this_thread::yield();
    }
  }
  return false;
}
}  // namespace

Team::Team(std::size_t size, std::int64_t first, std::int64_t last)
    : size_(size),
      part_(first, last, static_cast<std::int64_t>(size)),
      channels_(std::make_unique<Channel[]>(size * kTeamTags)),
      barrier_(static_cast<std::uint32_t>(size)) {}

std::size_t Team::rank() const noexcept { return tl_team_rank; }

std::uint64_t Team::sleep_timeouts() noexcept {
  return g_team_timeouts.load(std::memory_order_relaxed);
}
void Team::set_rank_of_this_thread(std::size_t r) noexcept { tl_team_rank = r; }

Team::Channel& Team::channel(std::size_t rank, int tag) {
  if (rank >= size_) {
    throw InvalidArgument("weft::cpu::Team: rank " + std::to_string(rank) +
                          " is outside the team of " + std::to_string(size_));
  }
  if (tag < 0 || tag >= kTeamTags) {
    throw InvalidArgument("weft::cpu::Team: tag " + std::to_string(tag) + " is outside [0, " +
                          std::to_string(kTeamTags) + ")");
  }
  return channels_[rank * kTeamTags + static_cast<std::size_t>(tag)];
}

void Team::wait_on(Channel& c) {
  const std::uint32_t want = c.consumed;
  // acquire: pairs with the release fetch_add in signal_to(): the sender's writes (the block
  // it produced) are visible once we see its signal.
  if (spin_until([&] { return c.posted.load(std::memory_order_acquire) != want; })) {
    ++c.consumed;
    return;
  }
  for (;;) {
    // seq_cst, with signal_to()'s increment and load: either the sender sees our flag and
    // wakes us, or we see its post here (the store-load pairs of a Dekker handshake). Also an
    // acquire, as the loads above.
    c.sleeping.store(1, std::memory_order_seq_cst);
    if (c.posted.load(std::memory_order_seq_cst) != want) break;
    // Bounded: then re-check.
    if (detail::futex_wait_for(c.posted, want, detail::kParkLimit)) count_team_timeout();
  }
  c.sleeping.store(0, std::memory_order_relaxed);  // the receiver's own flag; senders only read
  ++c.consumed;
}

void Team::wait_signal(int tag) { wait_on(channel(rank(), tag)); }

void Team::signal_to(std::size_t r, int tag) {
  Channel& c = channel(r, tag);
  // seq_cst: release for the receiver's acquire loads in wait_on(), and ordered before the
  // load of its sleeping flag (see wait_on()).
  c.posted.fetch_add(1, std::memory_order_seq_cst);
  if (c.sleeping.load(std::memory_order_seq_cst) != 0) detail::futex_wake_one(c.posted);
}

void Team::wait_prev(int tag) {
  if (rank() == 0) return;
  wait_signal(tag);
}

void Team::signal_next(int tag) {
  const std::size_t r = rank();
  if (r + 1 >= size_) return;
  signal_to(r + 1, tag);
}

std::int64_t Team::my_begin() const noexcept {
  return part_.begin(static_cast<std::int64_t>(rank()));
}
std::int64_t Team::my_end() const noexcept { return part_.end(static_cast<std::int64_t>(rank())); }
std::size_t Team::owner_of(std::int64_t i) const noexcept {
  return static_cast<std::size_t>(part_.owner(i));
}

void Team::iter_wait(std::int64_t i, int tag) {
  if (i < part_.first || i >= part_.first + part_.n) return;
  if (i >= my_begin() && i < my_end()) return;
  wait_signal(tag);
}

void Team::iter_post(std::int64_t i, int tag) {
  if (i < part_.first || i >= part_.first + part_.n) return;
  const std::size_t owner = owner_of(i);
  if (owner == rank()) return;
  signal_to(owner, tag);
}

void Team::barrier() { barrier_.arrive_and_wait(); }

void Team::Barrier::arrive_and_wait() noexcept {
  // acquire: a participant that passes sees the writes of every participant before its arrival
  // (they release into arrived_, the last arrival acquires them all and releases generation_).
  const std::uint32_t gen = generation_.load(std::memory_order_acquire);
  // acq_rel: the arrivals form one release sequence the last arrival acquires.
  if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == size_) {
    // relaxed: ordered before the generation's release; nobody arrives again before seeing it.
    arrived_.store(0, std::memory_order_relaxed);
    // seq_cst: release for the waiters, and ordered before the load of sleepers_ (with the
    // waiters' increment of sleepers_ and re-check of generation_: one sees the other).
    generation_.fetch_add(1, std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) != 0) detail::futex_wake_all(generation_);
    return;
  }
  if (spin_until([&] { return generation_.load(std::memory_order_acquire) != gen; })) return;
  sleepers_.fetch_add(1, std::memory_order_seq_cst);
  // seq_cst: see the last arrival's; acquire as above.
  while (generation_.load(std::memory_order_seq_cst) == gen) {
    // Bounded: then re-check.
    if (detail::futex_wait_for(generation_, gen, detail::kParkLimit)) count_team_timeout();
  }
  // relaxed: a count for the last arrival's wake decision; a stale one costs one spare wake.
  sleepers_.fetch_sub(1, std::memory_order_relaxed);
}

void run_team_erased(Executor& ex, std::size_t size, std::int64_t first, std::int64_t last,
                     void (*body)(void*, Team&), void* ctx) {
  const std::size_t capacity = ex.num_workers();
  if (size == 0 || size > capacity) {
    throw InvalidArgument("weft::cpu::run_team: size " + std::to_string(size) + " must be in [1, " +
                          std::to_string(capacity) +
                          "] (the executor's workers: participants must all run at once)");
  }
  if (last < first) {
    throw InvalidArgument("weft::cpu::run_team: empty range with last < first");
  }
  Team team(size, first, last);
  auto participant = [&team, body, ctx](std::size_t r) {
    const std::size_t saved = tl_team_rank;
    tl_team_rank = r;
    struct Restore {
      std::size_t v;
      ~Restore() { tl_team_rank = v; }
    } restore{saved};
    body(ctx, team);
  };
  // A calling worker is rank 0; from outside the pool every rank is a task and the caller
  // sleeps (it would otherwise compete with the workers for the cores).
  const std::size_t first_task = ex.this_worker_index() >= 0 ? 1 : 0;
  TaskGroup g(ex);
  for (std::size_t r = first_task; r < size; ++r) {
    ex.spawn_task_into(g.state_for_algorithms(), [&participant, r] { participant(r); });
  }
  ex.publish_pending_work();
  if (first_task == 1) {
    try {
      participant(0);
    } catch (...) {
      g.wait_noexcept();
      throw;
    }
  }
  g.wait();
}

}  // namespace weft::cpu
