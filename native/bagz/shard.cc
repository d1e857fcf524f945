#include "bagz/shard.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>

#include "bagz/crc32c.h"
#include "bagz/errors.h"
#include "bagz/fault_guard.h"
#include "bagz/format.h"

namespace sackli {
namespace {

std::string HexCrc(uint32_t crc) {
  char text[16];
  std::snprintf(text, sizeof(text), "0x%08x", crc);
  return text;
}

[[noreturn]] void ThrowInterruptedWrite(const std::string& path,
                                        const std::string& limits_path) {
  throw Error(ErrorKind::kCorruption,
              path + ": not a complete bag with TAIL limits, and " +
                  limits_path +
                  " exists beside it: the bag was written with "
                  "LimitsPlacement.SEPARATE, or its write was interrupted. "
                  "Open it with limits_placement=LimitsPlacement.SEPARATE, or "
                  "turn it into a complete bag with sackli.recover(path) (from a "
                  "shell: sackli recover PATH).",
              path);
}

// A remote TAIL bag whose limits are loaded at open has its trailer read
// with the bytes before it, up to this many: all of its limits unless it
// holds more than 8,000 records (every read of a remote object is a round
// trip). The Python opener (sackli/_storage/_objects.py, TAIL_BYTES) fetches
// as many of the end with the object's size, so this read costs no request.
constexpr uint64_t kRemoteTailBytes = 64 * 1024;

}  // namespace

std::unique_ptr<Shard> Shard::Open(const std::string& path, const Codec& codec,
                                   const ShardOptions& options,
                                   const SourceOpener& opener) {
  std::unique_ptr<Shard> shard(new Shard());
  shard->codec_ = codec;
  shard->max_record_bytes_ = options.max_record_bytes;
  shard->records_ = opener.open(path);
  const uint64_t size = shard->records_->size();
  std::string tail;  // the last bytes of a TAIL bag, read with its trailer

  if (options.placement == LimitsPlacement::kSeparate) {
    const std::string limits_path = LimitsPathFor(path);
    shard->limits_source_ = opener.open(limits_path);
    shard->limits_path_ = limits_path;
    const uint64_t limits_size = shard->limits_source_->size();
    if (limits_size % kLimitBytes != 0) {
      ThrowCorruption(limits_path, limits_size - limits_size % kLimitBytes,
                      "limits file size " + std::to_string(limits_size) +
                          " is not a multiple of 8");
    }
    shard->num_records_ = limits_size / kLimitBytes;
    shard->records_end_ = size;
  } else {
    shard->limits_source_ = shard->records_;
    shard->limits_path_ = path;
    if (size == 0) {
      // A 0-byte file is an empty bag, unless a write into it was cut short.
      const std::string limits_path = LimitsPathFor(path);
      if (opener.exists(limits_path)) ThrowInterruptedWrite(path, limits_path);
    } else {
      std::optional<TailTrailer> trailer;
      if (size >= kLimitBytes) {
        // (ON_DISK limits of a remote bag are fetched page by page, when read.)
        const bool limits_now =
            shard->records_->remote() && options.storage == LimitsStorage::kInMemory;
        tail.resize(static_cast<size_t>(limits_now ? std::min(size, kRemoteTailBytes)
                                                   : kLimitBytes));
        shard->records_->Read(size - tail.size(), tail.size(), tail.data());
        trailer = ParseTailTrailer(size, LoadU64(tail.data() + tail.size() - kLimitBytes));
      }
      if (!trailer) {
        const std::string limits_path = LimitsPathFor(path);
        if (opener.exists(limits_path)) {
          ThrowInterruptedWrite(path, limits_path);
        }
        if (size < kLimitBytes) {
          ThrowCorruption(path, 0,
                          "a bag file of " + std::to_string(size) +
                              " bytes is too short to hold its limits");
        }
        ThrowCorruption(path, size - kLimitBytes,
                        "the last 8 bytes do not point at a limits section "
                        "(not a bag with TAIL limits, or truncated)");
      }
      shard->num_records_ = trailer->num_records;
      shard->records_end_ = trailer->records_end;
      shard->limits_offset_ = trailer->records_end;
    }
  }

  if (!codec.compressed()) shard->LoadChecksums(opener);
  if (shard->num_records_ == 0) return shard;
  if (options.storage == LimitsStorage::kOnDisk &&
      shard->limits_source_->remote()) {
    // Every read of a remote object is a request: keep what is fetched.
    shard->limits_cache_ = std::make_unique<LimitsCache>(
        shard->limits_source_, shard->limits_offset_, shard->num_records_);
    return shard;
  }
  if (options.storage == LimitsStorage::kInMemory) {
    std::vector<uint64_t> limits(shard->num_records_);
    if (tail.size() > kLimitBytes) {
      // The last limits came with the trailer; the ones before, if any, in
      // one more read (the trailer puts them all inside the file).
      const uint64_t tail_start = size - tail.size();
      const uint64_t begin = shard->limits_offset_;
      std::string bytes;
      if (begin < tail_start) {
        bytes.resize(static_cast<size_t>(tail_start - begin));
        shard->records_->Read(begin, bytes.size(), bytes.data());
        bytes += tail;
      } else {
        bytes = tail.substr(static_cast<size_t>(begin - tail_start));
      }
      for (uint64_t k = 0; k < shard->num_records_; ++k) {
        limits[k] = LoadU64(bytes.data() + k * kLimitBytes);
      }
    } else {
      shard->ReadRawLimits(0, shard->num_records_, limits.data());
    }
    shard->limits_in_memory_ = std::move(limits);
    shard->in_memory_ = true;
    // A separate limits file is no longer needed once loaded.
    if (shard->limits_source_ != shard->records_) shard->limits_source_.reset();
  }
  return shard;
}

void Shard::ReadRawLimits(uint64_t first, uint64_t count,
                          uint64_t* out) const {
  if (in_memory_) {
    std::copy(limits_in_memory_.begin() + first,
              limits_in_memory_.begin() + first + count, out);
    return;
  }
  if (limits_cache_) {
    limits_cache_->Read(first, count, out);
    return;
  }
  const uint64_t offset = limits_offset_ + first * kLimitBytes;
  const uint64_t bytes = count * kLimitBytes;
  if (const char* base = limits_source_->mapped()) {
    Guarded(*limits_source_, [&] {
      for (uint64_t k = 0; k < count; ++k) {
        out[k] = LoadU64(base + offset + k * kLimitBytes);
      }
    });
    return;
  }
  // Little-endian hosts can read the limits in place.
  char* dst = reinterpret_cast<char*>(out);
  limits_source_->Read(offset, bytes, dst);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  for (uint64_t k = 0; k < count; ++k) out[k] = __builtin_bswap64(out[k]);
#endif
}

void Shard::PrefetchLimits(const uint64_t* sorted_locals, size_t n,
                           size_t parallelism) const {
  if (!limits_cache_ || n == 0) return;
  // Limits() of record i reads limits i - 1 and i.
  std::vector<uint64_t> needed;
  needed.reserve(2 * n);
  for (size_t k = 0; k < n; ++k) {
    const uint64_t i = sorted_locals[k];
    if (i > 0) needed.push_back(i - 1);
    needed.push_back(i);
  }
  limits_cache_->Prefetch(needed.data(), needed.size(), parallelism);
}

void Shard::Limits(uint64_t first, uint64_t count, uint64_t* begin,
                   uint64_t* ends) const {
  uint64_t previous = 0;
  if (first > 0) ReadRawLimits(first - 1, 1, &previous);
  if (previous > records_end_) {
    ThrowBadLimit(first - 1, previous, "past the end of the records section");
  }
  *begin = previous;
  if (count == 0) return;
  ReadRawLimits(first, count, ends);
  for (uint64_t k = 0; k < count; ++k) {
    const uint64_t end = ends[k];
    if (end < previous) {
      ThrowBadLimit(first + k, end,
                    "smaller than the previous limit " +
                        std::to_string(previous));
    }
    if (end > records_end_) {
      ThrowBadLimit(first + k, end, "past the end of the records section");
    }
    previous = end;
  }
}

void Shard::Span(uint64_t i, uint64_t* begin, uint64_t* end) const {
  if (i == 0) {
    Limits(0, 1, begin, end);
    return;
  }
  uint64_t pair[2];
  ReadRawLimits(i - 1, 2, pair);
  if (pair[0] > records_end_) {
    ThrowBadLimit(i - 1, pair[0], "past the end of the records section");
  }
  if (pair[1] < pair[0]) {
    ThrowBadLimit(i, pair[1],
                  "smaller than the previous limit " + std::to_string(pair[0]));
  }
  if (pair[1] > records_end_) {
    ThrowBadLimit(i, pair[1], "past the end of the records section");
  }
  *begin = pair[0];
  *end = pair[1];
}

void Shard::ThrowBadLimit(uint64_t i, uint64_t value,
                          const std::string& why) const {
  ThrowCorruption(limits_path_, limits_offset_ + i * kLimitBytes,
                  "limit of record " + std::to_string(i) + " is " +
                      std::to_string(value) + ", " + why + " (" +
                      std::to_string(records_end_) + " bytes)");
}

void Shard::ThrowBadRecord(uint64_t i, uint64_t offset,
                           const std::string& what) const {
  ThrowCorruption(path(), offset,
                  "record " + std::to_string(i) + " is corrupt: " + what);
}

std::string Shard::NameRecord(uint64_t i, uint64_t offset) const {
  return path() + ": record " + std::to_string(i) + " (byte offset " +
         std::to_string(offset) + ")";
}

void Shard::ThrowTooLarge(uint64_t i, uint64_t offset,
                          const std::string& size_text) const {
  throw Error(ErrorKind::kTooLarge,
              NameRecord(i, offset) + " decodes to " + size_text +
                  " bytes (max_record_bytes=" + std::to_string(max_record_bytes_) +
                  ")",
              path());
}

void Shard::ThrowOutOfMemory(uint64_t i, uint64_t offset,
                             const std::string& what) const {
  throw Error(ErrorKind::kOutOfMemory,
              NameRecord(i, offset) + ": out of memory " + what, path());
}

void Shard::LoadChecksums(const SourceOpener& opener) {
  const std::string sidecar = ChecksumsPathFor(path());
  if (!opener.exists(sidecar)) return;
  checksums_ = RecordChecksums::Load(opener.open(sidecar), num_records_,
                                     records_end_, path());
}

uint32_t Shard::Crc32cOf(const char* data, size_t n) { return Crc32c(data, n); }

void Shard::CheckAgainstSidecar(uint64_t i, uint64_t offset, uint32_t crc) const {
  const uint32_t expected = checksums_->at(i);
  if (crc == expected) return;
  ThrowCorruption(path(), offset,
                  "record " + std::to_string(i) +
                      " is corrupt: its bytes do not match its CRC-32C in " +
                      checksums_->path() + " (" + HexCrc(crc) + " read, " +
                      HexCrc(expected) + " written)");
}

void Shard::CopyChecked(uint64_t i, uint64_t offset, const char* stored,
                        size_t length, char* dst) const {
  if (!checksums_) {
    if (length > 0) std::memcpy(dst, stored, length);
    return;
  }
  CheckAgainstSidecar(i, offset, Crc32cCopy(stored, length, dst));
}

void Shard::CheckRun(uint64_t first, uint64_t count, uint64_t begin,
                     const char* data, const uint64_t* offsets) const {
  if (!checksums_) return;
  Guarded(*records_, [&] {
    for (uint64_t k = 0; k < count; ++k) {
      CheckAgainstSidecar(first + k, begin + offsets[k],
                          Crc32c(data + offsets[k],
                                 static_cast<size_t>(offsets[k + 1] - offsets[k])));
    }
  });
}

std::string Shard::DecodeUnsized(uint64_t i, uint64_t offset,
                                 const char* stored, size_t length) const {
  try {
    return codec_.DecodeUnsized(stored, length, max_record_bytes_);
  } catch (const CodecError& e) {
    ThrowBadRecord(i, offset, e.what());
  } catch (const DecodedOverLimit&) {
    ThrowTooLarge(i, offset, "more than " + std::to_string(max_record_bytes_));
  } catch (const std::bad_alloc&) {
    ThrowOutOfMemory(i, offset, "decoding a zstd frame without its content size");
  }
}

}  // namespace sackli
