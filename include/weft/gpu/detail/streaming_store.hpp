// weft/gpu/detail/streaming_store.hpp - copies that write around the cache (x86 non-temporal
// stores), for data one thread writes and another reads a while later.
//
// Why: a pusher copying a batch into queue entries writes into vectors recycled from the
// lanes, whose lines sit in the lanes' caches; each ordinary store then has to fetch its line
// and take it from another core first. On the 2-core VM that made a 4096-entry copy handed to
// one consumer thread cost 11.5-12 ns per entry, against 4.4-4.8 with streaming stores and 4.9
// for the copy alone (scripts/probes/push_copy_probe.cpp, bench/results/cpu2/probes/).
// Streaming stores need no line: they fill write-combining buffers and go to memory whole.
// The reader then finds the entries in memory instead of in the writer's cache, so this is for
// long batches only (short ones are read while still in cache).
//
// Streaming stores are weakly ordered: stream_fence() must come after the last of them and
// before whatever publishes the data (a mutex release does not order them). Without x86-64,
// and under the sanitizers (whose instrumentation does not see them), these are plain copies.
#pragma once

#include <cstring>
#include <type_traits>

#if defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define WEFT_NO_STREAMING_STORES 1
#endif
#endif
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define WEFT_NO_STREAMING_STORES 1
#endif
#if defined(__x86_64__) && !defined(WEFT_NO_STREAMING_STORES)
#include <immintrin.h>
#define WEFT_STREAMING_STORES 1
#endif

namespace weft::gpu::detail {

/// Whether T can be written by stream_store: trivially copyable, a whole number of 8-byte
/// words and 8-byte aligned (every element of an array of T, then, is too).
template <class T>
inline constexpr bool kStreamable = std::is_trivially_copyable_v<T> && sizeof(T) % 8 == 0 &&
                                    alignof(T) >= 8;

/// *to = v, written around the cache (see above). `to` must not be read by another thread
/// before stream_fence() and a release that the reader acquires.
template <class T>
inline void stream_store(T* to, const T& v) noexcept {
  static_assert(kStreamable<T>, "stream_store: T must be trivially copyable, 8-byte words");
#if defined(WEFT_STREAMING_STORES)
  long long words[sizeof(T) / 8];
  std::memcpy(words, &v, sizeof(T));  // registers: the compiler keeps v in them
  auto* d = reinterpret_cast<long long*>(to);
  for (std::size_t i = 0; i < sizeof(T) / 8; ++i) _mm_stream_si64(d + i, words[i]);
#else
  std::memcpy(static_cast<void*>(to), &v, sizeof(T));
#endif
}

/// Orders every streaming store before it ahead of the stores after it (sfence): call it
/// before publishing what stream_store wrote.
inline void stream_fence() noexcept {
#if defined(WEFT_STREAMING_STORES)
  _mm_sfence();
#endif
}

}  // namespace weft::gpu::detail
