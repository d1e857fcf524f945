// The zstd codec's literal modes: raw literals give different frames that
// decode to the same bytes, with or without a dictionary, and leave the
// thread's context ready for plain Huffman frames again. Its checksums: on
// by default, and no flipped bit decodes to other bytes.
#include "bagz/codec.h"

#include <gtest/gtest.h>
#include <zstd.h>

#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace sackli {
namespace {

// Text over four letters: Huffman codes each literal in about two bits.
std::string SkewedText(size_t n, uint32_t seed = 12345) {
  std::mt19937 random(seed);
  std::string text;
  for (size_t i = 0; i < n; ++i) text.push_back("acgt"[random() & 3]);
  return text;
}

std::string Encoded(const Codec& codec, const std::string& record) {
  std::string out;
  codec.Encode(record.data(), record.size(), out);
  return out;
}

std::string Decoded(const Codec& codec, const std::string& frame) {
  std::string out(codec.DecodedSize(frame.data(), frame.size()), '\0');
  codec.Decode(frame.data(), frame.size(), out.data(), out.size());
  return out;
}

TEST(CodecTest, RawLiteralsAreOtherValidFrames) {
  const std::string record = SkewedText(400);
  const Codec huffman = Codec::Zstd(3, "");
  const Codec raw = Codec::Zstd(3, "", /*raw_literals=*/true);
  const std::string before = Encoded(huffman, record);
  const std::string raw_frame = Encoded(raw, record);
  EXPECT_GT(raw_frame.size(), before.size());
  EXPECT_EQ(Decoded(huffman, raw_frame), record);
  // The raw frame left no parameter behind: the default frame is unchanged.
  EXPECT_EQ(Encoded(huffman, record), before);
  EXPECT_TRUE(raw.raw_literals());
  EXPECT_FALSE(huffman.raw_literals());
}

TEST(CodecTest, RawLiteralsWithADictionary) {
  const std::string dictionary = SkewedText(4000);
  const std::string record = SkewedText(4000, 777);
  const Codec raw = Codec::Zstd(3, dictionary, /*raw_literals=*/true);
  const Codec huffman = Codec::Zstd(3, dictionary);
  const std::string frame = Encoded(raw, record);
  EXPECT_NE(frame, Encoded(huffman, record));
  EXPECT_EQ(Decoded(huffman, frame), record);
}

TEST(CodecTest, ChoiceCarriesRawLiteralsToEveryPath) {
  CompressionChoice choice;
  choice.raw_literals = true;
  const std::vector<Codec> codecs = Codec::ForPaths({"a.bagz", "b.bag"}, choice);
  EXPECT_TRUE(codecs[0].compressed());
  EXPECT_TRUE(codecs[0].raw_literals());
  EXPECT_FALSE(codecs[1].compressed());
}

// Half random bytes, half four-letter text: compressible, but not to nothing.
std::string MixedBytes(size_t n, uint32_t seed) {
  std::mt19937 random(seed);
  std::string bytes = SkewedText(n, seed + 1);
  for (size_t i = 0; i < n; i += 2) bytes[i] = static_cast<char>(random());
  return bytes;
}

std::string FrameOf(const Codec& codec, const std::string& record,
                    Codec::Frame reuse = Codec::Frame()) {
  const Codec::Frame frame = codec.EncodeFrame(record.data(), record.size(), std::move(reuse));
  return std::string(frame.bytes.get(), frame.size);
}

// The writer compresses large records into frames of their own: they must
// be Encode's bytes (the format, and what bagz writes, do not depend on the
// record's size), for every kind of codec.
TEST(CodecTest, FramesAreEncodesBytes) {
  const std::string record = MixedBytes(300000, 5);
  for (const Codec& codec : {Codec::Zstd(3, ""), Codec::Zstd(-3, ""), Codec::Zstd(3, "", true),
                             Codec::Zstd(3, SkewedText(4000)), Codec::None()}) {
    EXPECT_EQ(FrameOf(codec, record), Encoded(codec, record));
    EXPECT_EQ(FrameOf(codec, ""), "");
  }
  EXPECT_EQ(FrameOf(Codec::None(), record), record);
  // A buffer reused from a larger frame (its old bytes past the new frame
  // are no part of it), or too small to be reused.
  const Codec codec = Codec::Zstd(3, "");
  const std::string small = MixedBytes(1000, 6);
  EXPECT_EQ(FrameOf(codec, small, codec.EncodeFrame(record.data(), record.size(), Codec::Frame())),
            Encoded(codec, small));
  EXPECT_EQ(FrameOf(codec, record, codec.EncodeFrame(small.data(), small.size(), Codec::Frame())),
            Encoded(codec, record));
}

// A C++ caller gets the one level check (the rule Python's CompressionZstd
// uses too): libzstd's range, with the bounds in its message.
TEST(CodecTest, ZstdLevelOutsideLibzstdRangeIsRefused) {
  EXPECT_NO_THROW(CheckZstdLevel(ZSTD_maxCLevel()));
  EXPECT_NO_THROW(CheckZstdLevel(ZSTD_minCLevel()));
  try {
    Codec::Zstd(ZSTD_maxCLevel() + 1, "");
    FAIL() << "level above the range accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()),
              "zstd level " + std::to_string(ZSTD_maxCLevel() + 1) + " is outside [" +
                  std::to_string(ZSTD_minCLevel()) + ", " +
                  std::to_string(ZSTD_maxCLevel()) + "]");
  }
  EXPECT_THROW(CheckZstdLevel(ZSTD_minCLevel() - 1), std::invalid_argument);
}

