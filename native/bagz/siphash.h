// SipHash-2-4 (Aumasson and Bernstein, 2012): a keyed pseudo-random function
// with a 128-bit key and a 64-bit tag, made to authenticate short messages.
// The read cache seals each entry's header with it (block_cache.h), so that
// an entry made without the cache's secret never checks, whatever its CRCs.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace sackli {

inline constexpr size_t kSipHashKeyBytes = 16;
using SipHashKey = std::array<unsigned char, kSipHashKeyBytes>;

// The SipHash-2-4 tag of data[0, n) under `key`.
uint64_t SipHash24(const SipHashKey& key, const char* data, size_t n);

}  // namespace sackli
