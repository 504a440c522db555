// The floor under a batched push: one thread copying 10^6 16-byte-payload task records into
// queue entries (the pusher's work in Pool::push_batch, without the pool), 4096 at a time,
// into recycled vectors as the input queue does. (a) every record once (10^6 records, 48 MB:
// read from memory, as `weft bench gpu-pool` pushes them); (b) 4096 records over and over
// (in cache: the write side alone); each also with the payload copied by a memcpy of its
// run-time size, as before d423a6a. (c) as (a), but each filled vector is handed to consumer
// threads that copy its entries out in takes of 256 (as lanes do) and give the emptied vector
// back for reuse: the pusher's stores then land on lines the consumers' caches hold; with
// ordinary stores and with streaming (non-temporal) stores, which need no line (tried in
// push() at 2934655 and reverted: no gain on the H100 machine's Xeon,
// lab/results/h100/stream_ab-2934655.txt). If (a) or (c) costs about what the pusher
// spends per task in push_batch (lab/probes/lane_profile.cu), the batched push is bound by
// this copy.
// Build and run from the repository root (argument: consumer threads for (c), default 1):
//   g++ -O2 -std=c++20 -Iinclude lab/probes/push_copy_probe.cpp -o /tmp/push_copy_probe &&
//   /tmp/push_copy_probe 1
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include <immintrin.h>

#include "probe_entry.hpp"

using Record = ProbeRecord;
using Entry = ProbeEntry;

// *to = e with x86 streaming stores (movnti): five 8-byte words, no read of the line.
void stream_store(Entry* to, const Entry& e) {
  long long words[sizeof(Entry) / 8];
  std::memcpy(words, &e, sizeof(Entry));
  auto* d = reinterpret_cast<long long*>(to);
  for (std::size_t i = 0; i < sizeof(Entry) / 8; ++i) _mm_stream_si64(d + i, words[i]);
}

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
      chunk.push_back(entry_of<Whole>(records[k % records.size()]));
    }
  }
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() /
         static_cast<double>(n);
}

// (c): the pusher's ns per record, filling vectors that consumer threads empty and give back.
template <bool Streaming>
double handoff_ns(const std::vector<Record>& records, int consumers, std::uint64_t& checksum) {
  std::mutex m;
  std::deque<std::vector<Entry>> queue;    // under m
  std::vector<std::vector<Entry>> spares;  // under m
  std::atomic<std::size_t> queued{0};  // queue.size(), a hint read without the lock (as lanes do)
  std::atomic<bool> done{false};
  std::atomic<std::uint64_t> sum{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < consumers; ++c) {
    threads.emplace_back([&] {
      std::vector<Entry> batch;
      batch.reserve(256);
      std::uint64_t s = 0;
      for (;;) {
        std::vector<Entry> v;
        // relaxed: a hint; the queue is read under the lock.
        if (queued.load(std::memory_order_relaxed) > 0) {
          std::lock_guard<std::mutex> lock(m);
          if (!queue.empty()) {
            v = std::move(queue.front());
            queue.pop_front();
            queued.store(queue.size(), std::memory_order_relaxed);  // relaxed: under m
          }
        }
        if (v.empty()) {
          // acquire: pairs with the release store below (every vector was queued before it).
          if (done.load(std::memory_order_acquire)) {
            std::lock_guard<std::mutex> lock(m);
            if (queue.empty()) break;
          }
          continue;
        }
        for (std::size_t i = 0; i < v.size(); i += 256) {
          batch.assign(v.begin() + static_cast<std::ptrdiff_t>(i),
                       v.begin() + static_cast<std::ptrdiff_t>(std::min(v.size(), i + 256)));
          for (const Entry& e : batch) s += e.tag;
        }
        v.clear();
        std::lock_guard<std::mutex> lock(m);
        spares.push_back(std::move(v));
      }
      sum.fetch_add(s, std::memory_order_relaxed);  // relaxed: read after join()
    });
  }
  double pusher = 0;
  std::vector<Entry> chunk;
  for (std::size_t i = 0; i < records.size(); i += 4096) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::size_t n = std::min<std::size_t>(4096, records.size() - i);
    if constexpr (Streaming) {
      chunk.resize(n);
      for (std::size_t k = 0; k < n; ++k) {
        stream_store(&chunk[k], entry_of<true>(records[i + k]));
      }
      _mm_sfence();  // the streaming stores before the lock's release publishes the vector
    } else {
      chunk.clear();
      for (std::size_t k = 0; k < n; ++k) chunk.push_back(entry_of<true>(records[i + k]));
    }
    {
      std::lock_guard<std::mutex> lock(m);
      queue.push_back(std::move(chunk));
      queued.store(queue.size(), std::memory_order_relaxed);  // relaxed: under m
      chunk = {};
      if (!spares.empty()) {
        chunk = std::move(spares.back());
        spares.pop_back();
      }
    }
    pusher +=
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  }
  done.store(true, std::memory_order_release);  // release: pairs with the consumers' acquire
  for (auto& t : threads) t.join();
  checksum = sum.load(std::memory_order_relaxed);
  return pusher / static_cast<double>(records.size());
}

int main(int argc, char** argv) {
  const int consumers = argc > 1 ? std::atoi(argv[1]) : 1;
  if (consumers < 1) {
    std::fprintf(stderr, "push_copy_probe: consumers must be >= 1\n");
    return 2;
  }
  constexpr std::size_t n = 1'000'000;
  std::vector<Record> all(n), few(4096);
  for (std::size_t i = 0; i < n; ++i) all[i].payload_size = 8, all[i].tag = i;
  for (std::size_t i = 0; i < few.size(); ++i) few[i].payload_size = 8, few[i].tag = i;
  std::vector<std::vector<Entry>> spares(16);
  for (auto& s : spares) s.reserve(4096);
  const std::uint64_t expect = std::uint64_t{n} * (n - 1) / 2;
  std::uint64_t plain_sum = 0, streaming_sum = 0;
  (void)handoff_ns<false>(all, consumers, plain_sum);  // warm-up: first touches of the vectors
  for (int rep = 0; rep < 3; ++rep) {
    std::printf(
        "rep %d: (a) 10^6 records from memory %.1f ns/record; (b) 4096 in cache %.1f ns/record; "
        "with a memcpy of the run-time size: (a) %.1f, (b) %.1f\n",
        rep, copy_ns<true>(all, n, spares), copy_ns<true>(few, n, spares),
        copy_ns<false>(all, n, spares), copy_ns<false>(few, n, spares));
    const double plain = handoff_ns<false>(all, consumers, plain_sum);
    const double streaming = handoff_ns<true>(all, consumers, streaming_sum);
    std::printf(
        "rep %d: (c) handed to %d consumer(s): ordinary stores %.1f ns/record, streaming "
        "%.1f ns/record (%s)\n",
        rep, consumers, plain, streaming,
        plain_sum == expect && streaming_sum == expect ? "sums ok" : "SUM WRONG");
  }
  return 0;
}
