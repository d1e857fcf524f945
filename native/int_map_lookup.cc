#include "int_map_lookup.h"

#include <algorithm>
#include <cstring>

#include "codec.h"
#include "errors.h"
#include "fault_guard.h"
#include "thread_pool.h"

namespace sackli {
namespace {

// Keys per pool task: enough work to pay for the hand-off.
constexpr size_t kKeysPerTask = 256;

const Codec& ZstdCodec() {
  static const Codec codec = Codec::Zstd(3, "");
  return codec;
}

// Runs fn(k) for k in [0, n) in chunks on the pool.
template <typename Fn>
void ForEachChunked(size_t n, size_t parallelism, const Fn& fn) {
  const size_t tasks = (n + kKeysPerTask - 1) / kKeysPerTask;
  if (tasks <= 1 || parallelism <= 1) {
    for (size_t k = 0; k < n; ++k) fn(k);
    return;
  }
  ThreadPool::Shared().ParallelFor(tasks, parallelism, [&](size_t task) {
    const size_t end = std::min(n, (task + 1) * kKeysPerTask);
    for (size_t k = task * kKeysPerTask; k < end; ++k) fn(k);
  });
}

}  // namespace

void MapLookup::CheckPosition(uint32_t position) const {
  if (position >= index_.size()) {
    ThrowOutOfRange("map position " + std::to_string(position) +
                    " out of range for " + std::to_string(index_.size()) +
                    " keys");
  }
}

void MapLookup::Fill(FoundValue& value) const {
  const auto position = static_cast<uint32_t>(value.position);
  const ValueExtent extent = index_.Extent(position);
  const size_t stored = static_cast<size_t>(extent.end - extent.begin);
  const char* bytes = source_.mapped();
  if (bytes != nullptr) {
    bytes += extent.begin;
  } else {
    value.staged.resize(stored);
    source_.Read(extent.begin, stored, value.staged.data());
    bytes = value.staged.data();
  }
  Check(value, bytes, stored);
}

FoundValue MapLookup::LocateIn(uint32_t position, const char* stored,
                               size_t n) const {
  CheckPosition(position);
  FoundValue value;
  value.position = position;
  Check(value, stored, n);
  return value;
}

void MapLookup::CheckCrc(const FoundValue& value, const char* payload) const {
  index_.VerifyValue(static_cast<uint32_t>(value.position), payload,
                     value.payload_size + kMapChecksumBytes, true);
}

void MapLookup::Check(FoundValue& value, const char* bytes,
                      size_t stored) const {
  const auto position = static_cast<uint32_t>(value.position);
  value.payload = bytes;
  // The length is checked here; the crc32c, when Decode reads the value.
  value.payload_size = index_.VerifyValue(position, bytes, stored, false);
  value.crc_pending = check_crc_ && index_.header().has_checksums();
  value.decoded_size = value.payload_size;
  const MapCompression compression = index_.header().compression;
  if (compression == MapCompression::kNone) return;
  // Below, the value is damaged or needs decoding now: a crc mismatch, if
  // there is one, is the error to report, so it is checked first.
  auto check_crc_now = [&] {
    if (value.crc_pending) CheckCrc(value, bytes);
    value.crc_pending = false;
  };
  if (value.payload_size == 0) {
    check_crc_now();
    index_.ThrowCorruptValue(position, index_.Word(position),
                             "an empty value cannot be decompressed");
  }
  if (compression != MapCompression::kZstd) return;
  try {
    const uint64_t size =
        ZstdCodec().DecodedSize(value.payload, value.payload_size);
    if (size != Codec::kUnknownSize) {
      value.decoded_size = size;
      return;
    }
    // No content size in the frame: decode now, into the staging string.
    check_crc_now();
    std::string decoded =
        ZstdCodec().DecodeUnsized(value.payload, value.payload_size);
    value.staged = std::move(decoded);
    value.staged_decoded = true;
    value.payload = value.staged.data();
    value.payload_size = value.decoded_size = value.staged.size();
  } catch (const CodecError& e) {
    check_crc_now();
    index_.ThrowCorruptValue(position, index_.Word(position),
                             std::string("does not decompress: ") + e.what());
  }
}

std::vector<FoundValue> MapLookup::Locate(const uint64_t* keys, size_t n,
                                          size_t parallelism) const {
  std::vector<FoundValue> found(n);
  const size_t tasks = (n + kKeysPerTask - 1) / kKeysPerTask;
  auto locate_task = [&](size_t task) {
    const size_t first = task * kKeysPerTask;
    const size_t count = std::min(n, first + kKeysPerTask) - first;
    int64_t positions[kKeysPerTask];
    index_.FindMany(keys + first, count, positions);
    const char* mapped = source_.mapped();
    for (size_t i = 0; i < count; ++i) {
      found[first + i].position = positions[i];
      // The first bytes of each value (a zstd frame header, read by Fill)
      // and its crc32c at the end (read by Decode), and so their pages, are
      // on their way while the group's other values are located. Bad
      // offsets are caught by Fill; a prefetch never faults.
      if (mapped != nullptr && positions[i] >= 0) {
        const auto position = static_cast<uint32_t>(positions[i]);
        const uint64_t size = source_.size();
        const uint64_t begin = index_.Word(position);
        const uint64_t end = position + 1 < index_.size() ? index_.Word(position + 1) : size;
        if (begin < end && end <= size) {
          __builtin_prefetch(mapped + begin);
          __builtin_prefetch(mapped + end - 1);
        }
      }
    }
    for (size_t i = 0; i < count; ++i) {
      if (positions[i] >= 0) Fill(found[first + i]);
    }
  };
  Guarded(source_, [&] {
    if (tasks <= 1 || parallelism <= 1) {
      for (size_t task = 0; task < tasks; ++task) locate_task(task);
    } else {
      ThreadPool::Shared().ParallelFor(tasks, parallelism, locate_task);
    }
  });
  return found;
}

FoundValue MapLookup::LocateAt(uint32_t position) const {
  CheckPosition(position);
  FoundValue value;
  value.position = position;
  Guarded(source_, [&] { Fill(value); });
  return value;
}

std::vector<FoundValue> MapLookup::LocateRange(uint32_t first, size_t n,
                                               size_t parallelism) const {
  // In 64 bits: first + n - 1 may not fit the u32 a position is.
  if (n > 0 && uint64_t{first} + n > index_.size()) {
    ThrowOutOfRange("map positions [" + std::to_string(first) + ", " +
                    std::to_string(uint64_t{first} + n) + ") out of range for " +
                    std::to_string(index_.size()) + " keys");
  }
  std::vector<FoundValue> found(n);
  Guarded(source_, [&] {
    ForEachChunked(n, parallelism, [&](size_t k) {
      found[k].position = first + k;
      Fill(found[k]);
    });
  });
  return found;
}

void MapLookup::DecodeOne(const FoundValue& value, char* output) const {
  if (value.position < 0) return;
  // A FoundValue may have moved since Locate: staged bytes moved with it.
  const char* payload = value.staged.empty() ? value.payload : value.staged.data();
  if (value.crc_pending) CheckCrc(value, payload);
  if (value.decoded_size == 0) return;
  if (value.staged_decoded ||
      index_.header().compression != MapCompression::kZstd) {
    std::memcpy(output, payload, value.payload_size);
    return;
  }
  try {
    ZstdCodec().Decode(payload, value.payload_size, output,
                       value.decoded_size);
  } catch (const CodecError& e) {
    const auto position = static_cast<uint32_t>(value.position);
    index_.ThrowCorruptValue(position, index_.Word(position),
                             std::string("does not decompress: ") + e.what());
  }
}

void MapLookup::Decode(const std::vector<FoundValue>& found,
                       char* const* outputs, size_t parallelism) const {
  Guarded(source_, [&] {
    ForEachChunked(found.size(), parallelism,
                   [&](size_t k) { DecodeOne(found[k], outputs[k]); });
  });
}

}  // namespace sackli
