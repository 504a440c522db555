// The pool's input-queue entry as the probes copy it (PoolCore::Entry's layout, which is
// private to the pool): push_copy_probe's copies and lane_profile's --scratch copy build the
// same 40 bytes from a record as PoolCore::Entry::of does.
#pragma once

#include <cstdint>
#include <cstring>

#include "weft/gpu/detail/pool_core.hpp"

using ProbeRecord = weft::gpu::TaskRecord<16>;
struct ProbeEntry {
  ProbeEntry() {
  }  // NOLINT(modernize-use-equals-default): as PoolCore::Entry, resize() writes nothing
  std::uint32_t type, payload_size;
  std::uint64_t tag;
  std::uint32_t out, callback;
  unsigned char payload[16];
};
static_assert(sizeof(ProbeEntry) == 40, "PoolCore::Entry is 40 bytes with 16-byte payloads");

// Whole: the payload copied as PoolCore does (detail::copy_payload: all 16 bytes, a fixed-size
// move); else by a memcpy of the record's run-time payload_size, as it was before d423a6a.
template <bool Whole = true>
ProbeEntry entry_of(const ProbeRecord& r) {
  ProbeEntry e;
  e.type = r.type;
  e.payload_size = r.payload_size;
  e.tag = r.tag;
  e.out = 0;
  e.callback = 0;
  if constexpr (Whole) {
    weft::gpu::detail::copy_payload<16>(e.payload, r.payload, r.payload_size);
  } else {
    std::memcpy(e.payload, r.payload, r.payload_size);
  }
  return e;
}
