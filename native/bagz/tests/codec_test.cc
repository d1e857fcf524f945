// The zstd codec's literal modes: raw literals give different frames that
// decode to the same bytes, with or without a dictionary, and leave the
// thread's context ready for plain Huffman frames again.
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

}  // namespace
}  // namespace sackli
