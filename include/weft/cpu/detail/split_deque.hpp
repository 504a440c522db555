// weft/cpu/detail/split_deque.hpp - a worker's task deque, split into a private and a public part.
//
// The owner pushes and pops at the bottom of its own (private) part with no synchronisation at
// all; thieves take from the old end of the public part; the owner moves the split point to
// publish private tasks or to reclaim public ones, so a thief never makes the owner wait
// (asynchronous stealing), and the owner's fast path touches no line a thief writes. No lock:
// the public part is a Chase-Lev deque whose "bottom" is the split point (the design of
// T. van Dijk and J. van de Pol's Lace, Euro-Par 2014 workshops), and the steal/reclaim race is
// resolved exactly as Chase-Lev's steal/pop race (D. Chase, Y. Lev, SPAA'05; memory orders
// after N. M. Lê et al., PPoPP'13).
//
//   index:  top ........ split ........ bottom
//           [ public: thieves ][ private: owner ]
//
// Indices only grow. The ring never wraps over a live task: push() refuses when full and the
// caller then runs the task at once. Departures from Lace: reclaim takes half of the public part
// instead of all of it (the owner keeps work to run without synchronising), and publishing is
// driven by ExecutorOptions::private_bound and by thieves' requests.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "weft/cpu/detail/task.hpp"

namespace weft::cpu::detail {

class SplitDeque {
 public:
  explicit SplitDeque(std::size_t capacity)
      : mask_(round_up_pow2(capacity) - 1),
        slots_(std::make_unique<std::atomic<Task*>[]>(mask_ + 1)) {}

  SplitDeque(const SplitDeque&) = delete;
  SplitDeque& operator=(const SplitDeque&) = delete;

  [[nodiscard]] std::size_t capacity() const noexcept { return mask_ + 1; }

  // ---- owner thread only ----------------------------------------------------------------

  /// True when the deque (private and public) holds fewer than `bound` tasks. Owner only.
  /// Re-reads top only when the cached value says the bound is reached, so the usual cost is
  /// one subtraction.
  [[nodiscard]] bool holds_fewer_than(std::int64_t bound) noexcept {
    if (bottom_ - top_seen_ < bound) return true;
    // At the bound, top is re-read only every kTopRecheck calls (top's line is the one thieves
    // write; a spawner running tiny children at once would miss on it at every spawn), or at
    // once when a thief found the public part empty: with coarse children, waiting for the
    // recheck would leave the thief idle for several task lengths.
    if (--top_recheck_ > 0 && !publish_requested_.load(std::memory_order_relaxed)) return false;
    top_recheck_ = kTopRecheck;
    // relaxed: a size estimate; top only grows, so a stale value overcounts, never under.
    top_seen_ = top_.load(std::memory_order_relaxed);
    return bottom_ - top_seen_ < bound;
  }

  [[nodiscard]] std::int64_t private_size() const noexcept { return bottom_ - split_mine_; }

  /// Pushes a task to the private part. Returns false, leaving the deque unchanged, when the
  /// ring is full. Owner only; no atomic read-modify-write, no fence.
  bool push(Task* t) noexcept {
    if (bottom_ - top_seen_ > static_cast<std::int64_t>(mask_)) {
      top_seen_ = top_.load(std::memory_order_relaxed);
      if (bottom_ - top_seen_ > static_cast<std::int64_t>(mask_)) return false;
    }
    // relaxed: the slot is private; publish() releases it to thieves.
    slots_[bottom_ & mask_].store(t, std::memory_order_relaxed);
    ++bottom_;
    return true;
  }

  /// Makes all private tasks but the newest `keep` stealable. Owner only.
  void publish(std::int64_t keep = 0) noexcept {
    const std::int64_t new_split = bottom_ - keep;
    if (new_split <= split_mine_) return;
    split_mine_ = new_split;
    // seq_cst: release so that thieves that read this split also see the slots and the task
    // bodies written before it (pairs with the seq_cst load in steal()); seq_cst so that a
    // sleeping worker's registration and this publication are totally ordered (the executor
    // reads the sleeper count after publishing; see Executor::notify_work).
    split_.store(new_split, std::memory_order_seq_cst);
    publish_requested_.store(false, std::memory_order_relaxed);
  }

  /// True when a thief asked for work while the public part was empty. Owner only.
  [[nodiscard]] bool publish_requested() const noexcept {
    // relaxed: a hint; a missed request only delays publication to the owner's next check.
    return publish_requested_.load(std::memory_order_relaxed);
  }

  /// Pops the newest task: private part first, else reclaims half of the public part.
  /// Returns null when the deque is empty. Owner only.
  Task* pop() noexcept {
    if (bottom_ > split_mine_) {
      --bottom_;
      return slots_[bottom_ & mask_].load(std::memory_order_relaxed);
    }
    return reclaim_and_pop();
  }

