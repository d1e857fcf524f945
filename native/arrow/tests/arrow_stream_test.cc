// The Arrow C stream export, consumed through its function pointers as an
// Arrow consumer would: schema, batches, bytes, release rules and errors.
#include "arrow/arrow_stream.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <numeric>

#include "bagz/errors.h"
#include "bagz/tests/test_bags.h"

namespace sackli {
namespace {

using testing::OpenBag;
using testing::OpenOptions;
using testing::TempDir;

// Owns an exported stream and releases it.
struct Stream {
  ArrowArrayStream c{};
  ~Stream() {
    if (c.release != nullptr) c.release(&c);
  }
};

// The records of one exported batch (a struct array of one large_binary).
std::vector<std::string> RecordsOf(const ArrowArray& batch) {
  EXPECT_EQ(batch.n_children, 1);
  EXPECT_EQ(batch.null_count, 0);
  const ArrowArray& field = *batch.children[0];
  EXPECT_EQ(field.length, batch.length);
  EXPECT_EQ(field.n_buffers, 3);
  EXPECT_EQ(field.buffers[0], nullptr);  // no validity bitmap
  const auto* offsets = static_cast<const int64_t*>(field.buffers[1]);
  const auto* data = static_cast<const char*>(field.buffers[2]);
  EXPECT_NE(data, nullptr);
  std::vector<std::string> records;
  for (int64_t k = 0; k < field.length; ++k) {
    EXPECT_LE(offsets[k], offsets[k + 1]);
    records.emplace_back(data + offsets[k], static_cast<size_t>(offsets[k + 1] - offsets[k]));
  }
  return records;
}

// Reads every batch; the record counts of the batches go to `lengths`.
std::vector<std::string> Drain(ArrowArrayStream& stream,
                               std::vector<int64_t>* lengths = nullptr) {
  std::vector<std::string> records;
  for (;;) {
    ArrowArray batch;
    const int status = stream.get_next(&stream, &batch);
    EXPECT_EQ(status, 0) << stream.get_last_error(&stream);
    if (status != 0 || batch.release == nullptr) break;
    for (std::string& r : RecordsOf(batch)) records.push_back(std::move(r));
    if (lengths) lengths->push_back(batch.length);
    batch.release(&batch);
    EXPECT_EQ(batch.release, nullptr);
  }
  return records;
}

TEST(ArrowStream, SchemaIsOneNonNullableLargeBinaryRecord) {
  TempDir dir;
  const std::string path = dir.File("x.bag");
  testing::WriteTailBag(path, {"a"});
  Stream stream;
  ExportRecordStream(BagBatchSource(OpenBag({path}), View{0, 1, 1}), &stream.c);
  ArrowSchema schema;
  ASSERT_EQ(stream.c.get_schema(&stream.c, &schema), 0);
  EXPECT_STREQ(schema.format, "+s");
  ASSERT_EQ(schema.n_children, 1);
  const ArrowSchema& field = *schema.children[0];
  EXPECT_STREQ(field.format, "Z");
  EXPECT_STREQ(field.name, "record");
  EXPECT_EQ(field.flags & ARROW_FLAG_NULLABLE, 0);
  EXPECT_EQ(field.n_children, 0);
  // A consumer may move the child out and release it on its own.
  ArrowSchema moved = *schema.children[0];
  schema.children[0]->release = nullptr;
  schema.release(&schema);
  EXPECT_EQ(schema.release, nullptr);
  EXPECT_STREQ(moved.name, "record");
  moved.release(&moved);
  EXPECT_EQ(moved.release, nullptr);
}

class ArrowBagStream : public ::testing::TestWithParam<testing::SourceCase> {};

TEST_P(ArrowBagStream, BatchesHoldEveryRecordOfTheViewInOrder) {
  TempDir dir;
  const std::vector<std::string> records = testing::MakeRecords(500);
  const auto bag = testing::OpenTwoShards(dir, GetParam(), records, 300);

  // About 20 records per batch; batches stop at the shard boundary.
  const uint64_t batch_bytes = 20 * bag->records_bytes() / bag->size();
  {
    Stream stream;
    ExportRecordStream(BagBatchSource(bag, View{0, 1, 500}, batch_bytes), &stream.c);
    std::vector<int64_t> lengths;
    EXPECT_EQ(Drain(stream.c, &lengths), records);
    ASSERT_GT(lengths.size(), 10u);
    int64_t total = 0;
    for (int64_t n : lengths) {
      EXPECT_LE(total < 300 && total + n > 300, false) << "a batch spans both shards";
      total += n;
    }
    // The end stays the end.
    ArrowArray after;
    ASSERT_EQ(stream.c.get_next(&stream.c, &after), 0);
    EXPECT_EQ(after.release, nullptr);
  }
  {
    // A slice, backwards: 450, 447, ..., 3.
    const View view{450, -3, 150};
    Stream stream;
    ExportRecordStream(BagBatchSource(bag, view, batch_bytes), &stream.c);
    std::vector<std::string> expected;
    for (uint64_t j = 0; j < view.length; ++j) expected.push_back(records[view.Global(j)]);
    EXPECT_EQ(Drain(stream.c), expected);
  }
  {
    Stream stream;
    ExportRecordStream(BagBatchSource(bag, View{0, 1, 0}), &stream.c);
    EXPECT_TRUE(Drain(stream.c).empty());
  }
}

INSTANTIATE_TEST_SUITE_P(Sources, ArrowBagStream, ::testing::ValuesIn(testing::kSourceCases),
                         testing::SourceCaseName);

TEST(ArrowStream, RawMappedBatchesAreLentFromTheMapping) {
  TempDir dir;
  const std::string path = dir.File("x.bag");
  testing::WriteTailBag(path, testing::MakeRecords(100));
  const auto bag = OpenBag({path});
  Stream stream;
  ExportRecordStream(BagBatchSource(bag, View{0, 1, 100}), &stream.c);
  ArrowArray batch;
  ASSERT_EQ(stream.c.get_next(&stream.c, &batch), 0);
  ASSERT_EQ(batch.length, 100);
  EXPECT_EQ(batch.children[0]->buffers[2], bag->shard(0).records().mapped());
  batch.release(&batch);
}

TEST(ArrowStream, BatchesOutliveTheStreamAndTheirParent) {
  TempDir dir;
  const std::string path = dir.File("x.bagz");
  const std::vector<std::string> records = testing::MakeRecords(50);
  testing::WriteTailBag(path, records);
  ArrowArray batch;
  {
    Stream stream;
    ExportRecordStream(BagBatchSource(OpenBag({path}), View{0, 1, 50}), &stream.c);
    ASSERT_EQ(stream.c.get_next(&stream.c, &batch), 0);
    ASSERT_NE(batch.release, nullptr);
  }  // the stream (and the bag with it) released
  EXPECT_EQ(RecordsOf(batch), records);
  // Move the child out, release the parent, then read and release the child.
  ArrowArray field = *batch.children[0];
  batch.children[0]->release = nullptr;
  batch.release(&batch);
  const auto* offsets = static_cast<const int64_t*>(field.buffers[1]);
  const auto* data = static_cast<const char*>(field.buffers[2]);
  EXPECT_EQ(std::string(data + offsets[49], offsets[50] - offsets[49]), records[49]);
  field.release(&field);
  EXPECT_EQ(field.release, nullptr);
}

// Batches given by the test: data, offsets (which may start above 0), or an
// error to throw.
class ScriptedSource : public RecordBatchSource {
 public:
  struct Step {
    std::string data;
    std::vector<int64_t> offsets;
    std::function<void()> fail;
  };
  explicit ScriptedSource(std::vector<Step> steps) : steps_(std::move(steps)) {}
  bool Next(RecordBatchData& batch) override {
    if (next_ == steps_.size()) return false;
    Step& step = steps_[next_++];
    if (step.fail) step.fail();
    auto data = std::make_shared<std::string>(std::move(step.data));
    batch.data = data->data();
    batch.owner = data;
    batch.offsets = step.offsets;
    return true;
  }