// A frame without its content size (zstd's streaming API without a pledged
// size), decoding to `record`.
std::string UnsizedFrame(const std::string& record) {
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 0);
  std::string out(ZSTD_compressBound(record.size()), '\0');
  ZSTD_outBuffer output{out.data(), out.size(), 0};
  ZSTD_inBuffer input{record.data(), record.size(), 0};
  const size_t left = ZSTD_compressStream2(cctx, &output, &input, ZSTD_e_end);
  ZSTD_freeCCtx(cctx);
  EXPECT_EQ(left, 0u);
  out.resize(output.pos);
  return out;
}

// Issue 49: an unsized frame decodes in a stream that stops one byte past
// the cap, and leaves the thread's context clean for the next frame.
TEST(CodecTest, UnsizedFramesStopAtTheCap) {
  const Codec codec = Codec::Zstd(3, "");
  const std::string record(1 << 20, 'x');
  const std::string frame = UnsizedFrame(record);
  ASSERT_EQ(codec.DecodedSize(frame.data(), frame.size()), Codec::kUnknownSize);
  EXPECT_THROW(codec.DecodeUnsized(frame.data(), frame.size(), record.size() - 1),
               DecodedOverLimit);
  EXPECT_THROW(codec.DecodeUnsized(frame.data(), frame.size(), 0), DecodedOverLimit);
  EXPECT_EQ(codec.DecodeUnsized(frame.data(), frame.size(), record.size()), record);
  EXPECT_EQ(codec.DecodeUnsized(frame.data(), frame.size(), ~uint64_t{0}), record);
}

// --- zstd content checksums: written by default, verified on every decode
// path, absent when turned off (bagz's frames).

// Text with some repetition: frames with compressed blocks, not raw ones.
std::string RepetitiveText(size_t n, uint32_t seed) {
  std::mt19937 random(seed);
  std::string bytes;
  while (bytes.size() < n) {
    bytes += "record " + std::to_string(random() % 1000) + " of the bag; ";
  }
  bytes.resize(n);
  return bytes;
}

// Decodes `frame` as the readers do: size from the header, then the frame.
std::string DecodedAsReaders(const Codec& codec, const std::string& frame) {
  const uint64_t size = codec.DecodedSize(frame.data(), frame.size());
  if (size == Codec::kUnknownSize) {
    return codec.DecodeUnsized(frame.data(), frame.size(), uint64_t{1} << 30);
  }
  std::string out(size, '\0');
  codec.Decode(frame.data(), frame.size(), out.data(), out.size());
  return out;
}

TEST(CodecChecksumTest, OnByDefaultAndOffOnRequest) {
  const std::string record = RepetitiveText(1024, 1);
  const Codec checked = Codec::Zstd(3, "");
  const Codec unchecked = Codec::Zstd(3, "", false, /*checksum=*/false);
  const std::string with = Encoded(checked, record);
  const std::string without = Encoded(unchecked, record);
  EXPECT_TRUE(checked.checksum());
  EXPECT_FALSE(unchecked.checksum());
  EXPECT_TRUE(checked.RecordHasChecksum(with.data(), with.size()));
  EXPECT_FALSE(checked.RecordHasChecksum(without.data(), without.size()));
  // The same frame plus 4 bytes of checksum; both decode with either codec.
  EXPECT_EQ(with.size(), without.size() + 4);
  EXPECT_EQ(DecodedAsReaders(unchecked, with), record);
  EXPECT_EQ(DecodedAsReaders(checked, without), record);
  // Without a checksum the frame is libzstd's plain one-shot frame (bagz's).
  std::string plain(ZSTD_compressBound(record.size()), '\0');
  plain.resize(ZSTD_compress(plain.data(), plain.size(), record.data(),
                             record.size(), 3));
  EXPECT_EQ(without, plain);
}

