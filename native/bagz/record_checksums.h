// The CRC-32C sidecar of a bag: `<bag>.crc32c` beside it, the opt-in check
// of the records of an uncompressed bag (`.bag`), whose format has none of
// its own (a `.bagz` record is checked by its zstd frame's content checksum).
// The bag itself stays byte for byte what bagz writes and reads; readers that
// do not know the sidecar ignore it.
//
// Layout (docs/format.md), little-endian:
//   u32 crc[num_records]   CRC-32C of each record's stored bytes
//   8 bytes "SKLCRC32"     magic
//   u64 num_records        of the bag it belongs to
//   u64 records_end        bytes of that bag's records section
//   u32 limits_crc         CRC-32C of that bag's limits as stored (8 bytes each)
//   u32 self_crc           CRC-32C of every byte before this field
// A writer appends the CRCs to `<partial>.crc32c.unfinished` as it writes
// (what a crash leaves, for recovery) and adds the trailer on close.
//
// Thread-safety: RecordChecksums is immutable once loaded; ChecksumsBuilder
// is used under its writer's lock.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bagz/byte_source.h"

namespace sackli {

inline constexpr uint64_t kChecksumBytes = 4;
inline constexpr uint64_t kChecksumsTrailerBytes = 32;
inline constexpr char kChecksumsMagic[8] = {'S', 'K', 'L', 'C', 'R', 'C', '3', '2'};

// "/d/x.bag" -> "/d/x.bag.crc32c".
std::string ChecksumsPathFor(const std::string& bag_path);
// "/d/x.bag" -> "/d/x.bag.crc32c.unfinished": the CRCs of a write in progress.
std::string UnfinishedChecksumsPathFor(const std::string& bag_path);

// What a sidecar's trailer says of the bag it belongs to.
struct ChecksumsTrailer {
  uint64_t num_records = 0;
  uint64_t records_end = 0;
  uint32_t limits_crc = 0;
  uint32_t self_crc = 0;
};

// The running state of a sidecar being written: each record's CRC, then the
// trailer.
class ChecksumsBuilder {
 public:
  // Adds the record whose stored bytes have CRC-32C `record_crc` and whose
  // limit (the end of its bytes) is `limit`; `out` gets the 4 bytes to append.
  void Add(uint32_t record_crc, uint64_t limit, char out[kChecksumBytes]);
  uint64_t num_records() const { return num_records_; }
  // The 32-byte trailer for the records added so far.
  std::string Trailer() const;

 private:
  uint64_t num_records_ = 0;
  uint64_t records_end_ = 0;
  uint32_t limits_crc_ = 0;
  uint32_t self_crc_ = 0;
};

// Parses a trailer (32 bytes); nullopt-like false when the magic is wrong.
bool ParseChecksumsTrailer(const char* bytes, ChecksumsTrailer* out);

// A loaded sidecar: the CRC of each record of one bag.
class RecordChecksums {
 public:
  // Loads the sidecar `source` of a bag of `num_records` records and
  // `records_end` bytes of them. Throws kCorruption naming the sidecar when
  // it is malformed or was written for another bag (another record count or
  // size: the bag was rewritten by a writer that kept no sidecar).
  static std::unique_ptr<RecordChecksums> Load(std::shared_ptr<ByteSource> source,
                                               uint64_t num_records,
                                               uint64_t records_end,
                                               const std::string& bag_path);

  const std::string& path() const { return source_->path(); }
  // The CRC-32C the sidecar holds for record i (< num_records).
  uint32_t at(uint64_t i) const;
  // Starts loading at(i)'s bytes into the cache (a read at random misses).
  void Prefetch(uint64_t i) const {
    const char* base = source_->mapped();
    __builtin_prefetch(base != nullptr ? base + i * kChecksumBytes
                                       : reinterpret_cast<const char*>(loaded_.data() + i));
  }
  const ChecksumsTrailer& trailer() const { return trailer_; }

 private:
  RecordChecksums() = default;
  std::shared_ptr<ByteSource> source_;  // read in place when it is mapped
  std::vector<uint32_t> loaded_;        // otherwise, every CRC
  ChecksumsTrailer trailer_;
};

}  // namespace sackli
