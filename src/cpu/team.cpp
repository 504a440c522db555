#include "weft/cpu/team.hpp"
#include "weft/cpu/detail/cpu_relax.hpp"

#include <exception>
#include <string>
#include <thread>

#include "weft/cpu/task_group.hpp"

namespace weft::cpu {

namespace {
thread_local std::size_t tl_team_rank = 0;

using detail::cpu_relax;
}  // namespace

Team::Team(std::size_t size, std::int64_t first, std::int64_t last)
    : size_(size),
      part_(first, last, static_cast<std::int64_t>(size)),
      channels_(std::make_unique<Channel[]>(size * kTeamTags)),
      barrier_(static_cast<std::ptrdiff_t>(size)) {}

std::size_t Team::rank() const noexcept { return tl_team_rank; }
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
  for (int spin = 0; spin < 2048; ++spin) {
    if (c.posted.load(std::memory_order_acquire) != want) {
      ++c.consumed;
      return;
    }
    if (spin < 1024) {
      cpu_relax();
    } else {
      std::this_thread::yield();
    }
  }
  while (c.posted.load(std::memory_order_acquire) == want) {
    c.posted.wait(want, std::memory_order_acquire);
  }
  ++c.consumed;
}

void Team::wait_signal(int tag) { wait_on(channel(rank(), tag)); }

void Team::signal_to(std::size_t r, int tag) {
  Channel& c = channel(r, tag);
  // release: pairs with the acquire loads in wait_on().
  c.posted.fetch_add(1, std::memory_order_release);
  c.posted.notify_one();
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
