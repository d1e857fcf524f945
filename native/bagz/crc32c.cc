#include "bagz/crc32c.h"

#include <array>
#include <cstring>
#include <iterator>

// SACKLI_CRC32C_HW: this CPU family has crc32c instructions, compiled in
// functions marked SACKLI_CRC32C_TARGET (the rest of the file keeps the
// baseline instruction set) and used when HasHardware() finds them.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <nmmintrin.h>
#define SACKLI_CRC32C_HW "sse4.2"
// crc32: newer clang (22 here) no longer counts it in sse4.2.
#define SACKLI_CRC32C_TARGET __attribute__((target("sse4.2,crc32")))
#elif defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
#define SACKLI_CRC32C_HW "armv8-crc"
#if defined(__clang__)
#define SACKLI_CRC32C_TARGET __attribute__((target("crc")))
#else
#include <arm_acle.h>
#define SACKLI_CRC32C_TARGET __attribute__((target("+crc")))
#endif
#if !defined(__ARM_FEATURE_CRC32) && !defined(__APPLE__) && defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_CRC32
#define HWCAP_CRC32 (1 << 7)  // the kernel's bit, for C libraries that lack the name
#endif
#endif
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

uint32_t PortableLoop(const unsigned char* p, size_t n, uint32_t crc) {
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

#ifdef SACKLI_CRC32C_HW
// One instruction over 8 bytes, and one over 1 byte. Both families compute
// the reflected CRC-32C register without the complements, as PortableLoop.
SACKLI_CRC32C_TARGET inline uint64_t HwWord(uint64_t crc, uint64_t word) {
#if defined(__x86_64__)
  return _mm_crc32_u64(crc, word);
#elif defined(__clang__)
  // clang before 16 declares <arm_acle.h>'s __crc32cd only when the whole
  // file is compiled for +crc; the builtin behind it works under the
  // target attribute.
  return __builtin_arm_crc32cd(static_cast<uint32_t>(crc), word);
#else
  return __crc32cd(static_cast<uint32_t>(crc), word);
#endif
}

SACKLI_CRC32C_TARGET inline uint32_t HwByte(uint32_t crc, unsigned char byte) {
#if defined(__x86_64__)
  return _mm_crc32_u8(crc, byte);
#elif defined(__clang__)
  return __builtin_arm_crc32cb(crc, byte);
#else
  return __crc32cb(crc, byte);
#endif
}

// The crc32 instruction has a latency of three cycles but takes a new one
// every cycle (ARM's crc32cx is alike on most cores), so three independent
// streams (over thirds of a block) run three times as fast as one; the three
// CRCs are then joined by shifting each over the bytes after it (a table per
// block length, built once).
// Block lengths: each round takes the largest that fits three times.
constexpr size_t kStreamBytes[] = {4096, 512, 128};

// zeros[j][b]: the register after byte b in place j (of the four) of a
// register is followed by `length` zero bytes.
using ShiftTable = std::array<std::array<uint32_t, 256>, 4>;

ShiftTable MakeShiftTable(size_t length) {
  static const Tables bytes = MakeTables();
  ShiftTable shift{};
  for (size_t j = 0; j < 4; ++j) {
    for (uint32_t b = 0; b < 256; ++b) {
      uint32_t crc = b << (8 * j);
      for (size_t k = 0; k < length; ++k) crc = (crc >> 8) ^ bytes[0][crc & 0xFFu];
      shift[j][b] = crc;
    }
  }
  return shift;
}

const ShiftTable& ShiftTableFor(size_t index) {
  static const std::array<ShiftTable, std::size(kStreamBytes)> tables = [] {
    std::array<ShiftTable, std::size(kStreamBytes)> made{};
    for (size_t i = 0; i < made.size(); ++i) made[i] = MakeShiftTable(kStreamBytes[i]);
    return made;
  }();
  return tables[index];
}

uint32_t Shift(const ShiftTable& zeros, uint32_t crc) {
  return zeros[0][crc & 0xFFu] ^ zeros[1][(crc >> 8) & 0xFFu] ^
         zeros[2][(crc >> 16) & 0xFFu] ^ zeros[3][crc >> 24];
}

// The word at `from + at` into the CRC (and, when copying, out to `to + at`).
template <bool kCopy>
SACKLI_CRC32C_TARGET inline uint64_t Step(uint64_t crc, const unsigned char* from,
                                          unsigned char* to, size_t at) {
  uint64_t word;
  std::memcpy(&word, from + at, 8);
  if constexpr (kCopy) std::memcpy(to + at, &word, 8);
  return HwWord(crc, word);
}

template <bool kCopy>
SACKLI_CRC32C_TARGET uint32_t Crc32cHw(const unsigned char* p, size_t n,
                                       uint32_t crc, unsigned char* out) {
  uint64_t crc64 = crc;
  for (size_t i = 0; i < std::size(kStreamBytes); ++i) {
    const size_t length = kStreamBytes[i];
    while (n >= 3 * length) {
      uint64_t crc1 = 0;
      uint64_t crc2 = 0;
      for (size_t at = 0; at < length; at += 8) {
        crc64 = Step<kCopy>(crc64, p, out, at);
        crc1 = Step<kCopy>(crc1, p, out, length + at);
        crc2 = Step<kCopy>(crc2, p, out, 2 * length + at);
      }
      const ShiftTable& zeros = ShiftTableFor(i);
      crc64 = Shift(zeros, static_cast<uint32_t>(crc64)) ^ crc1;
      crc64 = Shift(zeros, static_cast<uint32_t>(crc64)) ^ crc2;
      p += 3 * length;
      if constexpr (kCopy) out += 3 * length;
      n -= 3 * length;
    }
  }
  while (n >= 8) {
    crc64 = Step<kCopy>(crc64, p, out, 0);
    p += 8;
    if constexpr (kCopy) out += 8;
    n -= 8;
  }
  uint32_t crc32 = static_cast<uint32_t>(crc64);
  while (n-- > 0) {
    if constexpr (kCopy) *out++ = *p;
    crc32 = HwByte(crc32, *p++);
  }
  return crc32;
}

bool HasHardware() {
#if defined(__x86_64__)
  // cpuid itself, not __builtin_cpu_supports: that reads a table the
  // compiler's runtime fills in at start-up, which some runtimes (zig's)
  // leave empty.
  static const bool has = [] {
    unsigned eax, ebx, ecx, edx;
    return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_SSE4_2) != 0;
  }();
  return has;
#elif defined(__ARM_FEATURE_CRC32) || defined(__APPLE__)
  return true;  // every CPU the build targets has it (every Apple arm64 does)
#elif defined(__linux__)
  static const bool has = (::getauxval(AT_HWCAP) & HWCAP_CRC32) != 0;
  return has;
#else
  return false;  // no way to ask here: the table loop
#endif
}
#endif

}  // namespace

