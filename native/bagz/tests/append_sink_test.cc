// A writer streaming into an AppendSink: the bytes it hands on are those of
// a file written locally, only the limits stay on disk (SEPARATE: published
// as `limits.<name>`), and discarding leaves nothing.
#include "bagz/append_sink.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bagz/format.h"
#include "bagz/tests/test_bags.h"
#include "bagz/writer.h"

namespace sackli {
namespace {

using testing::ReadFile;
using testing::TempDir;
using testing::U64;

// Keeps what is handed on, in chunks, as an upload would receive it.
class MemorySink : public AppendSink {
 public:
  explicit MemorySink(std::vector<std::string>* chunks) : chunks_(chunks) {}
  void Append(const char* data, size_t n) override { buffer_.append(data, n); }
  void FlushBuffer() override {
    if (!buffer_.empty()) chunks_->push_back(buffer_);
    buffer_.clear();
  }
  void Close() override {}
  size_t buffered() const override { return buffer_.size(); }
  const std::string& path() const override { return path_; }

 private:
  std::vector<std::string>* chunks_;
  std::string buffer_;
  std::string path_ = "memory";
};

std::string Joined(const std::vector<std::string>& chunks) {
  std::string all;
  for (const std::string& chunk : chunks) all += chunk;
  return all;
}

WriterConfig Options(LimitsPlacement placement, Codec codec = Codec::None()) {
  WriterConfig options;
  options.placement = placement;
  options.codec = std::move(codec);
  return options;
}

TEST(StreamedWriter, TailBagStreamsTheBytesOfALocalFile) {
  for (const bool compressed : {false, true}) {
    TempDir dir;
    const Codec codec = compressed ? Codec::Zstd(3, "") : Codec::None();
    const std::string local = dir.File(compressed ? "local.bagz" : "local.bag");
    const std::string spooled = dir.File(compressed ? "s.bagz" : "s.bag");
    std::vector<std::string> chunks;
    {
      Writer file(local, Options(LimitsPlacement::kTail, codec));
      Writer streamed(spooled, Options(LimitsPlacement::kTail, codec),
                      std::make_unique<MemorySink>(&chunks));
      EXPECT_TRUE(streamed.streamed());
      for (Writer* writer : {&file, &streamed}) {
        writer->Write("abcdef");
        writer->WriteMany({"", "123", std::string(3000, 'c')});
      }
      file.Close();
      streamed.Close();
    }
    EXPECT_EQ(Joined(chunks), ReadFile(local));
    // Nothing of the streamed bag is left on disk.
    EXPECT_EQ(dir.List(), std::vector<std::string>{compressed ? "local.bagz" : "local.bag"});
  }
}

TEST(StreamedWriter, SeparateKeepsOnlyTheLimitsLocally) {
  TempDir dir;
  std::vector<std::string> chunks;
  Writer writer(dir.File("x.bag"), Options(LimitsPlacement::kSeparate),
                std::make_unique<MemorySink>(&chunks));
  writer.Write("abcdef");
  writer.WriteMany({"123", "catcat"});
  writer.Close();
  EXPECT_EQ(Joined(chunks), "abcdef123catcat");
  EXPECT_EQ(dir.List(), std::vector<std::string>{"limits.x.bag"});
  EXPECT_EQ(ReadFile(dir.File("limits.x.bag")), U64(6) + U64(9) + U64(15));
}

TEST(StreamedWriter, EmptyBagStreamsNothing) {
  TempDir dir;
  std::vector<std::string> chunks;
  Writer(dir.File("x.bagz"), Options(LimitsPlacement::kTail, Codec::Zstd(3, "")),
         std::make_unique<MemorySink>(&chunks))
      .Close();
  EXPECT_EQ(Joined(chunks), "");
  EXPECT_TRUE(dir.List().empty());
}

TEST(StreamedWriter, DiscardHandsNothingMoreOnAndLeavesNoFiles) {
  TempDir dir;
  std::vector<std::string> chunks;
  Writer writer(dir.File("x.bag"), Options(LimitsPlacement::kTail),
                std::make_unique<MemorySink>(&chunks));
  writer.Write("abc");
  writer.Discard();
  EXPECT_EQ(Joined(chunks), "");
  EXPECT_TRUE(dir.List().empty());
}

TEST(StreamedWriter, FlushHandsTheRecordsOn) {
  TempDir dir;
  std::vector<std::string> chunks;
  Writer writer(dir.File("x.bag"), Options(LimitsPlacement::kTail),
                std::make_unique<MemorySink>(&chunks));
  writer.WriteMany({"ab", "c"});
  writer.Flush();
  EXPECT_EQ(Joined(chunks), "abc");
  writer.Close();
  EXPECT_EQ(Joined(chunks), "abc" + U64(2) + U64(3));
}

}  // namespace
}  // namespace sackli