 private:
  std::vector<Step> steps_;
  size_t next_ = 0;
};

TEST(ArrowStream, OffsetsMayStartAboveZero) {
  Stream stream;
  std::vector<ScriptedSource::Step> steps;
  steps.push_back({"headerabcde", {6, 8, 8, 11}, nullptr});
  steps.push_back({"", {}, nullptr});  // no records at all
  ExportRecordStream(std::make_unique<ScriptedSource>(std::move(steps)), &stream.c);
  std::vector<int64_t> lengths;
  EXPECT_EQ(Drain(stream.c, &lengths), (std::vector<std::string>{"ab", "", "cde"}));
  EXPECT_EQ(lengths, (std::vector<int64_t>{3, 0}));
}

void ExpectStreamError(std::function<void()> fail, int expected_errno,
                       const std::string& message) {
  Stream stream;
  std::vector<ScriptedSource::Step> steps;
  steps.push_back({"ok", {0, 2}, nullptr});
  steps.push_back({"", {}, std::move(fail)});
  steps.push_back({"never", {0, 5}, nullptr});
  ExportRecordStream(std::make_unique<ScriptedSource>(std::move(steps)), &stream.c);
  EXPECT_EQ(stream.c.get_last_error(&stream.c), nullptr);
  ArrowArray batch;
  ASSERT_EQ(stream.c.get_next(&stream.c, &batch), 0);
  batch.release(&batch);
  EXPECT_EQ(stream.c.get_next(&stream.c, &batch), expected_errno);
  ASSERT_NE(stream.c.get_last_error(&stream.c), nullptr);
  EXPECT_EQ(std::string(stream.c.get_last_error(&stream.c)), message);
  // A failed stream stays failed.
  EXPECT_EQ(stream.c.get_next(&stream.c, &batch), expected_errno);
}

TEST(ArrowStream, SourceErrorsBecomeErrnoAndMessage) {
  ExpectStreamError([] { ThrowCorruption("/d/x.bag", 42, "bad frame"); }, EINVAL,
                    "/d/x.bag: bad frame (byte offset 42)");
  ExpectStreamError([] { ThrowOutOfRange("index 9 out of range"); }, EINVAL,
                    "index 9 out of range");
  ExpectStreamError([] { ThrowInvalidArgument("bad option"); }, EINVAL, "bad option");
  ExpectStreamError([] { throw std::bad_alloc(); }, ENOMEM, "out of memory reading records");
}

TEST(ArrowStream, CorruptRecordOfABagFailsTheStream) {
  TempDir dir;
  const std::string path = dir.File("x.bagz");
  std::string bytes = "not a zstd frame";
  bytes += testing::U64(bytes.size());
  testing::WriteFile(path, bytes);
  Stream stream;
  ExportRecordStream(BagBatchSource(OpenBag({path}), View{0, 1, 1}), &stream.c);
  ArrowArray batch;
  EXPECT_EQ(stream.c.get_next(&stream.c, &batch), EINVAL);
  const std::string message = stream.c.get_last_error(&stream.c);
  EXPECT_NE(message.find(path), std::string::npos) << message;
  EXPECT_NE(message.find("byte offset 0"), std::string::npos) << message;
}

}  // namespace
}  // namespace sackli
