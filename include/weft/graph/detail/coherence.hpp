// weft/graph/detail/coherence.hpp - where the valid copies of one datum live, MSI-style
// (modified / shared / invalid per location, as in a cache-coherence protocol): location 0 is
// the host, location 1 + k device k. The graph runtime's dispatcher is the only user (one
// thread); the states are bookkeeping, the copies themselves are made by the runtime.
//
// Transitions (all of them are here):
//   reset_to(l)    l: modified, others: invalid        (the value is l's: a new run's input)
//   read_at(l)     l invalid: a valid location is the source of a copy; l becomes shared, and a
//                  modified source becomes shared; l valid: nothing changes
//   write_at(l)    l: modified, others: invalid        (whole overwrite, or read-write after
//                                                       read_at)
// Reading where no location is valid is an error (InvalidState): nothing was ever written.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "weft/error.hpp"

namespace weft::graph::detail {

enum class CopyState : std::uint8_t { invalid, shared, modified };

class Coherence {
 public:
  static constexpr std::size_t kHost = 0;
  static constexpr std::size_t kNone = static_cast<std::size_t>(-1);

  /// `locations` copies, all invalid.
  explicit Coherence(std::size_t locations) : state_(locations, CopyState::invalid) {}

  [[nodiscard]] CopyState state(std::size_t l) const { return state_.at(l); }
  [[nodiscard]] bool valid(std::size_t l) const { return state_.at(l) != CopyState::invalid; }
  [[nodiscard]] std::size_t locations() const noexcept { return state_.size(); }

  void reset_to(std::size_t l) {
    for (auto& s : state_) s = CopyState::invalid;
    state_.at(l) = CopyState::modified;
  }

  /// Prepares a read at `l`: the location to copy from first (the modified one if any, else
  /// the host if valid, else the lowest valid), or kNone when `l` is valid already. Throws
  /// InvalidState, naming `what`, when no location holds a valid copy.
  [[nodiscard]] std::size_t read_at(std::size_t l, const std::string& what) {
    if (valid(l)) return kNone;
    std::size_t source = kNone;
    for (std::size_t i = 0; i < state_.size(); ++i) {
      if (state_[i] == CopyState::modified) source = i;
    }
    if (source == kNone && valid(kHost)) source = kHost;
    for (std::size_t i = 0; source == kNone && i < state_.size(); ++i) {
      if (valid(i)) source = i;
    }
    if (source == kNone) {
      throw InvalidState("weft::graph: " + what + " is read but no copy of it is valid");
    }
    state_[source] = CopyState::shared;
    state_.at(l) = CopyState::shared;
    return source;
  }

  void write_at(std::size_t l) { reset_to(l); }

 private:
  std::vector<CopyState> state_;
};

}  // namespace weft::graph::detail
