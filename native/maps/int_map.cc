#include "maps/int_map.h"

#include <algorithm>

#include <cstring>
#include <functional>

#include "bagz/crc32c.h"
#include "bagz/errors.h"
#include "bagz/format.h"

namespace sackli {
namespace {

constexpr char kMapBufferMagic[] = "mapbufr";  // 7 bytes
constexpr char kIntMapMagic[] = "intm";        // 4 bytes
constexpr uint8_t kIntMapUint64Type = 3;

std::string Printable(const char* bytes, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    if (c >= 0x20 && c < 0x7F && c != '\\') {
      out += static_cast<char>(c);
    } else {
      static const char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xF];
    }
  }
  return out;
}

// Calls visit(position) for the positions of an n-node Eytzinger tree in
// in-order (sorted) order; an explicit stack keeps deep trees off the call
// stack.
template <typename Visit>
void ForEachInOrder(uint64_t n, const Visit& visit) {
  std::vector<uint64_t> stack;
  uint64_t node = 0;
  while (node < n || !stack.empty()) {
    while (node < n) {
      stack.push_back(node);
      node = 2 * node + 1;
    }
    node = stack.back();
    stack.pop_back();
    visit(node);
    node = 2 * node + 2;
  }
}

struct CompressionTag {
  const char* tag;
  MapCompression compression;
};
constexpr CompressionTag kCompressionTags[] = {
    {"none", MapCompression::kNone}, {"gzip", MapCompression::kGzip},
    {"00br", MapCompression::kBrotli}, {"zstd", MapCompression::kZstd},
    {"lzma", MapCompression::kLzma},
};

}  // namespace

MapHeader ParseMapHeader(const char* bytes, size_t n, MapKind kind,
                         const std::string& path) {
  MapHeader header;
  header.kind = kind;
  const size_t header_bytes = header.index_offset();
  if (n < header_bytes) {
    ThrowCorruption(path, n,
                    "truncated header: " + std::to_string(n) +
                        " bytes, a map header has " +
                        std::to_string(header_bytes));
  }
  const bool is_map_buffer = kind == MapKind::kMapBuffer;
  const char* magic = is_map_buffer ? kMapBufferMagic : kIntMapMagic;
  const size_t magic_bytes = std::strlen(magic);
  if (std::memcmp(bytes, magic, magic_bytes) != 0) {
    ThrowCorruption(path, 0,
                    std::string(is_map_buffer ? "not a MapBuffer" : "not an IntMap") +
                        ": magic is b'" + Printable(bytes, magic_bytes) +
                        "', expected b'" + magic + "'");
  }
  header.version = static_cast<uint8_t>(bytes[magic_bytes]);
  const uint8_t newest = is_map_buffer ? kMapBufferFormatVersion : 0;
  if (header.version > newest) {
    ThrowCorruption(path, magic_bytes,
                    "unsupported format version " +
                        std::to_string(header.version) + " (known: 0 to " +
                        std::to_string(newest) + ")");
  }
  if (is_map_buffer) {
    const char* tag = bytes + 8;
    bool known = false;
    for (const CompressionTag& entry : kCompressionTags) {
      if (std::memcmp(tag, entry.tag, 4) == 0) {
        header.compression = entry.compression;
        known = true;
      }
    }
    if (!known) {
      ThrowCorruption(path, 8,
                      "unknown compression b'" + Printable(tag, 4) +
                          "' (known: none, gzip, 00br, zstd, lzma)");
    }
    header.count = LoadU32(bytes + 12);
  } else {
    const auto element_type = static_cast<uint8_t>(bytes[5]);
    if (element_type != kIntMapUint64Type) {
      ThrowCorruption(path, 5,
                      "unsupported IntMap element type " +
                          std::to_string(element_type) + " (known: 3, uint64)");
    }
    header.count = LoadU32(bytes + 6);
  }
  return header;
}

