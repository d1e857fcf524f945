#include "maps/int_map_build.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>
#include <utility>

#include "bagz/codec.h"
#include "bagz/crc32c.h"
#include "bagz/errors.h"
#include "bagz/format.h"
#include "bagz/thread_pool.h"

namespace sackli {
namespace {

uint32_t CheckedCount(const std::vector<uint64_t>& sorted_keys, size_t values) {
  if (values != sorted_keys.size()) {
    ThrowInvalidArgument("a map needs one value per key");
  }
  if (sorted_keys.size() > std::numeric_limits<uint32_t>::max()) {
    ThrowInvalidArgument("a map holds at most 2**32 - 1 keys");
  }
  for (size_t k = 1; k < sorted_keys.size(); ++k) {
    if (sorted_keys[k] <= sorted_keys[k - 1]) {
      ThrowInvalidArgument("map keys must be unique and sorted (key " +
                           std::to_string(sorted_keys[k]) + " follows " +
                           std::to_string(sorted_keys[k - 1]) + ")");
    }
  }
  return static_cast<uint32_t>(sorted_keys.size());
}

}  // namespace

std::vector<uint32_t> SortKeys(std::vector<uint64_t>& keys) {
  if (keys.size() > std::numeric_limits<uint32_t>::max()) {
    ThrowInvalidArgument("a map holds at most 2**32 - 1 keys");
  }
  std::vector<uint32_t> order(keys.size());
  if (std::is_sorted(keys.begin(), keys.end())) {
    // The common case (maps built from sorted keys): the order as given,
    // which the sort below would also give, ties included.
    std::iota(order.begin(), order.end(), uint32_t{0});
    return order;
  }
  std::vector<std::pair<uint64_t, uint32_t>> pairs(keys.size());
  for (size_t k = 0; k < keys.size(); ++k) {
    pairs[k] = {keys[k], static_cast<uint32_t>(k)};
  }
  std::sort(pairs.begin(), pairs.end());
  for (size_t k = 0; k < keys.size(); ++k) {
    keys[k] = pairs[k].first;
    order[k] = pairs[k].second;
  }
  return order;
}

std::string EncodeZstdMapValue(std::string_view value, int level) {
  std::string out;
  // zstd's frame of zero bytes.
  if (value.empty()) {
    static const char kEmptyFrame[] = "\x28\xb5\x2f\xfd\x20\x00\x01\x00\x00";
    return std::string(kEmptyFrame, sizeof(kEmptyFrame) - 1);
  }
  try {
    // No zstd checksum: the map's own crc32c covers the stored bytes.
    Codec::Zstd(level, "", /*raw_literals=*/false, /*checksum=*/false)
        .Encode(value.data(), value.size(), out);
  } catch (const CodecError& e) {
    ThrowInvalidArgument(std::string("compressing a map value: ") + e.what());
  }
  return out;
}

MapBufferPlan PlanMapBuffer(const std::vector<uint64_t>& sorted_keys,
                            const std::vector<std::string_view>& values,
                            MapCompression compression, uint8_t version,
                            int zstd_level, size_t parallelism) {
  const uint32_t n = CheckedCount(sorted_keys, values.size());
  if (version > kMapBufferFormatVersion) {
    ThrowInvalidArgument("unknown MapBuffer format version " +
                         std::to_string(version));
  }
  MapBufferPlan plan;
  plan.sorted_keys = &sorted_keys;
  plan.compression = compression;
  plan.version = version;
  plan.stored = values;
  if (compression == MapCompression::kZstd) {
    plan.encoded.resize(n);
    ThreadPool::Shared().ParallelFor(n, parallelism, [&](size_t k) {
      plan.encoded[k] = EncodeZstdMapValue(values[k], zstd_level);
    });
    // Views of the strings' heap or inline storage: moving the vector (as
    // returning the plan may) keeps its elements where they are.
    for (uint32_t k = 0; k < n; ++k) plan.stored[k] = plan.encoded[k];
  }
  const size_t checksum = version >= 1 ? kMapChecksumBytes : 0;
  plan.size = kMapBufferHeaderBytes + uint64_t{n} * kMapEntryBytes;
  for (uint32_t k = 0; k < n; ++k) plan.size += plan.stored[k].size() + checksum;
  return plan;
}

void WriteMapBuffer(const MapBufferPlan& plan, char* out, size_t parallelism) {
  const std::vector<uint64_t>& sorted_keys = *plan.sorted_keys;
  const auto n = static_cast<uint32_t>(sorted_keys.size());
  std::memcpy(out, "mapbufr", 7);
  out[7] = static_cast<char>(plan.version);
  std::memcpy(out + 8, MapCompressionTag(plan.compression).data(), 4);
  StoreU32(out + 12, n);
  const std::vector<uint32_t> order = EytzingerOrder(n);
  const size_t checksum = plan.version >= 1 ? kMapChecksumBytes : 0;
  // Values follow the index's (Eytzinger) order, so offsets ascend with it;
  // the index first, then the values in parallel chunks.
  uint64_t offset = kMapBufferHeaderBytes + uint64_t{n} * kMapEntryBytes;
  for (uint32_t position = 0; position < n; ++position) {
    char* entry = out + kMapBufferHeaderBytes + uint64_t{position} * kMapEntryBytes;
    StoreU64(entry, sorted_keys[order[position]]);
    StoreU64(entry + 8, offset);
    offset += plan.stored[order[position]].size() + checksum;
  }
  constexpr size_t kValuesPerTask = 1024;
  const size_t tasks = (n + kValuesPerTask - 1) / kValuesPerTask;
  ThreadPool::Shared().ParallelFor(tasks, parallelism, [&](size_t task) {
    const uint32_t end = static_cast<uint32_t>(std::min<size_t>(n, (task + 1) * kValuesPerTask));
    for (auto position = static_cast<uint32_t>(task * kValuesPerTask); position < end; ++position) {
      const std::string_view value = plan.stored[order[position]];
      char* at = out + LoadU64(out + kMapBufferHeaderBytes +
                               uint64_t{position} * kMapEntryBytes + 8);
      if (!value.empty()) std::memcpy(at, value.data(), value.size());
      if (checksum != 0) StoreU32(at + value.size(), Crc32c(value.data(), value.size()));
    }
  });
}

std::string BuildMapBuffer(const std::vector<uint64_t>& sorted_keys,
                           const std::vector<std::string_view>& values,
                           MapCompression compression, uint8_t version,
                           int zstd_level, size_t parallelism) {
  const MapBufferPlan plan = PlanMapBuffer(sorted_keys, values, compression, version,
                                           zstd_level, parallelism);
  std::string out(plan.size, '\0');
  WriteMapBuffer(plan, out.data(), parallelism);
  return out;
}

std::string BuildIntMap(const std::vector<uint64_t>& sorted_keys,
                        const std::vector<uint64_t>& values) {
  const uint32_t n = CheckedCount(sorted_keys, values.size());
  const std::vector<uint32_t> order = EytzingerOrder(n);
  std::string out(kIntMapHeaderBytes + uint64_t{n} * kMapEntryBytes, '\0');
  std::memcpy(out.data(), "intm", 4);
  out[4] = 0;  // version
  out[5] = 3;  // element type: uint64
  StoreU32(out.data() + 6, n);
  for (uint32_t position = 0; position < n; ++position) {
    char* entry = out.data() + kIntMapHeaderBytes +
                  uint64_t{position} * kMapEntryBytes;
    StoreU64(entry, sorted_keys[order[position]]);
    StoreU64(entry + 8, values[order[position]]);
  }
  return out;
}

}  // namespace sackli
