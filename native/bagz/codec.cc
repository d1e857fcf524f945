#include "bagz/codec.h"

// For ZSTD_c_literalCompressionMode, an experimental parameter (stable in
// zstd since 1.5.0; set through the exported ZSTD_CCtx_setParameter, so a
// shared libzstd works as well as the compiled-in one).
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>
#include <zstd_errors.h>

#include <algorithm>

#include "bagz/format.h"

namespace sackli {

class ZstdDictionary {
 public:
  ZstdDictionary(const std::string& bytes, int level)
      : cdict_(ZSTD_createCDict(bytes.data(), bytes.size(), level)),
        ddict_(ZSTD_createDDict(bytes.data(), bytes.size())) {
    if (cdict_ == nullptr || ddict_ == nullptr) {
      throw std::invalid_argument("zstd could not load the dictionary");
    }
  }
  ~ZstdDictionary() {
    ZSTD_freeCDict(cdict_);
    ZSTD_freeDDict(ddict_);
  }
  ZstdDictionary(const ZstdDictionary&) = delete;
  ZstdDictionary& operator=(const ZstdDictionary&) = delete;

  const ZSTD_CDict* cdict() const { return cdict_; }
  const ZSTD_DDict* ddict() const { return ddict_; }

 private:
  ZSTD_CDict* cdict_;
  ZSTD_DDict* ddict_;
};

namespace {

// ZSTD_c_literalCompressionMode's "store literals raw" (zstd 1.4 named it
// ZSTD_lcm_uncompressed; both are 2).
#if ZSTD_VERSION_NUMBER >= 10500
constexpr int kRawLiterals = ZSTD_ps_disable;
#else
constexpr int kRawLiterals = ZSTD_lcm_uncompressed;
#endif

// One decompression and one compression context per thread, never freed
// per record.
struct ThreadContexts {
  ZSTD_DCtx* dctx = ZSTD_createDCtx();
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ~ThreadContexts() {
    ZSTD_freeDCtx(dctx);
    ZSTD_freeCCtx(cctx);
  }
};

ThreadContexts& Contexts() {
  thread_local ThreadContexts contexts;
  if (contexts.dctx == nullptr || contexts.cctx == nullptr) {
    throw std::bad_alloc();
  }
  return contexts;
}

// A zstd block of at most 128 KiB costs at least 4 encoded bytes (3 bytes of
// header + 1 RLE byte), so no valid frame decodes to more than this. A larger
// header value is corruption, caught before anything is allocated for it.
uint64_t MaxDecodedSize(size_t encoded_size) {
  return (static_cast<uint64_t>(encoded_size) / 4 + 1) * ZSTD_BLOCKSIZE_MAX;
}

// Bits of a frame header's descriptor (RFC 8878, 3.1.1.1.1).
constexpr unsigned kUnusedBit = 0x10;
constexpr unsigned kChecksumFlag = 0x04;

// Whether a frame header (magic number first, at least 5 bytes) holds a
// Frame_Content_Size field.
bool HasContentSizeField(const char* frame) {
  const auto descriptor = static_cast<unsigned char>(frame[4]);
  const bool single_segment = (descriptor >> 5) & 1;
  return (descriptor >> 6) != 0 || single_segment;
}

// zstd ignores this header bit and never sets it: set, it can only be a
// flipped bit, which the checksum (over the content) would not see.
void CheckUnusedBit(const char* src, size_t n) {
  if (n >= 5 && (static_cast<unsigned char>(src[4]) & kUnusedBit) != 0) {
    throw CodecError("zstd frame header has its unused bit set");
  }
}

// The CodecError of a failed decoding; a checksum that does not match says
// so plainly (zstd's "Restored data doesn't match checksum").
[[noreturn]] void ThrowZstdError(size_t result) {
  if (ZSTD_getErrorCode(result) == ZSTD_error_checksum_wrong) {
    throw CodecError(
        "its zstd content checksum does not match: the stored bytes are not "
        "the ones written");
  }
  throw CodecError(std::string("zstd: ") + ZSTD_getErrorName(result));
}

}  // namespace

Codec Codec::None() { return Codec(); }

std::vector<Codec> Codec::ForPaths(const std::vector<std::string>& paths,
                                   const CompressionChoice& choice) {
  using Mode = CompressionChoice::Mode;
  const Codec zstd = choice.mode == Mode::kNone
                         ? None()
                         : Zstd(choice.level, choice.dictionary,
                                choice.raw_literals, choice.checksum);
  std::vector<Codec> codecs;
  codecs.reserve(paths.size());
  for (const std::string& path : paths) {
    const bool compressed =
        choice.mode == Mode::kZstd ||
        (choice.mode == Mode::kAutoDetect && HasZstdSuffix(path));
    codecs.push_back(compressed ? zstd : None());
  }
  return codecs;
}

void ThrowZstdLevelOutside(const std::string& level_text) {
  throw std::invalid_argument("zstd level " + level_text + " is outside [" +
                              std::to_string(ZSTD_minCLevel()) + ", " +
                              std::to_string(ZSTD_maxCLevel()) + "]");
}

void CheckZstdLevel(int level) {
  if (level < ZSTD_minCLevel() || level > ZSTD_maxCLevel()) {
    ThrowZstdLevelOutside(std::to_string(level));
  }
}

Codec Codec::Zstd(int level, const std::string& dictionary,
                  bool raw_literals, bool checksum) {
  CheckZstdLevel(level);
  Codec codec;
  codec.compressed_ = true;
  codec.level_ = level;
  codec.raw_literals_ = raw_literals;
  codec.checksum_ = checksum;
  if (!dictionary.empty()) {
    codec.dictionary_ = std::make_shared<const ZstdDictionary>(dictionary, level);
  }
  return codec;
}

uint64_t Codec::DecodedSize(const char* src, size_t n) const {
  if (!compressed_ || n == 0) return n;
  // A stored record is exactly one zstd frame: no skippable frame, no second
  // frame, no bytes after it.
  if (n < 4 || LoadU32(src) != ZSTD_MAGICNUMBER) {
    throw CodecError("not a zstd frame");
  }
  const unsigned long long size = ZSTD_getFrameContentSize(src, n);
  if (size == ZSTD_CONTENTSIZE_ERROR) {
    throw CodecError("not a zstd frame (bad or truncated frame header)");
  }
  const size_t frame_bytes = ZSTD_findFrameCompressedSize(src, n);
  if (ZSTD_isError(frame_bytes)) {
    throw CodecError(std::string("zstd: ") + ZSTD_getErrorName(frame_bytes));
  }
  if (frame_bytes != n) {
    throw CodecError("zstd: " + std::to_string(n - frame_bytes) +
                     " bytes after the end of the frame");
  }
  CheckUnusedBit(src, n);
  // zstd reports "unknown" both for a header without a content size and for
  // one whose 8-byte field holds 2^64 - 1: only the first may be decoded
  // without a size (RFC 8878, 3.1.1.1.1: the field is there when the
  // Frame_Content_Size_flag is set or the frame is a single segment).
  if (size == ZSTD_CONTENTSIZE_UNKNOWN && !HasContentSizeField(src)) {
    return kUnknownSize;
  }
  if (size > MaxDecodedSize(n)) {
    throw CodecError("zstd frame header claims " + std::to_string(size) +
                     " bytes, impossible for a " + std::to_string(n) +
                     "-byte frame");
  }
  return size;
}

bool Codec::RecordHasChecksum(const char* src, size_t n) const {
  return compressed_ && n >= 5 &&
         (static_cast<unsigned char>(src[4]) & kChecksumFlag) != 0;
}

void Codec::Decode(const char* src, size_t n, char* dst,
                   size_t dst_size) const {
  if (!compressed_) {
    if (n != dst_size) throw CodecError("record size mismatch");
    if (n > 0) std::copy(src, src + n, dst);
    return;
  }
  if (n == 0) {
    if (dst_size != 0) throw CodecError("record size mismatch");
    return;
  }
  CheckUnusedBit(src, n);
  // A frame that claims 0 bytes is still decoded: it must hold nothing.
  char nothing;
  if (dst_size == 0) dst = &nothing;
  ZSTD_DCtx* dctx = Contexts().dctx;
  const size_t result =
      dictionary_ ? ZSTD_decompress_usingDDict(dctx, dst, dst_size, src, n,
                                               dictionary_->ddict())
                  : ZSTD_decompressDCtx(dctx, dst, dst_size, src, n);
  if (ZSTD_isError(result)) ThrowZstdError(result);
  if (result != dst_size) {
    throw CodecError("zstd frame decoded to " + std::to_string(result) +
                     " bytes, its header says " + std::to_string(dst_size));
  }
}

std::string Codec::DecodeUnsized(const char* src, size_t n,
                                 uint64_t max_bytes) const {
  CheckUnusedBit(src, n);
  ZSTD_DCtx* dctx = Contexts().dctx;
  // The context is left clean however this returns or throws (bad_alloc
  // included), for the next record decoded on this thread.
  struct ResetOnExit {
    ZSTD_DCtx* dctx;
    ~ResetOnExit() { ZSTD_DCtx_reset(dctx, ZSTD_reset_session_and_parameters); }
  } reset{dctx};
  ZSTD_DCtx_reset(dctx, ZSTD_reset_session_and_parameters);
  if (dictionary_) ZSTD_DCtx_refDDict(dctx, dictionary_->ddict());
  std::string out;
  const uint64_t limit = MaxDecodedSize(n);
  ZSTD_inBuffer in{src, n, 0};
  size_t ret = 1;
  while (ret != 0) {
    const size_t old = out.size();
    if (old > max_bytes) throw DecodedOverLimit();
    const size_t chunk = ZSTD_DStreamOutSize();
    if (old + chunk > limit + chunk) {
      throw CodecError("zstd frame decodes to more than its size allows");
    }
    // Never past the cap by more than one byte: decoding stops there.
    const uint64_t left = max_bytes - old;  // old <= max_bytes
    const size_t room = left >= chunk ? chunk : static_cast<size_t>(left) + 1;
    out.resize(old + room);
    ZSTD_outBuffer outb{out.data() + old, room, 0};
    ret = ZSTD_decompressStream(dctx, &outb, &in);
    out.resize(old + outb.pos);
    if (ZSTD_isError(ret)) ThrowZstdError(ret);
    if (out.size() > max_bytes) throw DecodedOverLimit();
    if (ret != 0 && in.pos == in.size && outb.pos < room) {
      throw CodecError("zstd: truncated frame");
    }
  }
  if (in.pos != in.size) throw CodecError("zstd: trailing bytes after frame");
  return out;
}

size_t Codec::CompressInto(const char* src, size_t n, char* dst,
                           size_t capacity) const {
  ZSTD_CCtx* cctx = Contexts().cctx;
  size_t result;
  if (dictionary_ || raw_literals_ || checksum_) {
    // Parameters beyond the level need the advanced API; the context is
    // reset after so the plain path below (bagz's bytes) starts from
    // defaults.
    ZSTD_CCtx_reset(cctx, ZSTD_reset_session_and_parameters);
    if (dictionary_) {
      // With a dictionary the frame always gets a checksum: a raw-content
      // dictionary leaves no ID in the frame, and only the checksum lets a
      // reader given the wrong dictionary fail instead of returning wrong
      // bytes.
      ZSTD_CCtx_refCDict(cctx, dictionary_->cdict());
    } else {
      ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, level_);
    }
    if (dictionary_ || checksum_) {
      ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
    }
    if (raw_literals_) {
      ZSTD_CCtx_setParameter(cctx, ZSTD_c_literalCompressionMode,
                             kRawLiterals);
    }
    result = ZSTD_compress2(cctx, dst, capacity, src, n);
    ZSTD_CCtx_reset(cctx, ZSTD_reset_session_and_parameters);
  } else {
    result = ZSTD_compressCCtx(cctx, dst, capacity, src, n, level_);
  }
  if (ZSTD_isError(result)) {
    throw CodecError(std::string("zstd: ") + ZSTD_getErrorName(result));
  }
  return result;
}

void Codec::Encode(const char* src, size_t n, std::string& out) const {
  if (!compressed_) {
    out.append(src, n);
    return;
  }
  if (n == 0) return;
  const size_t old = out.size();
  out.resize(old + ZSTD_compressBound(n));
  try {
    out.resize(old + CompressInto(src, n, out.data() + old, out.size() - old));
  } catch (...) {
    out.resize(old);
    throw;
  }
}

Codec::Frame Codec::EncodeFrame(const char* src, size_t n, Frame reuse) const {
  Frame frame = std::move(reuse);
  frame.size = 0;
  if (n == 0) return frame;
  const size_t needed = compressed_ ? ZSTD_compressBound(n) : n;
  if (frame.bytes == nullptr || frame.capacity < needed) {
    frame.bytes.reset();  // before the new one: never both at once
    frame.bytes.reset(new char[needed]);  // default-initialized: untouched
    frame.capacity = needed;
  }
  if (compressed_) {
    frame.size = CompressInto(src, n, frame.bytes.get(), frame.capacity);
  } else {
    std::copy(src, src + n, frame.bytes.get());
    frame.size = n;
  }
  return frame;
}

}  // namespace sackli
