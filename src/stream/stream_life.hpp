// What the handles a task stream gives out (Request, Region, DeviceBytes) know of the stream
// after it ends a run or its World is destroyed (src/stream only). Each handle holds this
// record, shared with the stream, instead of trusting the stream to outlive it: a World that
// is destroyed first frees the memory of every region and allocation still alive, and the
// handles left then report that instead of touching a stream that is gone.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <set>
#include <thread>

namespace weft::stream::detail {

class RegionCore;

struct StreamLife {
  /// Orders a handle's release against the stream's destruction: whichever takes it first
  /// frees the memory, the other finds it freed.
  std::mutex mutex;
  /// False once the stream (its World) was destroyed. Written under `mutex`; a handle reads it
  /// under `mutex` before it frees, or without it (acquire) before it waits.
  std::atomic<bool> alive{true};
  /// The stream's runs so far, and whether one is under way: a request may move its stream's
  /// operations on only during the run that made it, from the stream's thread. Written by the
  /// stream's thread as a run begins and ends (release); read by any handle (acquire).
  std::atomic<std::uint64_t> run{0};
  std::atomic<bool> running{false};
  /// The thread of the run under way (stored before `running`): a request compares the caller
  /// with it without touching the stream, which another thread cannot know to be alive.
  std::atomic<std::thread::id> thread{};
  /// Regions and device allocations not yet released (under `mutex`).
  std::set<RegionCore*> regions;
  std::set<void*> allocations;

  /// Whether run `of` is the stream's run under way (the handle's stream is still there).
  [[nodiscard]] bool is_current(std::uint64_t of) const noexcept {
    return alive.load(std::memory_order_acquire) && running.load(std::memory_order_acquire) &&
           run.load(std::memory_order_acquire) == of;
  }
  /// Whether the caller is the thread of the run under way. Only then may a handle use the
  /// stream itself: the World cannot end while that thread is inside its run.
  [[nodiscard]] bool on_own_thread() const noexcept {
    return thread.load(std::memory_order_acquire) == std::this_thread::get_id();
  }
};

}  // namespace weft::stream::detail
