// weft/cpu/options.hpp - how a CPU executor is configured.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace weft::cpu {

/// When a spawned task is pushed for others to steal (help-first) and when it is run at once by
/// the spawning thread (work-first). See docs/cpu.md, "Spawning".
enum class SpawnPolicy : std::uint8_t {
  /// Help-first while the spawner's deque holds fewer than private_bound + public_bound tasks,
  /// work-first above it: enough queued work for thieves, and no task created beyond what they
  /// can take (a spawn above the bound costs a call). The default.
  bounded_queue,
  /// Classic cut-off: tasks spawned at depth >= depth_bound run at once.
  bounded_depth,
  /// Always help-first (push every task) until the deque is physically full.
  help_first,
};

/// What happens to tasks that have not started when the executor shuts down.
enum class ShutdownMode : std::uint8_t {
  /// Run every task already submitted, and the tasks they spawn, then stop. The destructor's mode.
  drain,
  /// Tasks not yet started are cancelled: their futures fail with weft::ShutDown, their groups
  /// count them as cancelled. Running tasks finish.
  cancel_pending,
};

/// Whether the workers are bound to processing units (hardware threads). See docs/cpu.md,
/// "Pinning".
enum class Pinning : std::uint8_t {
  /// Bound, worker i to the i-th processing unit the constructing thread may run on, when the
  /// executor has exactly one worker per such unit and no other executor of the process holds
  /// them bound; unbound otherwise, and silently so without hwloc. The default.
  automatic,
  /// Never bound: the OS places the workers.
  none,
  /// Bound in any case, worker i to the allowed unit i modulo their number (two workers may
  /// share one); a warning on stderr when binding is unavailable (no hwloc, OS refused).
  always,
};

/// Options of weft::cpu::Executor. The deque bounds (6 private + 30 public) are per worker, so
/// they scale with the machine, and any positive values are correct: they trade how much work
/// thieves can find against how many tasks a spawner creates and publishes.
struct ExecutorOptions {
  /// Worker threads; 0 means one per hardware thread the constructing thread may run on (its
  /// affinity mask, as OpenMP and TBB count theirs; all of the machine's when unrestricted).
  std::size_t workers = 0;
  SpawnPolicy spawn_policy = SpawnPolicy::bounded_queue;
  /// Tasks a worker keeps private (unstealable, no synchronisation) before publishing.
  std::size_t private_bound = 6;
  /// Tasks beyond the private ones that a deque may hold under bounded_queue.
  std::size_t public_bound = 30;
  /// Spawn depth at which bounded_depth runs children at once.
  std::uint32_t depth_bound = 12;
  /// Physical capacity of a worker's deque (rounded up to a power of two). When full, spawns run
  /// at once whatever the policy.
  std::size_t deque_capacity = 4096;
  /// Binding workers to processing units (through hwloc). Bound workers cannot be stacked on
  /// one core by the OS's wake-up placement while another core idles (docs/cpu.md, "Pinning").
  Pinning pinning = Pinning::automatic;
  /// How long an idle worker keeps looking for work (stealing, pausing, then yielding its core)
  /// before it sleeps. A sleeping worker costs the next task a wake-up; spinning costs a core
  /// only while the pool goes quiet. 250 us bridges the short serial stretches of fork-join
  /// code (SparseLU between its phases: 2 sleeps per factorisation instead of 12; docs/cpu.md
  /// "Sleeping and waking"). Zero: one look, then sleep. Negative: InvalidArgument.
  std::chrono::microseconds spin_before_sleep{250};
};

}  // namespace weft::cpu
