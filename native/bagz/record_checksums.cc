#include "bagz/record_checksums.h"

#include <cstring>

#include "bagz/crc32c.h"
#include "bagz/errors.h"
#include "bagz/fault_guard.h"
#include "bagz/format.h"

namespace sackli {

std::string ChecksumsPathFor(const std::string& bag_path) {
  return bag_path + ".crc32c";
}

std::string UnfinishedChecksumsPathFor(const std::string& bag_path) {
  return ChecksumsPathFor(bag_path) + ".unfinished";
}

void ChecksumsBuilder::Add(uint32_t record_crc, uint64_t limit,
                           char out[kChecksumBytes]) {
  char limit_bytes[kLimitBytes];
  StoreU64(limit_bytes, limit);
  limits_crc_ = Crc32c(limit_bytes, kLimitBytes, limits_crc_);
  StoreU32(out, record_crc);
  self_crc_ = Crc32c(out, kChecksumBytes, self_crc_);
  ++num_records_;
  records_end_ = limit;
}

std::string ChecksumsBuilder::Trailer() const {
  std::string trailer(kChecksumsTrailerBytes, '\0');
  std::memcpy(trailer.data(), kChecksumsMagic, sizeof(kChecksumsMagic));
  StoreU64(trailer.data() + 8, num_records_);
  StoreU64(trailer.data() + 16, records_end_);
  StoreU32(trailer.data() + 24, limits_crc_);
  const uint32_t self = Crc32c(trailer.data(), 28, self_crc_);
  StoreU32(trailer.data() + 28, self);
  return trailer;
}

bool ParseChecksumsTrailer(const char* bytes, ChecksumsTrailer* out) {
  if (std::memcmp(bytes, kChecksumsMagic, sizeof(kChecksumsMagic)) != 0) return false;
  out->num_records = LoadU64(bytes + 8);
  out->records_end = LoadU64(bytes + 16);
  out->limits_crc = LoadU32(bytes + 24);
  out->self_crc = LoadU32(bytes + 28);
  return true;
}

std::unique_ptr<RecordChecksums> RecordChecksums::Load(
    std::shared_ptr<ByteSource> source, uint64_t num_records,
    uint64_t records_end, const std::string& bag_path) {
  const std::string& path = source->path();
  const uint64_t size = source->size();
  if (size < kChecksumsTrailerBytes) {
    ThrowCorruption(path, 0,
                    "a CRC-32C sidecar of " + std::to_string(size) +
                        " bytes is too short to hold its 32-byte trailer");
  }
  char bytes[kChecksumsTrailerBytes];
  const uint64_t trailer_at = size - kChecksumsTrailerBytes;
  source->Read(trailer_at, kChecksumsTrailerBytes, bytes);
  std::unique_ptr<RecordChecksums> checksums(new RecordChecksums());
  if (!ParseChecksumsTrailer(bytes, &checksums->trailer_)) {
    ThrowCorruption(path, trailer_at, "not a CRC-32C sidecar: no SKLCRC32 trailer");
  }
  const ChecksumsTrailer& t = checksums->trailer_;
  if (t.num_records != num_records || t.records_end != records_end) {
    ThrowCorruption(
        path, trailer_at,
        "this CRC-32C sidecar belongs to another version of " + bag_path + " (it is for " +
            std::to_string(t.num_records) + " records of " + std::to_string(t.records_end) +
            " bytes; the bag holds " + std::to_string(num_records) + " records of " +
            std::to_string(records_end) +
            " bytes): the bag was rewritten by a writer that kept no sidecar. Delete "
            "the sidecar, or rewrite the bag with record_checksums=True");
  }
  if (trailer_at != num_records * kChecksumBytes) {
    ThrowCorruption(path, trailer_at,
                    "holds " + std::to_string(trailer_at / kChecksumBytes) +
                        " checksums before its trailer, for a bag of " +
                        std::to_string(num_records) + " records");
  }
  if (source->mapped() == nullptr) {
    std::string all(static_cast<size_t>(trailer_at), '\0');
    source->Read(0, all.size(), all.data());
    checksums->loaded_.resize(static_cast<size_t>(num_records));
    for (uint64_t i = 0; i < num_records; ++i) {
      checksums->loaded_[i] = LoadU32(all.data() + i * kChecksumBytes);
    }
  }
  checksums->source_ = std::move(source);
  return checksums;
}

uint32_t RecordChecksums::at(uint64_t i) const {
  const char* base = source_->mapped();
  if (base == nullptr) return loaded_[i];
  return Guarded(*source_, [&] { return LoadU32(base + i * kChecksumBytes); });
}

}  // namespace sackli
