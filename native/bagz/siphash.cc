#include "bagz/siphash.h"

#include <cstring>

namespace sackli {
namespace {

// A little-endian word: one load where the CPU is little-endian.
uint64_t Load64(const unsigned char* p) {
  uint64_t value;
  std::memcpy(&value, p, sizeof(value));
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  value = __builtin_bswap64(value);
#endif
  return value;
}

// The last n < 8 bytes, little-endian.
uint64_t LoadTail(const unsigned char* p, size_t n) {
  uint64_t value = 0;
  for (size_t i = 0; i < n; ++i) value |= static_cast<uint64_t>(p[i]) << (8 * i);
  return value;
}

uint64_t Rotl(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

struct State {
  uint64_t v0, v1, v2, v3;

  void Round() {
    v0 += v1; v1 = Rotl(v1, 13); v1 ^= v0; v0 = Rotl(v0, 32);
    v2 += v3; v3 = Rotl(v3, 16); v3 ^= v2;
    v0 += v3; v3 = Rotl(v3, 21); v3 ^= v0;
    v2 += v1; v1 = Rotl(v1, 17); v1 ^= v2; v2 = Rotl(v2, 32);
  }

  void Absorb(uint64_t m) {
    v3 ^= m;
    Round();
    Round();
    v0 ^= m;
  }
};

}  // namespace

uint64_t SipHash24(const SipHashKey& key, const char* data, size_t n) {
  const uint64_t k0 = Load64(key.data());
  const uint64_t k1 = Load64(key.data() + 8);
  State s{k0 ^ 0x736f6d6570736575ull, k1 ^ 0x646f72616e646f6dull,
          k0 ^ 0x6c7967656e657261ull, k1 ^ 0x7465646279746573ull};
  const auto* p = reinterpret_cast<const unsigned char*>(data);
  const size_t whole = n - n % 8;
  for (size_t at = 0; at < whole; at += 8) s.Absorb(Load64(p + at));
  s.Absorb(LoadTail(p + whole, n % 8) | (static_cast<uint64_t>(n) << 56));
  s.v2 ^= 0xff;
  for (int i = 0; i < 4; ++i) s.Round();
  return s.v0 ^ s.v1 ^ s.v2 ^ s.v3;
}

}  // namespace sackli
