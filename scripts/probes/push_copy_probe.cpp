// The floor under a batched push: one thread copying 10^6 16-byte-payload task records into
// queue entries (the pusher's work in Pool::push_batch, without the pool), 4096 at a time,
// into recycled vectors as the input queue does. (a) every record once (10^6 records, 48 MB:
// read from memory, as `weft bench gpu-pool` pushes them); (b) 4096 records over and over
// (in cache: the write side alone); each also with the payload copied by a memcpy of its
// run-time size, as before d423a6a. If (a) costs about what the pusher spends per task in
// push_batch (scripts/probes/lane_profile.cu), the batched push is bound by this copy.
// Build and run from the repository root:
//   g++ -O2 -std=c++20 -Iinclude scripts/probes/push_copy_probe.cpp -o /tmp/push_copy_probe &&
//   /tmp/push_copy_probe
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "weft/gpu/detail/pool_core.hpp"

using Record = weft::gpu::TaskRecord<16>;
struct Entry {  // PoolCore::Entry's layout
  std::uint32_t type, payload_size;
  std::uint64_t tag;
  std::uint32_t out, callback;
  unsigned char payload[16];
};

// Whole: the payload copied as PoolCore does (detail::copy_payload: all 16 bytes, a fixed-size
// move); else by a memcpy of the record's run-time payload_size, as it was before d423a6a.
template <bool Whole>
double copy_ns(const std::vector<Record>& records, std::size_t n,
               std::vector<std::vector<Entry>>& spares) {
  const auto t0 = std::chrono::steady_clock::now();
  std::size_t v = 0;
  for (std::size_t i = 0; i < n; i += 4096, ++v) {
    std::vector<Entry>& chunk = spares[v % spares.size()];
    chunk.clear();
    for (std::size_t k = i; k < i + 4096 && k < n; ++k) {
      const Record& r = records[k % records.size()];
      Entry e;
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
      chunk.push_back(e);
    }
  }
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() /
         static_cast<double>(n);
}

int main() {
  constexpr std::size_t n = 1'000'000;
  std::vector<Record> all(n), few(4096);
  for (std::size_t i = 0; i < n; ++i) all[i].payload_size = 8, all[i].tag = i;
  for (std::size_t i = 0; i < few.size(); ++i) few[i].payload_size = 8, few[i].tag = i;
  std::vector<std::vector<Entry>> spares(16);
  for (auto& s : spares) s.reserve(4096);
  for (int rep = 0; rep < 3; ++rep) {
    std::printf(
        "rep %d: (a) 10^6 records from memory %.1f ns/record; (b) 4096 in cache %.1f ns/record; "
        "with a memcpy of the run-time size: (a) %.1f, (b) %.1f\n",
        rep, copy_ns<true>(all, n, spares), copy_ns<true>(few, n, spares),
        copy_ns<false>(all, n, spares), copy_ns<false>(few, n, spares));
  }
  return 0;
}
