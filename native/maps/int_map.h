// The map formats of seung-lab's `mapbuffer` 1.2.0, read without parsing:
//
//   MapBuffer (uint64 key -> bytes):
//     "mapbufr" | version u8 | compression tag (4 bytes) | count u32   (16 B)
//     index: count x (key u64, offset u64), keys in Eytzinger order
//     values: one per index entry, in index order; value i spans
//       [offset[i], offset[i + 1]) (the last one runs to the end of the map);
//       format 1 ends each value with the crc32c (u32) of the bytes before it.
//   IntMap (uint64 key -> uint64):
//     "intm" | version u8 (0) | element type u8 (3: uint64) | count u32 (10 B)
//     index: count x (key u64, value u64), keys in Eytzinger order.
// All integers little-endian. Eytzinger order is the breadth-first order of
// the complete binary search tree over the sorted keys: entry k (from 0) has
// children 2k + 1 and 2k + 2, which makes the search cache-friendly.
//
// Every offset is bounds-checked before it is used; corruption throws
// sackli::Error(kCorruption) naming the map and the byte offset (and the key,
// where one is concerned). A MapIndex is immutable after construction and
// safe to share between threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "bagz/format.h"

namespace sackli {

enum class MapKind { kMapBuffer, kIntMap };
enum class MapCompression { kNone, kGzip, kBrotli, kZstd, kLzma };

inline constexpr size_t kMapBufferHeaderBytes = 16;
inline constexpr size_t kIntMapHeaderBytes = 10;
inline constexpr size_t kMapEntryBytes = 16;  // (key, offset or value)
inline constexpr size_t kMapChecksumBytes = 4;
inline constexpr uint8_t kMapBufferFormatVersion = 1;  // the one we write

struct MapHeader {
  MapKind kind = MapKind::kMapBuffer;
  uint8_t version = 0;
  MapCompression compression = MapCompression::kNone;
  uint32_t count = 0;

  uint64_t index_offset() const {
    return kind == MapKind::kMapBuffer ? kMapBufferHeaderBytes
                                       : kIntMapHeaderBytes;
  }
  // Where the values start: right after the index.
  uint64_t data_offset() const {
    return index_offset() + uint64_t{count} * kMapEntryBytes;
  }
  // Format 1 stores a crc32c after each value.
  bool has_checksums() const {
    return kind == MapKind::kMapBuffer && version >= 1;
  }
};

// Parses the first `n` bytes of a map of `kind`. Throws kCorruption for a
// short header, a wrong magic, an unknown version, element type or
// compression tag.
MapHeader ParseMapHeader(const char* bytes, size_t n, MapKind kind,
                         const std::string& path);

// The 4-byte tag of `compression` in a MapBuffer header ("none", "00br", ...).
std::string MapCompressionTag(MapCompression compression);

// The Eytzinger layout of n sorted items: position k of the index holds
// sorted item order[k].
std::vector<uint32_t> EytzingerOrder(uint32_t n);

// Where a MapBuffer value lies in the map: [begin, end) including its crc32c.
struct ValueExtent {
  uint64_t begin = 0;
  uint64_t end = 0;
};

// The map_size of a map read by ranges from an object of unknown size: its
// last value runs to wherever the object ends.
inline constexpr uint64_t kUnknownMapSize = std::numeric_limits<uint64_t>::max();

// The index of one map, over borrowed bytes (they must outlive it).
class MapIndex {
 public:
  // `entries`: the count x 16 bytes that follow the header. `map_size`: the
  // size of the whole map, or kUnknownMapSize. Throws kCorruption when the
  // map is shorter than its header and index (a truncated index).
  MapIndex(const MapHeader& header, const char* entries, uint64_t map_size,
           std::string path);

  const MapHeader& header() const { return header_; }
  const std::string& path() const { return path_; }
  uint32_t size() const { return header_.count; }
  uint64_t map_size() const { return map_size_; }
  // Whether `position`'s value runs to the end of an object of unknown size
  // (its Extent's end is then kUnknownMapSize, not an offset).
  bool RunsToUnknownEnd(uint32_t position) const {
    return map_size_ == kUnknownMapSize && uint64_t{position} + 1 == header_.count;
  }

  uint64_t Key(uint32_t position) const {
    return LoadU64(entries_ + uint64_t{position} * kMapEntryBytes);
  }
  // The second word of the entry: the value's offset (MapBuffer) or the value
  // itself (IntMap).
  uint64_t Word(uint32_t position) const {
    return LoadU64(entries_ + uint64_t{position} * kMapEntryBytes + 8);
  }

  // The index position of `key`, or -1 when the map has no such key.
  int64_t Find(uint64_t key) const;
  // positions[i] = Find(keys[i]) for i in [0, n). The searches of a group of
  // keys advance level by level together, so the cache misses of one
  // group overlap rather than follow each other (a large index is mostly
  // outside the cache).
  void FindMany(const uint64_t* keys, size_t n, int64_t* positions) const;

  // The validated extent of the value at `position` (MapBuffer only):
  // inside the values region, not before its successor's start, and long
  // enough for its crc32c. Throws kCorruption naming the key otherwise.
  ValueExtent Extent(uint32_t position) const;

  // Checks the value bytes `value[0, n)` read from Extent(position): strips
  // and (with `check_crc`) verifies the crc32c. Returns the payload length.
  // With `copy_to`, the payload is also copied there (in the pass that
  // computes the crc32c, when it is checked). Throws kCorruption naming the key and the value's offset on
  // a mismatch.
  size_t VerifyValue(uint32_t position, const char* value, size_t n,
                     bool check_crc, char* copy_to = nullptr) const;

  // Checks the whole index: keys strictly increasing in Eytzinger order,
  // and (MapBuffer) offsets starting at the values region, non-decreasing,
  // within the map and long enough for a crc32c each. Throws kCorruption for
  // the first violation.
  void Validate() const;

  // "<path>: ... key K ... (byte offset O)".
  [[noreturn]] void ThrowCorruptValue(uint32_t position, uint64_t offset,
                                      const std::string& what) const;

 private:
  // The result of a search whose 1-based tree walk for `key` ended at k.
  int64_t Resolve(uint64_t k, uint64_t key) const;

  MapHeader header_;
  const char* entries_;
  uint64_t map_size_;
  std::string path_;
};

}  // namespace sackli
