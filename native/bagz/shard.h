// One bag file: its records, its limits (TAIL or SEPARATE, on disk or in
// memory) and its codec. Limits are validated where they are used: every
// span handed out is monotonic and inside the records section, else
// kCorruption naming the file holding the limits and the limit's offset.
//
// Where the limits are read from (ShardOptions.storage):
// - kOnDisk, local file: straight from the file (mapping or pread), nothing
//   kept.
// - kOnDisk, remote object (ByteSource::remote()): fetched lazily, a page of
//   4096 limits at a time, and kept (limits_cache.h): opening costs no limits
//   request, and a reader of some records downloads only the pages around
//   them.
// - kInMemory: all of them read at open, in one read.
//
// Thread-safety: a Shard is immutable once opened, apart from its page
// cache, which is thread-safe; every const method may be called from many
// threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bagz/byte_source.h"
#include "bagz/codec.h"
#include "bagz/errors.h"
#include "bagz/limits_cache.h"
#include "bagz/record_checksums.h"

namespace sackli {

// kLast names the last value (an alias, so switches stay exhaustive without
// it): the bindings, which take enum fields as ints, count 0 .. kLast.
enum class LimitsPlacement { kTail = 0, kSeparate = 1, kLast = kSeparate };
enum class LimitsStorage { kOnDisk = 0, kInMemory = 1, kLast = kInMemory };

struct ShardOptions {
  LimitsPlacement placement = LimitsPlacement::kTail;
  LimitsStorage storage = LimitsStorage::kOnDisk;
  // The most one record may decode to; a larger one is refused (kTooLarge)
  // before anything is allocated for it.
  uint64_t max_record_bytes = kUnlimitedRecordBytes;
};

class Shard {
 public:
  // Opens `path` (and `limits.<name>` for SEPARATE placement). Throws
  // kNotFound for a missing file, kCorruption for a malformed one; a TAIL
  // file that is really an interrupted write says so.
  static std::unique_ptr<Shard> Open(const std::string& path,
                                     const Codec& codec,
                                     const ShardOptions& options,
                                     const SourceOpener& opener);

  const std::string& path() const { return records_->path(); }
  uint64_t num_records() const { return num_records_; }
  // Bytes of the records section (payloads only).
  uint64_t records_bytes() const { return records_end_; }
  const ByteSource& records() const { return *records_; }
  const Codec& codec() const { return codec_; }

  // The end offsets of records [first, first + count) into `ends`, and the
  // begin offset of record `first` into `*begin`, validated.
  void Limits(uint64_t first, uint64_t count, uint64_t* begin,
              uint64_t* ends) const;

  // The byte span [begin, end) of record i, validated as Limits does (one
  // read of both limits).
  void Span(uint64_t i, uint64_t* begin, uint64_t* end) const;

  // Prepares the limits that Limits() will read for records
  // `sorted_locals[0, n)` (ascending, repeats allowed): for a remote shard
  // read lazily, the missing pages are fetched now, neighbouring pages in
  // one read, on up to `parallelism` pool threads. A no-op otherwise. Lets a
  // batch of scattered records cost a few limits requests, not one each.
  void PrefetchLimits(const uint64_t* sorted_locals, size_t n,
                      size_t parallelism) const;

  // True when the limits come from a remote object a page at a time.
  bool limits_fetched_lazily() const { return limits_cache_ != nullptr; }
  // The lazily fetched limits, or nullptr (for tests and statistics).
  const LimitsCache* limits_cache() const { return limits_cache_.get(); }

  // Throws the corruption error for record i, whose stored bytes start at
  // `offset`, with `what` from the codec.
  [[noreturn]] void ThrowBadRecord(uint64_t i, uint64_t offset,
                                   const std::string& what) const;

  // The cap on one record's decoded size (ShardOptions::max_record_bytes).
  uint64_t max_record_bytes() const { return max_record_bytes_; }
  // Throws kTooLarge for record i (stored at `offset`) unless `size` bytes
  // are within max_record_bytes().
  void CheckDecodedSize(uint64_t i, uint64_t offset, uint64_t size) const {
    if (size > max_record_bytes_) ThrowTooLarge(i, offset, std::to_string(size));
  }
  // kTooLarge for record i, which decodes to `size_text` bytes ("more than
  // N" when the decoder stopped at the cap).
  [[noreturn]] void ThrowTooLarge(uint64_t i, uint64_t offset,
                                  const std::string& size_text) const;
  // kOutOfMemory for record i: allocating `what` failed.
  [[noreturn]] void ThrowOutOfMemory(uint64_t i, uint64_t offset,
                                     const std::string& what) const;

  // The CRC-32C sidecar (record_checksums.h) found beside an uncompressed
  // bag at open, or nullptr.
  const RecordChecksums* checksums() const { return checksums_.get(); }
  // Throws kCorruption for record i, stored at `offset`, unless its stored
  // bytes match its CRC-32C in the sidecar; nothing without a sidecar.
  void CheckStored(uint64_t i, uint64_t offset, const char* stored,
                   size_t length) const {
    if (checksums_) CheckAgainstSidecar(i, offset, Crc32cOf(stored, length));
  }
  // Copies the stored bytes of raw record i into dst, checked against the
  // sidecar on the way when there is one (one pass over the bytes).
  void CopyChecked(uint64_t i, uint64_t offset, const char* stored,
                   size_t length, char* dst) const;
  // Records [first, first + count) of a mapped run at `data`, which is at
  // byte offset `begin` of the file (record k at data[offsets[k],
  // offsets[k + 1])), each checked as CheckStored does.
  void CheckRun(uint64_t first, uint64_t count, uint64_t begin,
                const char* data, const uint64_t* offsets) const;

  // Decodes record i, a frame without its content size stored at `offset`,
  // stopping at max_record_bytes(); every failure named for the record
  // (kCorruption, kTooLarge, kOutOfMemory).
  std::string DecodeUnsized(uint64_t i, uint64_t offset, const char* stored,
                            size_t length) const;

 private:
  Shard() = default;
  void ReadRawLimits(uint64_t first, uint64_t count, uint64_t* out) const;
  [[noreturn]] void ThrowBadLimit(uint64_t i, uint64_t value,
                                  const std::string& why) const;
  // "<path>: record i (byte offset o)", how errors of a record begin.
  std::string NameRecord(uint64_t i, uint64_t offset) const;
  static uint32_t Crc32cOf(const char* data, size_t n);
  // Throws kCorruption unless `crc` is record i's CRC-32C in the sidecar.
  void CheckAgainstSidecar(uint64_t i, uint64_t offset, uint32_t crc) const;
  // Finds and loads the sidecar of an uncompressed bag.
  void LoadChecksums(const SourceOpener& opener);

  std::shared_ptr<ByteSource> records_;
  std::shared_ptr<ByteSource> limits_source_;  // records_ itself for TAIL
  std::string limits_path_;  // the file holding the limits, for errors
  uint64_t limits_offset_ = 0;  // where limit 0 is in limits_source_
  std::vector<uint64_t> limits_in_memory_;
  std::unique_ptr<LimitsCache> limits_cache_;  // remote kOnDisk only
  bool in_memory_ = false;
  uint64_t num_records_ = 0;
  uint64_t records_end_ = 0;
  uint64_t max_record_bytes_ = kUnlimitedRecordBytes;
  Codec codec_;
  std::unique_ptr<RecordChecksums> checksums_;
};

}  // namespace sackli
