// Record compression. A record of a .bagz file is one zstd frame carrying its
// content size; an empty record is zero bytes and never compressed. Contexts
// are kept per thread and reused; dictionaries are digested once and shared.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace sackli {

// A decoding or encoding failure of one record; callers add the file and
// offset and rethrow it as corruption.
class CodecError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A frame without its content size that decodes to more than the cap given
// to DecodeUnsized; callers name the record and the cap.
class DecodedOverLimit : public std::runtime_error {
 public:
  DecodedOverLimit() : std::runtime_error("decodes to more than the cap") {}
};

class ZstdDictionary;  // digested dictionary, shared across threads

// What the user asked for: detect by suffix, raw, or zstd.
struct CompressionChoice {
  // kLast: the last value, as in shard.h.
  enum class Mode { kAutoDetect = 0, kNone = 1, kZstd = 2, kLast = kZstd };
  Mode mode = Mode::kAutoDetect;
  int level = 3;
  std::string dictionary;
  // Store literals raw instead of Huffman-coding them: several times faster
  // for small binary records, where building a Huffman table per frame costs
  // more than it saves. Off by default (bagz's own bytes).
  bool raw_literals = false;
  // Give each frame zstd's content checksum (the low 32 bits of its XXH64),
  // which every zstd reader verifies: a flipped bit in a record raises
  // instead of returning wrong bytes. Off only for bagz's exact bytes.
  // Frames with a dictionary always carry it.
  bool checksum = true;
};

// Throws std::invalid_argument unless `level` is within libzstd's range
// (ZSTD_minCLevel() .. ZSTD_maxCLevel()). The one home of that rule and its
// message: Codec::Zstd checks it for C++ callers, and Python's
// CompressionZstd calls it (through the bindings) on construction.
void CheckZstdLevel(int level);
// The same refusal for a level spelled `level_text` that does not even fit
// an int (a Python integer, say).
[[noreturn]] void ThrowZstdLevelOutside(const std::string& level_text);

class Codec {
 public:
  // Raw records.
  static Codec None();
  // zstd frames; `dictionary` may be empty (no dictionary). `raw_literals`
  // and `checksum` as in CompressionChoice.
  static Codec Zstd(int level, const std::string& dictionary,
                    bool raw_literals = false, bool checksum = true);

  // The codec for each of `paths` under `choice`: auto-detection looks at
  // each file's own suffix. The dictionary is digested once for all.
  static std::vector<Codec> ForPaths(const std::vector<std::string>& paths,
                                     const CompressionChoice& choice);

  bool compressed() const { return compressed_; }
  int level() const { return level_; }
  bool raw_literals() const { return raw_literals_; }
  // Whether frames this codec writes carry a content checksum.
  bool checksum() const { return compressed_ && (checksum_ || dictionary_); }

  // Whether the stored record `src[0, n)` carries a checksum its decoding
  // verifies: a zstd frame with the Content_Checksum_flag; false for a raw
  // record, an empty one, or bytes too short to be a frame header.
  bool RecordHasChecksum(const char* src, size_t n) const;

  // Decoded size of the encoded record `src[0, n)`: its frame content size.
  // Returns kUnknownSize when the frame does not carry one. Throws CodecError
  // for a malformed header or an implausible size.
  static constexpr uint64_t kUnknownSize = ~uint64_t{0};
  uint64_t DecodedSize(const char* src, size_t n) const;

  // Decodes `src[0, n)` into exactly `dst_size` bytes at `dst`.
  void Decode(const char* src, size_t n, char* dst, size_t dst_size) const;

  // Decodes a frame whose size is not in its header, streaming: throws
  // DecodedOverLimit as soon as the output would pass `max_bytes`, so no
  // more than max_bytes + one chunk is ever allocated; std::bad_alloc when
  // the output cannot grow.
  std::string DecodeUnsized(const char* src, size_t n,
                            uint64_t max_bytes) const;

  // Appends the encoded form of `src[0, n)` to `out`; empty stays empty.
  void Encode(const char* src, size_t n, std::string& out) const;

  // The same frame as Encode, in a buffer of its own of zstd's bound that
  // is never zero-filled: of a large record's frame, only the pages the
  // frame takes are touched (Encode's string would fill the whole bound).
  // The buffer of `reuse` is taken when it is large enough: its pages are
  // in memory already (a fresh one page-faults in every page it takes).
  struct Frame {
    std::unique_ptr<char[]> bytes;
    size_t size = 0;
    size_t capacity = 0;
  };
  Frame EncodeFrame(const char* src, size_t n, Frame reuse) const;

 private:
  // Compresses `src[0, n)` (n > 0) into `dst`, which has room for zstd's
  // bound; returns the frame's size. Throws CodecError.
  size_t CompressInto(const char* src, size_t n, char* dst, size_t capacity) const;

  bool compressed_ = false;
  int level_ = 0;
  bool raw_literals_ = false;
  bool checksum_ = false;
  std::shared_ptr<const ZstdDictionary> dictionary_;
};

}  // namespace sackli
