// Software prefetch of a byte range, for reads that will miss the cache
// (random values of a large mapped file).
#pragma once

#include <cstddef>

namespace sackli {

inline constexpr size_t kCacheLineBytes = 64;

// Starts loading the cache lines of [p, p + n) without waiting for them. A
// prefetch never faults, so the range need not be readable.
inline void PrefetchBytes(const char* p, size_t n) {
  for (size_t at = 0; at < n; at += kCacheLineBytes) {
    __builtin_prefetch(p + at);
    // GCC deletes a loop of bare prefetches as one without effects (C++'s
    // forward-progress rule, -ffinite-loops); the empty asm keeps it.
    asm volatile("");
  }
  if (n > 0) __builtin_prefetch(p + n - 1);  // the last line, when p is unaligned
}

}  // namespace sackli