std::string MapCompressionTag(MapCompression compression) {
  for (const CompressionTag& entry : kCompressionTags) {
    if (entry.compression == compression) return entry.tag;
  }
  ThrowInvalidArgument("unknown map compression");
}

std::vector<uint32_t> EytzingerOrder(uint32_t n) {
  std::vector<uint32_t> order(n);
  // The in-order walk of the tree visits positions in sorted order.
  uint32_t next = 0;
  ForEachInOrder(n, [&](uint64_t position) { order[position] = next++; });
  return order;
}

MapIndex::MapIndex(const MapHeader& header, const char* entries,
                   uint64_t map_size, std::string path)
    : header_(header),
      entries_(entries),
      map_size_(map_size),
      path_(std::move(path)) {
  if (map_size_ < header_.data_offset()) {
    ThrowCorruption(path_, map_size_,
                    "truncated index: the header promises " +
                        std::to_string(header_.count) + " keys (" +
                        std::to_string(header_.data_offset()) +
                        " bytes of header and index), the map has " +
                        std::to_string(map_size_) + " bytes");
  }
  if (header_.kind == MapKind::kIntMap && map_size_ != header_.data_offset()) {
    ThrowCorruption(path_, header_.data_offset(),
                    std::to_string(map_size_ - header_.data_offset()) +
                        " unexpected bytes after the IntMap's index");
  }
}

namespace {

// Keys searched together by FindMany: enough loads in flight to hide most
// of a cache miss, few enough to stay in registers and L1.
constexpr size_t kSearchGroup = 16;

}  // namespace

int64_t MapIndex::Resolve(uint64_t k, uint64_t key) const {
  // k: where the 1-based walk left the tree. The last left turn (the lowest
  // zero bit of k) marks the first key >= `key`.
  k >>= __builtin_ctzll(~k) + 1;
  if (k == 0) return -1;  // every key is smaller
  const auto position = static_cast<uint32_t>(k - 1);
  return Key(position) == key ? static_cast<int64_t>(position) : -1;
}

int64_t MapIndex::Find(uint64_t key) const {
  const uint64_t n = header_.count;
  // 1-based tree walk: go right while the node's key is smaller. The 16
  // descendants four levels down (256 bytes, four cache lines) are fetched
  // ahead, so the walk waits for memory about once every four levels rather
  // than at each.
  uint64_t k = 1;
  while (k <= n) {
    if (16 * k <= n) {
      const char* descendants = entries_ + (16 * k - 1) * kMapEntryBytes;
      for (int line = 0; line < 4; ++line) __builtin_prefetch(descendants + 64 * line);
    }
    k = 2 * k + (Key(static_cast<uint32_t>(k - 1)) < key);
  }
  return Resolve(k, key);
}

void MapIndex::FindMany(const uint64_t* keys, size_t n,
                        int64_t* positions) const {
  const uint64_t count = header_.count;
  // Every walk takes the tree's depth or one step more (the last level may
  // be partly filled); the shallow walks take the extra step as a no-op.
  uint64_t depth = 0;
  while ((uint64_t{1} << depth) <= count) ++depth;
  uint64_t k[kSearchGroup];
  for (size_t first = 0; first < n; first += kSearchGroup) {
    const size_t group = std::min(kSearchGroup, n - first);
    for (size_t i = 0; i < group; ++i) k[i] = 1;
    for (uint64_t level = 0; level < depth; ++level) {
      for (size_t i = 0; i < group; ++i) {
        const uint64_t node = k[i];
        if (node > count) continue;
        // The node's grandchildren (4 entries, one cache line when the
        // entries start 16 bytes into an aligned mapping) are fetched while
        // this level's comparisons run.
        if (4 * node <= count) {
          __builtin_prefetch(entries_ + (4 * node - 1) * kMapEntryBytes);
        }
        k[i] = 2 * node + (Key(static_cast<uint32_t>(node - 1)) < keys[first + i]);
      }
    }
    for (size_t i = 0; i < group; ++i) {
      positions[first + i] = Resolve(k[i], keys[first + i]);
    }
  }
}

