// Lookups in a MapBuffer (int_map.h) read through a ByteSource: one key, or
// many keys searched, checked and decoded in parallel on the engine's pool.
//
// A lookup runs in two steps so that the caller can allocate each output at
// its exact size in between (the bindings allocate Python `bytes`):
//   1. Locate: search the index, bounds-check the extent, find the value
//      (pointer into a mapping, or a copy for unmapped sources) and learn
//      its decoded size (zstd frames carry it).
//   2. Decode: verify each found value's crc32c and write its decoded bytes
//      into its output.
// Values compressed with zstd are decoded here; gzip, brotli and lzma values
// come back as stored (the caller decompresses them).
//
// Errors: kCorruption naming the map, the key and the byte offset (bad
// extent, crc mismatch, a zstd frame that does not decode). A mapped file
// that shrinks meanwhile gives the file-changed corruption error. The first
// error of a batch is thrown. Thread-safe: the index and source are only read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bagz/byte_source.h"
#include "bagz/errors.h"
#include "maps/int_map.h"

namespace sackli {

struct FoundValue {
  int64_t position = -1;        // index position; -1: key absent
  // The stored value without its crc32c; when `staged` is not empty the
  // bytes are staged.data() instead (a move of the struct moves them).
  const char* payload = nullptr;
  size_t payload_size = 0;
  uint64_t decoded_size = 0;    // bytes Decode writes
  std::string staged;           // owns `payload` when the source is unmapped
                                // or the frame has no content size (decoded)
  bool staged_decoded = false;  // `staged` holds the decoded value already
  // The crc32c is checked by Decode, which reads the value anyway: each
  // value then comes from memory once (Locate reads only its first bytes).
  bool crc_pending = false;
};

class MapLookup {
 public:
  // `index` and `source` must outlive the lookup; `source` is the whole map.
  // A value that decodes to more than `max_value_bytes` is refused
  // (kTooLarge) before anything is allocated for it.
  MapLookup(const MapIndex& index, const ByteSource& source, bool check_crc,
            uint64_t max_value_bytes = kUnlimitedRecordBytes)
      : index_(index),
        source_(source),
        check_crc_(check_crc),
        max_value_bytes_(max_value_bytes) {}

  // Step 1 for each of `keys[0, n)`, on up to `parallelism` threads.
  std::vector<FoundValue> Locate(const uint64_t* keys, size_t n,
                                 size_t parallelism) const;
  // Step 1 for the value at index `position` (for iteration by position).
  FoundValue LocateAt(uint32_t position) const;
  // Step 1 for the values at positions [first, first + n), on up to
  // `parallelism` threads (a scan of the map in index order).
  std::vector<FoundValue> LocateRange(uint32_t first, size_t n,
                                      size_t parallelism) const;
  // Step 1 for the value at `position` given its stored bytes (read by the
  // caller from Extent(position)); the bytes must outlive the result.
  FoundValue LocateIn(uint32_t position, const char* stored, size_t n) const;

  // Step 2: outputs[k] receives found[k].decoded_size bytes (outputs of
  // absent keys are ignored).
  void Decode(const std::vector<FoundValue>& found, char* const* outputs,
              size_t parallelism) const;
  void DecodeOne(const FoundValue& value, char* output) const;
  // Step 2 for found[first, end) on this thread (reads of the source not
  // guarded here: the caller holds a FaultScope).
  void DecodeRange(const std::vector<FoundValue>& found, char* const* outputs,
                   size_t first, size_t end) const;

  const ByteSource& source() const { return source_; }

 private:
  void CheckPosition(uint32_t position) const;  // kOutOfRange
  void Fill(FoundValue& value) const;
  void Check(FoundValue& value, const char* stored, size_t n) const;
  // Checks the crc32c of a located value (kCorruption on a mismatch).
  void CheckCrc(const FoundValue& value, const char* payload) const;
  // kTooLarge for the value at `position`, which decodes to `size_text` bytes.
  [[noreturn]] void ThrowTooLarge(uint32_t position, const std::string& size_text) const;
  void CheckDecodedSize(uint32_t position, uint64_t size) const {
    if (size > max_value_bytes_) ThrowTooLarge(position, std::to_string(size));
  }

  const MapIndex& index_;
  const ByteSource& source_;
  bool check_crc_;
  uint64_t max_value_bytes_;
};

// Step 2 started while the outputs are still being allocated: the caller
// sets outputs in order and publishes how many are set; pool threads decode
// each chunk of values once its outputs are all published. So the
// allocation (which the bindings do holding the GIL) and the decoding
// overlap. Example:
//   PublishedDecode decode(lookup, found, outputs.data(), parallelism);
//   for (k ...) { outputs[k] = Allocate(...); if (k % 256 == 255) decode.Publish(k + 1); }
//   decode.Finish();  // decodes what is left here; rethrows the first error
// Destroyed without Finish (the allocation failed), it stops the helpers
// and waits for them, so the outputs may then be freed.
class PublishedDecode {
 public:
  PublishedDecode(const MapLookup& lookup, const std::vector<FoundValue>& found,
                  char* const* outputs, size_t parallelism);
  ~PublishedDecode();
  PublishedDecode(const PublishedDecode&) = delete;
  PublishedDecode& operator=(const PublishedDecode&) = delete;

  // outputs[0, count) are set (count never decreases).
  void Publish(size_t count);
  // Publishes every output, decodes on this thread too, waits for the
  // helpers and rethrows the first error.
  void Finish();

 private:
  struct Shared;

  std::shared_ptr<Shared> shared_;
  bool finished_ = false;
};

}  // namespace sackli
