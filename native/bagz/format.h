// The Bagz format's rules that do not depend on how bytes are stored:
// integer encoding, file naming, the tail trailer and compression by suffix.
// docs/format.md is the prose version of this file.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

namespace sackli {

// Each limit is a little-endian u64: the exclusive end of a record within
// the records section.
inline constexpr uint64_t kLimitBytes = 8;

inline uint64_t LoadU64(const char* p) {
  uint64_t value;
  std::memcpy(&value, p, sizeof(value));
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  value = __builtin_bswap64(value);
#endif
  return value;
}

inline void StoreU64(char* p, uint64_t value) {
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  value = __builtin_bswap64(value);
#endif
  std::memcpy(p, &value, sizeof(value));
}

// Little-endian u32s: zstd frame magic numbers, the row format's ends and
// counts, and sackli.maps' key counts
// and checksums.
inline uint32_t LoadU32(const char* p) {
  uint32_t value;
  std::memcpy(&value, p, sizeof(value));
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  value = __builtin_bswap32(value);
#endif
  return value;
}

inline void StoreU32(char* p, uint32_t value) {
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  value = __builtin_bswap32(value);
#endif
  std::memcpy(p, &value, sizeof(value));
}

// "/d/x.bagz" -> "/d/limits.x.bagz": where SEPARATE placement keeps the
// limits, and where every writer keeps them while writing.
std::string LimitsPathFor(const std::string& records_path);

// Where a Writer keeps a bag until close() publishes it under its name: a
// hidden folder beside the target, "/d/x.bagz" ->
// "/d/.x.bagz.sackli-partial-<tag>/x.bagz" (and its limits file in the same
// folder). Globs such as "*.bagz" or "x-*-of-*.bagz" never see it, the file
// keeps its name (so compression follows the same suffix), and sackli.recover
// finds interrupted writes of "/d/x.bagz" by this prefix.
inline constexpr char kPartialMarker[] = ".sackli-partial-";
// "/d/x.bagz" -> "/d/.x.bagz.sackli-partial-": every partial folder of the
// target starts so.
std::string PartialFolderPrefix(const std::string& path);

// True when the file name ends in ".bagz", i.e. records are zstd frames.
bool HasZstdSuffix(const std::string& path);

// Where the limits of a TAIL-placed bag of `file_size` bytes start and how
// many records it holds, given its last 8 bytes; nullopt when the trailer is
// inconsistent (the file is not a complete tail bag). A 0-byte file is a bag
// of 0 records and is handled by the caller.
struct TailTrailer {
  uint64_t records_end;  // == start of the limits section
  uint64_t num_records;
};
std::optional<TailTrailer> ParseTailTrailer(uint64_t file_size,
                                            uint64_t last_u64);

}  // namespace sackli