void MapIndex::ThrowCorruptValue(uint32_t position, uint64_t offset,
                                 const std::string& what) const {
  ThrowCorruption(path_, offset,
                  "value of key " + std::to_string(Key(position)) + ": " + what);
}

ValueExtent MapIndex::Extent(uint32_t position) const {
  const uint64_t entry_offset =
      header_.index_offset() + uint64_t{position} * kMapEntryBytes + 8;
  ValueExtent extent;
  extent.begin = Word(position);
  extent.end = position + 1 < header_.count ? Word(position + 1) : map_size_;
  if (extent.begin < header_.data_offset() || extent.begin > map_size_) {
    ThrowCorruptValue(position, entry_offset,
                      "offset " + std::to_string(extent.begin) +
                          " is outside the values region [" +
                          std::to_string(header_.data_offset()) + ", " +
                          std::to_string(map_size_) + "]");
  }
  if (extent.end < extent.begin || extent.end > map_size_) {
    ThrowCorruptValue(position, entry_offset + kMapEntryBytes,
                      "the next offset " + std::to_string(extent.end) +
                          " is before this value's start " +
                          std::to_string(extent.begin) +
                          " or past the end of the map (" +
                          std::to_string(map_size_) + " bytes)");
  }
  if (header_.has_checksums() && extent.end - extent.begin < kMapChecksumBytes) {
    ThrowCorruptValue(position, extent.begin,
                      std::to_string(extent.end - extent.begin) +
                          " bytes, too short to hold its crc32c");
  }
  return extent;
}

size_t MapIndex::VerifyValue(uint32_t position, const char* value, size_t n,
                             bool check_crc, char* copy_to) const {
  if (!header_.has_checksums()) {
    if (copy_to != nullptr) std::memcpy(copy_to, value, n);
    return n;
  }
  if (n < kMapChecksumBytes) {
    ThrowCorruptValue(position, Word(position),
                      std::to_string(n) +
                          " bytes, too short to hold its crc32c");
  }
  const size_t payload = n - kMapChecksumBytes;
  if (!check_crc) {
    if (copy_to != nullptr) std::memcpy(copy_to, value, payload);
  } else {
    const uint32_t stored = LoadU32(value + payload);
    const uint32_t computed =
        copy_to != nullptr ? Crc32cCopy(value, payload, copy_to) : Crc32c(value, payload);
    if (stored != computed) {
      ThrowCorruptValue(position, Word(position),
                        "crc32c mismatch (stored " + std::to_string(stored) +
                            ", computed " + std::to_string(computed) + ")");
    }
  }
  return payload;
}

void MapIndex::Validate() const {
  const uint32_t n = header_.count;
  // Keys: an in-order walk of the tree must be strictly increasing.
  bool have_previous = false;
  uint64_t previous = 0;
  ForEachInOrder(n, [&](uint64_t node) {
    const uint64_t key = Key(static_cast<uint32_t>(node));
    if (have_previous && key <= previous) {
      ThrowCorruption(path_, header_.index_offset() + node * kMapEntryBytes,
                      "index keys are not in Eytzinger order: key " +
                          std::to_string(key) + " follows " +
                          std::to_string(previous));
    }
    previous = key;
    have_previous = true;
  });
  if (header_.kind != MapKind::kMapBuffer) return;
  if (n == 0) {
    if (map_size_ != kUnknownMapSize && map_size_ != header_.data_offset()) {
      ThrowCorruption(path_, header_.data_offset(),
                      "an empty map has " +
                          std::to_string(map_size_ - header_.data_offset()) +
                          " bytes of values");
    }
    return;
  }
  if (Word(0) != header_.data_offset()) {
    ThrowCorruptValue(0, header_.index_offset() + 8,
                      "the first value starts at " + std::to_string(Word(0)) +
                          ", not where the values region starts (" +
                          std::to_string(header_.data_offset()) + ")");
  }
  for (uint32_t position = 0; position < n; ++position) Extent(position);
}

}  // namespace sackli
