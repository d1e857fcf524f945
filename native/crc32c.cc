#include "crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>
#define SACKLI_CRC32C_SSE42 1
#endif

namespace sackli {
namespace {

constexpr uint32_t kReversedPolynomial = 0x82F63B78u;

// tables[k][b]: the CRC of byte b followed by k zero bytes, so eight bytes
// fold into the CRC with eight lookups (slicing-by-8).
using Tables = std::array<std::array<uint32_t, 256>, 8>;

Tables MakeTables() {
  Tables tables{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t crc = b;
    for (int bit = 0; bit < 8; ++bit) {
      crc = (crc >> 1) ^ ((crc & 1u) ? kReversedPolynomial : 0u);
    }
    tables[0][b] = crc;
  }
  for (size_t k = 1; k < 8; ++k) {
    for (uint32_t b = 0; b < 256; ++b) {
      const uint32_t prev = tables[k - 1][b];
      tables[k][b] = (prev >> 8) ^ tables[0][prev & 0xFFu];
    }
  }
  return tables;
}

uint32_t Crc32cPortable(const unsigned char* p, size_t n, uint32_t crc) {
  static const Tables tables = MakeTables();
  while (n >= 8) {
    uint32_t low;
    uint32_t high;
    std::memcpy(&low, p, 4);
    std::memcpy(&high, p + 4, 4);
    // Little-endian loads: the format and every platform we build for.
    low ^= crc;
    crc = tables[7][low & 0xFF] ^ tables[6][(low >> 8) & 0xFF] ^
          tables[5][(low >> 16) & 0xFF] ^ tables[4][low >> 24] ^
          tables[3][high & 0xFF] ^ tables[2][(high >> 8) & 0xFF] ^
          tables[1][(high >> 16) & 0xFF] ^ tables[0][high >> 24];
    p += 8;
    n -= 8;
  }
  while (n-- > 0) crc = (crc >> 8) ^ tables[0][(crc ^ *p++) & 0xFFu];
  return crc;
}

#ifdef SACKLI_CRC32C_SSE42
__attribute__((target("sse4.2"))) uint32_t Crc32cSse42(const unsigned char* p,
                                                        size_t n,
                                                        uint32_t crc) {
  uint64_t crc64 = crc;
  while (n >= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    crc64 = _mm_crc32_u64(crc64, word);
    p += 8;
    n -= 8;
  }
  uint32_t crc32 = static_cast<uint32_t>(crc64);
  while (n-- > 0) crc32 = _mm_crc32_u8(crc32, *p++);
  return crc32;
}

bool HasSse42() {
  static const bool has = __builtin_cpu_supports("sse4.2");
  return has;
}
#endif

}  // namespace

uint32_t Crc32c(const char* data, size_t n, uint32_t crc) {
  const auto* p = reinterpret_cast<const unsigned char*>(data);
  // The register form is the complement of the published value.
  const uint32_t state = ~crc;
#ifdef SACKLI_CRC32C_SSE42
  if (HasSse42()) return ~Crc32cSse42(p, n, state);
#endif
  return ~Crc32cPortable(p, n, state);
}

}  // namespace sackli