TEST(CodecChecksumTest, ChoiceCarriesTheChecksum) {
  CompressionChoice choice;
  EXPECT_TRUE(Codec::ForPaths({"a.bagz"}, choice)[0].checksum());
  choice.checksum = false;
  EXPECT_FALSE(Codec::ForPaths({"a.bagz"}, choice)[0].checksum());
  EXPECT_FALSE(Codec::ForPaths({"a.bag"}, choice)[0].checksum());
  // A dictionary always brings one.
  choice.dictionary = RepetitiveText(2000, 9);
  EXPECT_TRUE(Codec::ForPaths({"a.bagz"}, choice)[0].checksum());
}

TEST(CodecChecksumTest, RawLiteralsKeepTheirOwnChecksumChoice) {
  const std::string record = RepetitiveText(1024, 2);
  const Codec raw = Codec::Zstd(3, "", /*raw_literals=*/true, /*checksum=*/false);
  const std::string frame = Encoded(raw, record);
  EXPECT_FALSE(raw.RecordHasChecksum(frame.data(), frame.size()));
  const Codec raw_checked = Codec::Zstd(3, "", true);
  const std::string checked = Encoded(raw_checked, record);
  EXPECT_TRUE(raw_checked.RecordHasChecksum(checked.data(), checked.size()));
  EXPECT_EQ(DecodedAsReaders(raw, checked), record);
}

TEST(CodecChecksumTest, AMismatchSaysSo) {
  const Codec codec = Codec::Zstd(3, "");
  std::string frame = Encoded(codec, RepetitiveText(1024, 3));
  frame.back() ^= 1;  // the checksum's last byte
  try {
    DecodedAsReaders(codec, frame);
    FAIL() << "a frame with a wrong checksum decoded";
  } catch (const CodecError& e) {
    EXPECT_NE(std::string(e.what()).find("content checksum does not match"),
              std::string::npos)
        << e.what();
  }
}

// Every single-bit flip of checksummed frames (sized, large, unsized, with
// raw literals) either fails to decode or decodes to the record itself,
// which the checksum proves: never to other bytes. (A few bits of zstd's
// table descriptions, and an unsized frame's window size, can change without
// changing what the frame decodes to: about 1 bit in 500 of a 1 KiB record.)
TEST(CodecChecksumTest, NoBitFlipGivesOtherBytes) {
  struct Case {
    Codec codec;
    std::string record;
    bool unsized;
  };
  std::vector<Case> cases = {
      {Codec::Zstd(3, ""), RepetitiveText(1024, 4), false},
      {Codec::Zstd(3, ""), RepetitiveText(300 * 1024, 5), false},
      {Codec::Zstd(3, "", /*raw_literals=*/true), RepetitiveText(1024, 6), false},
      {Codec::Zstd(1, ""), RepetitiveText(1024, 7), true},
  };
  for (const Case& c : cases) {
    std::string frame;
    if (c.unsized) {
      // A streamed frame: no content size in its header.
      ZSTD_CCtx* cctx = ZSTD_createCCtx();
      ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
      ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 0);
      frame.resize(ZSTD_compressBound(c.record.size()));
      frame.resize(ZSTD_compress2(cctx, frame.data(), frame.size(),
                                  c.record.data(), c.record.size()));
      ZSTD_freeCCtx(cctx);
      ASSERT_EQ(c.codec.DecodedSize(frame.data(), frame.size()),
                Codec::kUnknownSize);
    } else {
      frame = Encoded(c.codec, c.record);
    }
    ASSERT_EQ(DecodedAsReaders(c.codec, frame), c.record);
    // Every bit of a small frame; of the large one, 4,000 spread over it.
    const size_t bits = frame.size() * 8;
    const size_t step = bits > 4000 ? bits / 4000 : 1;
    size_t flips = 0, harmless = 0;
    for (size_t bit = 0; bit < bits; bit += step) {
      std::string flipped = frame;
      flipped[bit / 8] ^= static_cast<char>(1 << (bit % 8));
      bool failed = false;
      std::string decoded;
      try {
        decoded = DecodedAsReaders(c.codec, flipped);
      } catch (const CodecError&) {
        failed = true;
      }
      if (!failed) {
        EXPECT_EQ(decoded, c.record)
            << "bit " << bit << " of a " << frame.size() << "-byte frame";
        ++harmless;
      }
      ++flips;
    }
    EXPECT_LT(harmless * 100, flips) << "of " << frame.size() << " bytes";
  }
}

}  // namespace
}  // namespace sackli
