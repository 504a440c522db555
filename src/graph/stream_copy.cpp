// Non-temporal copies (include/weft/graph/stream_copy.hpp). Hand-written: the C++ library has no
// non-temporal copy, and glibc's memcpy only streams copies larger than a share of the last-level
// cache (far above a row of a series).
#include "weft/graph/stream_copy.hpp"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#define WEFT_STREAM_STORES 1
#endif

namespace weft::graph {

void stream_copy_unfenced(void* dst, const void* src, std::size_t bytes) noexcept {
#ifdef WEFT_STREAM_STORES
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  // Head: 4-byte stores up to 16-byte alignment of dst (bytes before a 4-byte boundary by memcpy:
  // there is no non-temporal store narrower than 4 bytes).
  while (bytes > 0 && (reinterpret_cast<std::uintptr_t>(d) & 3) != 0) {
    *d++ = *s++;
    --bytes;
  }
  while (bytes >= 4 && (reinterpret_cast<std::uintptr_t>(d) & 15) != 0) {
    int v;
    std::memcpy(&v, s, 4);
    _mm_stream_si32(reinterpret_cast<int*>(d), v);
    d += 4, s += 4, bytes -= 4;
  }
  // Body: 64 bytes (a line) per step, four aligned 16-byte stores (SSE2, in every x86-64).
  for (; bytes >= 64; d += 64, s += 64, bytes -= 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 32));
    const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 48), e);
  }
  for (; bytes >= 16; d += 16, s += 16, bytes -= 16) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(d),
                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(s)));
  }
  for (; bytes >= 4; d += 4, s += 4, bytes -= 4) {
    int v;
    std::memcpy(&v, s, 4);
    _mm_stream_si32(reinterpret_cast<int*>(d), v);
  }
  if (bytes > 0) std::memcpy(d, s, bytes);
#else
  std::memcpy(dst, src, bytes);
#endif
}

void stream_fence() noexcept {
#ifdef WEFT_STREAM_STORES
  // Non-temporal stores are not ordered with later stores; sfence orders them before every
  // later store, so whatever the caller releases next (a task's completion, read with acquire
  // by whoever submits the copy) follows them.
  _mm_sfence();
#endif
}

void stream_copy(void* dst, const void* src, std::size_t bytes) noexcept {
  stream_copy_unfenced(dst, src, bytes);
  stream_fence();
}

}  // namespace weft::graph
