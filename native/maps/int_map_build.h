// Lays out maps of the formats in int_map.h from sorted keys. The output of
// an uncompressed MapBuffer is byte-identical to mapbuffer 1.2.0's for the
// same dict. Throws kInvalidArgument for keys that are not strictly
// increasing or a map of more than 2**32 - 1 keys. Thread-safe (no state).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "maps/int_map.h"

namespace sackli {

// Sorts `keys` in place and returns where each came from: the k-th
// smallest key was keys[order[k]] before. Throws kInvalidArgument for more
// than 2**32 - 1 keys.
std::vector<uint32_t> SortKeys(std::vector<uint64_t>& keys);

// A MapBuffer of `version` (0: no crc32c, 1: a crc32c after each value).
// values[k] belongs to sorted_keys[k]. With kZstd the values are raw and
// compressed here (at `zstd_level`, on up to `parallelism` threads); with
// gzip, brotli or lzma the caller has compressed them already and only the
// header names the compression; with kNone they are stored as they are.
std::string BuildMapBuffer(const std::vector<uint64_t>& sorted_keys,
                           const std::vector<std::string_view>& values,
                           MapCompression compression, uint8_t version,
                           int zstd_level, size_t parallelism);

// BuildMapBuffer in two steps, so that the caller can allocate the output
// (a Python bytes) at its exact size in between: PlanMapBuffer checks the
// keys, compresses zstd values and sizes the map; WriteMapBuffer lays it
// out into `out` (plan.size bytes), on up to `parallelism` threads. The
// plan borrows `sorted_keys` and `values`: they must outlive it.
struct MapBufferPlan {
  const std::vector<uint64_t>* sorted_keys = nullptr;
  std::vector<std::string_view> stored;  // what each value stores, crc32c aside
  std::vector<std::string> encoded;      // owns zstd-compressed values
  MapCompression compression = MapCompression::kNone;
  uint8_t version = kMapBufferFormatVersion;
  uint64_t size = 0;
};
MapBufferPlan PlanMapBuffer(const std::vector<uint64_t>& sorted_keys,
                            const std::vector<std::string_view>& values,
                            MapCompression compression, uint8_t version,
                            int zstd_level, size_t parallelism);
void WriteMapBuffer(const MapBufferPlan& plan, char* out, size_t parallelism);

// One value as a compressed MapBuffer stores it: a zstd frame carrying its
// content size, also for an empty value (mapbuffer refuses empty values in
// compressed maps).
std::string EncodeZstdMapValue(std::string_view value, int level);

// An IntMap of (sorted_keys[k], values[k]).
std::string BuildIntMap(const std::vector<uint64_t>& sorted_keys,
                        const std::vector<uint64_t>& values);

}  // namespace sackli
