#include "int_map_build.h"

#include <cstring>
#include <limits>

#include "codec.h"
#include "crc32c.h"
#include "errors.h"
#include "format.h"
#include "thread_pool.h"

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

std::string EncodeZstdMapValue(std::string_view value, int level) {
  std::string out;
  // zstd's frame of zero bytes.
  if (value.empty()) {
    static const char kEmptyFrame[] = "\x28\xb5\x2f\xfd\x20\x00\x01\x00\x00";
    return std::string(kEmptyFrame, sizeof(kEmptyFrame) - 1);
  }
  try {
    Codec::Zstd(level, "").Encode(value.data(), value.size(), out);
  } catch (const CodecError& e) {
    ThrowInvalidArgument(std::string("compressing a map value: ") + e.what());
  }
  return out;
}

std::string BuildMapBuffer(const std::vector<uint64_t>& sorted_keys,
                           const std::vector<std::string_view>& values,
                           MapCompression compression, uint8_t version,
                           int zstd_level, size_t parallelism) {
  const uint32_t n = CheckedCount(sorted_keys, values.size());
  if (version > kMapBufferFormatVersion) {
    ThrowInvalidArgument("unknown MapBuffer format version " +
                         std::to_string(version));
  }
  std::vector<std::string_view> stored = values;
  std::vector<std::string> encoded;
  if (compression == MapCompression::kZstd) {
    encoded.resize(n);
    ThreadPool::Shared().ParallelFor(n, parallelism, [&](size_t k) {
      encoded[k] = EncodeZstdMapValue(values[k], zstd_level);
    });
    for (uint32_t k = 0; k < n; ++k) stored[k] = encoded[k];
  }
  const std::vector<uint32_t> order = EytzingerOrder(n);
  const size_t checksum = version >= 1 ? kMapChecksumBytes : 0;
  const uint64_t data_offset =
      kMapBufferHeaderBytes + uint64_t{n} * kMapEntryBytes;
  uint64_t total = data_offset;
  for (uint32_t k = 0; k < n; ++k) total += stored[k].size() + checksum;

  std::string out(total, '\0');
  std::memcpy(out.data(), "mapbufr", 7);
  out[7] = static_cast<char>(version);
  std::memcpy(out.data() + 8, MapCompressionTag(compression).data(), 4);
  StoreU32(out.data() + 12, n);
  uint64_t offset = data_offset;
  // Values follow the index's (Eytzinger) order, so offsets ascend with it.
  for (uint32_t position = 0; position < n; ++position) {
    const uint32_t k = order[position];
    char* entry = out.data() + kMapBufferHeaderBytes +
                  uint64_t{position} * kMapEntryBytes;
    StoreU64(entry, sorted_keys[k]);
    StoreU64(entry + 8, offset);
    const std::string_view value = stored[k];
    if (!value.empty()) std::memcpy(out.data() + offset, value.data(), value.size());
    offset += value.size();
    if (checksum != 0) {
      StoreU32(out.data() + offset, Crc32c(value.data(), value.size()));
      offset += checksum;
    }
  }
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