  // ---- any thread ------------------------------------------------------------------------

  /// Takes the oldest public task, or returns null (public part empty, or lost a race).
  /// Sets a publish request when the public part is empty.
  Task* steal() noexcept {
    // seq_cst load of top then of split: pairs with the owner's seq_cst store of split and load
    // of top in reclaim_and_pop() (the Dekker-style race of Chase-Lev), and acquires the slots
    // published by publish().
    std::int64_t t = top_.load(std::memory_order_seq_cst);
    const std::int64_t s = split_.load(std::memory_order_seq_cst);
    if (t >= s) {
      // relaxed: a hint to the owner; written only when not already set so that polling
      // thieves keep the line shared.
      if (!publish_requested_.load(std::memory_order_relaxed)) {
        publish_requested_.store(true, std::memory_order_relaxed);
      }
      return nullptr;
    }
    // Read the slot before claiming it: once top moves past t the owner may reuse the slot.
    Task* task = slots_[t & mask_].load(std::memory_order_relaxed);
    // seq_cst CAS: claims index t against other thieves and against reclaim_and_pop().
    if (!top_.compare_exchange_strong(t, t + 1, std::memory_order_seq_cst,
                                      std::memory_order_relaxed)) {
      return nullptr;
    }
    return task;
  }

  /// True when a thief could find something now (public part non-empty). Any thread.
  [[nodiscard]] bool has_public_work() const noexcept {
    return top_.load(std::memory_order_seq_cst) < split_.load(std::memory_order_seq_cst);
  }

 private:
  static std::size_t round_up_pow2(std::size_t n) noexcept {
    std::size_t p = 2;
    while (p < n) p <<= 1;
    return p;
  }

  Task* reclaim_and_pop() noexcept {
    const std::int64_t old_split = split_mine_;
    std::int64_t t = top_.load(std::memory_order_relaxed);
    if (t >= old_split) {
      // Empty. Keep the size estimate exact: a top_seen_ left behind by thieves' steals would
      // make holds_fewer_than() count tasks that are gone, and the spawner would run its next
      // children at once while the thieves starve.
      top_seen_ = t;
      return nullptr;
    }
    const std::int64_t take = std::max<std::int64_t>(1, (old_split - t) / 2);
    const std::int64_t s = old_split - take;
    split_mine_ = s;
    // seq_cst store then seq_cst load: after this store no thief that reads top >= s can
    // succeed (it reads split after top); pairs with the seq_cst loads in steal().
    split_.store(s, std::memory_order_seq_cst);
    t = top_.load(std::memory_order_seq_cst);
    top_seen_ = t;
    if (t < s) {
      // [s, old_split) is ours with no contest: it becomes private; pop its newest.
      --bottom_;
      return slots_[bottom_ & mask_].load(std::memory_order_relaxed);
    }
    if (t < old_split) {
      // Index t may be contested by a thief that read the old split; (t, old_split) is ours.
      Task* contested = slots_[t & mask_].load(std::memory_order_relaxed);
      std::int64_t expected = t;  // a failed CAS overwrites its argument: keep t intact
      const bool won = top_.compare_exchange_strong(expected, t + 1, std::memory_order_seq_cst,
                                                    std::memory_order_relaxed);
      // Everything below t+1 is consumed now; the rest is private.
      split_mine_ = t + 1;
      // relaxed: raising split to top exposes nothing (the public part stays empty).
      split_.store(t + 1, std::memory_order_relaxed);
      top_seen_ = t + 1;
      if (won) return contested;
      if (bottom_ > split_mine_) {
        --bottom_;
        return slots_[bottom_ & mask_].load(std::memory_order_relaxed);
      }
      return nullptr;
    }
    // Thieves took everything: public and private are empty.
    split_mine_ = old_split;
    split_.store(old_split, std::memory_order_relaxed);
    top_seen_ = t;
    return nullptr;
  }

  const std::size_t mask_;
  std::unique_ptr<std::atomic<Task*>[]> slots_;

  // Written by thieves (CAS), read by everyone.
  alignas(64) std::atomic<std::int64_t> top_{0};
  // Written by the owner only; read by thieves.
  alignas(64) std::atomic<std::int64_t> split_{0};
  // Written by thieves (set) and the owner (clear).
  alignas(64) std::atomic<bool> publish_requested_{false};
  // Owner-only plain fields.
  alignas(64) std::int64_t bottom_ = 0;
  std::int64_t split_mine_ = 0;  // the owner's copy of split_
  std::int64_t top_seen_ = 0;    // a lower bound of top_
  static constexpr int kTopRecheck = 8;
  int top_recheck_ = kTopRecheck;
};

}  // namespace weft::cpu::detail
