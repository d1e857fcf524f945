// CRC-32C (Castagnoli): the check value mapbuffer format 1 stores after each
// value (native/maps), and of the read cache's entries (block_cache.h). Uses the CPU's crc32c instructions when it has them (SSE4.2 on
// x86_64, the ARMv8 CRC32 extension on aarch64), else a table-driven loop
// (8 bytes per step). Thread-safe, no state.
#pragma once

#include <cstddef>
#include <cstdint>

namespace sackli {

// The CRC-32C of `data[0, n)`, continuing from `crc` (the value returned for
// the bytes before them; 0 to start). Crc32c("123456789", 9) == 0xE3069283.
uint32_t Crc32c(const char* data, size_t n, uint32_t crc = 0);

// Crc32c(data, n, crc), copying data[0, n) to out[0, n) on the way: one read
// of the bytes where a check and a copy would read them twice.
uint32_t Crc32cCopy(const char* data, size_t n, char* out, uint32_t crc = 0);

// Which of the two ran here: "sse4.2" or "armv8-crc" (the instructions), or
// "portable" (the table loop: another CPU, or one without them).
const char* Crc32cImplementation();

// Crc32c by the table loop alone, whatever the CPU has: for tests that hold
// the instructions and the loop to the same results.
uint32_t Crc32cPortable(const char* data, size_t n, uint32_t crc = 0);

}  // namespace sackli
