// src/common/flag_claim.hpp - holds an "in progress" flag for one call (a splitter's region, a
// graph's or runtime's run, a stream world's run) and clears it on every way out, so that a
// second call made meanwhile, from another thread or from inside the first, is refused
// instead of racing or deadlocking.
//
//   const FlagClaim claim(running_, "weft::...: a run is already in progress");  // or throws
#pragma once

#include <atomic>
#include <string>

#include "weft/error.hpp"

namespace weft::detail {

class FlagClaim {
 public:
  /// Sets `flag`; throws weft::InvalidState(`refusal`) when it was set already.
  FlagClaim(std::atomic<bool>& flag, const std::string& refusal) : flag_(&flag) {
    // acq_rel: acquires the last holder's release store below (what it did happens before
    // this call) and publishes the claim to a concurrent claimant's exchange.
    if (flag_->exchange(true, std::memory_order_acq_rel)) {
      flag_ = nullptr;
      throw InvalidState(refusal);
    }
  }
  ~FlagClaim() { release(); }
  FlagClaim(const FlagClaim&) = delete;
  FlagClaim& operator=(const FlagClaim&) = delete;
  /// Clears the flag before the end of the scope (idempotent).
  void release() noexcept {
    if (flag_ != nullptr) flag_->store(false, std::memory_order_release);  // pairs above
    flag_ = nullptr;
  }

 private:
  std::atomic<bool>* flag_;
};

}  // namespace weft::detail