uint32_t Crc32c(const char* data, size_t n, uint32_t crc) {
  const auto* p = reinterpret_cast<const unsigned char*>(data);
  // The register form is the complement of the published value.
  const uint32_t state = ~crc;
#ifdef SACKLI_CRC32C_HW
  if (HasHardware()) return ~Crc32cHw<false>(p, n, state, nullptr);
#endif
  return ~PortableLoop(p, n, state);
}

uint32_t Crc32cCopy(const char* data, size_t n, char* out, uint32_t crc) {
  const auto* p = reinterpret_cast<const unsigned char*>(data);
  const uint32_t state = ~crc;
#ifdef SACKLI_CRC32C_HW
  if (HasHardware()) {
    return ~Crc32cHw<true>(p, n, state, reinterpret_cast<unsigned char*>(out));
  }
#endif
  std::memcpy(out, data, n);
  return ~PortableLoop(p, n, state);
}

const char* Crc32cImplementation() {
#ifdef SACKLI_CRC32C_HW
  if (HasHardware()) return SACKLI_CRC32C_HW;
#endif
  return "portable";
}

uint32_t Crc32cPortable(const char* data, size_t n, uint32_t crc) {
  return ~PortableLoop(reinterpret_cast<const unsigned char*>(data), n, ~crc);
}

}  // namespace sackli
