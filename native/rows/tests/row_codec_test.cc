// The row codec on hand-built Arrow C data: which schemas it holds, the
// documented byte layout, round trips (with offsets), projections, and
// hostile rows (every truncation, random bytes) giving corruption errors.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bagz/errors.h"
#include "rows/row_decode.h"
#include "rows/row_encode.h"
#include "rows/row_layout.h"

namespace sackli {
namespace {

// An ArrowSchema tree that owns its strings and children (never released
// through the C interface: the codec only reads schemas).
struct Schema {
  std::string format, name;
  std::vector<std::unique_ptr<Schema>> kids;
  std::vector<ArrowSchema*> kid_ptrs;
  ArrowSchema c{};

  Schema(std::string f, std::string n, std::vector<std::unique_ptr<Schema>> children = {})
      : format(std::move(f)), name(std::move(n)), kids(std::move(children)) {
    for (auto& kid : kids) kid_ptrs.push_back(&kid->c);
    c.format = format.c_str();
    c.name = name.c_str();
    c.n_children = static_cast<int64_t>(kids.size());
    c.children = kid_ptrs.empty() ? nullptr : kid_ptrs.data();
  }
};

std::unique_ptr<Schema> S(std::string f, std::string n,
                          std::vector<std::unique_ptr<Schema>> children = {}) {
  return std::make_unique<Schema>(std::move(f), std::move(n), std::move(children));
}

// An ArrowArray that points at buffers the test keeps alive.
struct Array {
  std::vector<const void*> buffers;
  std::vector<std::unique_ptr<Array>> kids;
  std::vector<ArrowArray*> kid_ptrs;
  ArrowArray c{};

  Array(int64_t length, int64_t offset, std::vector<const void*> bufs,
        std::vector<std::unique_ptr<Array>> children = {})
      : buffers(std::move(bufs)), kids(std::move(children)) {
    for (auto& kid : kids) kid_ptrs.push_back(&kid->c);
    c.length = length;
    c.offset = offset;
    c.n_buffers = static_cast<int64_t>(buffers.size());
    c.buffers = buffers.data();
    c.n_children = static_cast<int64_t>(kids.size());
    c.children = kid_ptrs.empty() ? nullptr : kid_ptrs.data();
  }
};

// Releases decoded batches at the end of a test.
struct Batches {
  std::vector<ArrowArray> arrays;
  ~Batches() {
    for (ArrowArray& a : arrays) {
      if (a.release != nullptr) a.release(&a);
    }
  }
};

// Columns: i int32 (nullable), s utf8, l list<int32>.
std::unique_ptr<Schema> ThreeColumns() {
  std::vector<std::unique_ptr<Schema>> item;
  item.push_back(S("i", "item"));
  std::vector<std::unique_ptr<Schema>> cols;
  cols.push_back(S("i", "i"));
  cols.push_back(S("u", "s"));
  cols.push_back(S("+l", "l", std::move(item)));
  return S("+s", "", std::move(cols));
}

// Data for ThreeColumns, 4 rows, the batch starting at row 1 (offset 1):
// i = [_, 7, null, 9], s = [_, "ab", "", "c"], l = [_, [1], null, [2, 3]].
struct ThreeColumnData {
  int32_t ints[4] = {100, 7, 0, 9};
  uint8_t int_validity = 0b1011;
  int32_t string_offsets[5] = {0, 1, 3, 3, 4};
  char chars[5] = "xabc";
  int32_t list_offsets[5] = {0, 1, 2, 2, 4};
  uint8_t list_validity = 0b1011;
  int32_t items[4] = {0, 1, 2, 3};
  std::unique_ptr<Array> batch;

  ThreeColumnData() {
    std::vector<std::unique_ptr<Array>> item;
    item.push_back(std::make_unique<Array>(4, 0, std::vector<const void*>{nullptr, items}));
    std::vector<std::unique_ptr<Array>> cols;
    cols.push_back(std::make_unique<Array>(4, 0, std::vector<const void*>{&int_validity, ints}));
    cols.push_back(std::make_unique<Array>(
        4, 0, std::vector<const void*>{nullptr, string_offsets, chars}));
    cols.push_back(std::make_unique<Array>(
        4, 0, std::vector<const void*>{&list_validity, list_offsets}, std::move(item)));
    batch = std::make_unique<Array>(3, 1, std::vector<const void*>{nullptr}, std::move(cols));
  }
};

std::vector<ArrowArray> Decode(const RowType& type, const EncodedRows& rows,
                               const std::vector<size_t>& columns) {
  std::vector<int64_t> offsets(rows.offsets.begin(), rows.offsets.end());
  return DecodeRows(type, rows.data.data(), rows.data.size(), offsets.data(),
                    offsets.size() - 1, columns, 2, RowSource{"t.bag", 10});
}

TEST(RowCodecTest, SaysWhichSchemasItHolds) {
  EXPECT_EQ(RowCodecUnsupported(ThreeColumns()->c), "");
  std::vector<std::unique_ptr<Schema>> map_cols;
  map_cols.push_back(S("+m", "m"));
  EXPECT_NE(RowCodecUnsupported(S("+s", "", std::move(map_cols))->c)
                .find("column 'm': map type '+m'"),
            std::string::npos);
  std::vector<std::unique_ptr<Schema>> view_cols;
  view_cols.push_back(S("vu", "v"));
  EXPECT_NE(RowCodecUnsupported(S("+s", "", std::move(view_cols))->c), "");
  EXPECT_NE(RowCodecUnsupported(S("i", "not a struct")->c), "");
  EXPECT_THROW(RowTypeOf(S("+ud:0", "")->c), Error);
}

TEST(RowCodecTest, LaysOutARowAsDocumented) {
  // One int32 column of 5: version, bitmap, the value.
  std::vector<std::unique_ptr<Schema>> cols;
  cols.push_back(S("i", "i"));
  const RowType type = RowTypeOf(S("+s", "", std::move(cols))->c);
  int32_t value = 5;
  std::vector<std::unique_ptr<Array>> arrays;
  arrays.push_back(std::make_unique<Array>(1, 0, std::vector<const void*>{nullptr, &value}));
  Array batch(1, 0, {nullptr}, std::move(arrays));
  const EncodedRows rows = EncodeRows(type, batch.c, 1);
  EXPECT_EQ(std::string(rows.data.begin(), rows.data.end()),
            std::string("\x01\x01\x05\x00\x00\x00", 6));
  EXPECT_EQ(rows.offsets, (std::vector<uint64_t>{0, 6}));
}

TEST(RowCodecTest, RoundTripsWithOffsetsAndNulls) {
  const auto schema = ThreeColumns();
  const RowType type = RowTypeOf(schema->c);
  ThreeColumnData data;
  const EncodedRows rows = EncodeRows(type, data.batch->c, 2);
  ASSERT_EQ(rows.offsets.size(), 4u);
  Batches out{Decode(type, rows, {0, 1, 2})};
  ASSERT_EQ(out.arrays.size(), 1u);
  const ArrowArray& batch = out.arrays[0];
  ASSERT_EQ(batch.length, 3);
  ASSERT_EQ(batch.n_children, 3);
  const ArrowArray& ints = *batch.children[0];
  EXPECT_EQ(ints.null_count, 1);
  const auto* int_values = static_cast<const int32_t*>(ints.buffers[1]);
  EXPECT_EQ(int_values[0], 7);
  EXPECT_EQ(int_values[2], 9);
  EXPECT_EQ(*static_cast<const uint8_t*>(ints.buffers[0]) & 0b111, 0b101);
  const ArrowArray& strings = *batch.children[1];
  const auto* string_offsets = static_cast<const int32_t*>(strings.buffers[1]);
  EXPECT_EQ(std::string(static_cast<const char*>(strings.buffers[2]), string_offsets[3]), "abc");
  EXPECT_EQ(string_offsets[1], 2);
  EXPECT_EQ(string_offsets[2], 2);
  const ArrowArray& lists = *batch.children[2];
  EXPECT_EQ(lists.null_count, 1);
  const auto* list_offsets = static_cast<const int32_t*>(lists.buffers[1]);
  EXPECT_EQ(list_offsets[3], 3);
  const auto* items = static_cast<const int32_t*>(lists.children[0]->buffers[1]);
  EXPECT_EQ(items[0], 1);
  EXPECT_EQ(items[1], 2);
  EXPECT_EQ(items[2], 3);
}

TEST(RowCodecTest, ProjectsColumns) {
  const RowType type = RowTypeOf(ThreeColumns()->c);
  ThreeColumnData data;
  const EncodedRows rows = EncodeRows(type, data.batch->c, 1);
  Batches out{Decode(type, rows, {2, 2})};
  ASSERT_EQ(out.arrays[0].n_children, 2);
  EXPECT_EQ(out.arrays[0].children[1]->length, 3);
  EXPECT_EQ(out.arrays[0].children[1]->null_count, 1);
  EXPECT_THROW(Decode(type, rows, {3}), Error);
}

// Decoding `row` as record 0 either succeeds or throws kCorruption naming
// the bag and record 10; `must_fail` says which is expected.
void ExpectCorruptOrValid(const RowType& type, const std::string& row, bool must_fail) {
  const int64_t offsets[2] = {0, static_cast<int64_t>(row.size())};
  try {
    Batches out{DecodeRows(type, row.data(), row.size(), offsets, 1, {0, 1, 2}, 1,
                           RowSource{"t.bag", 10})};
    EXPECT_FALSE(must_fail) << "a bad row decoded";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::kCorruption);
    EXPECT_EQ(std::string(error.what()).rfind("t.bag: record 10 is not a row", 0), 0u)
        << error.what();
  }
}

TEST(RowCodecTest, EveryTruncationIsCorruption) {
  const RowType type = RowTypeOf(ThreeColumns()->c);
  ThreeColumnData data;
  const EncodedRows rows = EncodeRows(type, data.batch->c, 1);
  const std::string row(rows.data.data() + rows.offsets[2], rows.data.data() + rows.offsets[3]);
  ExpectCorruptOrValid(type, row, false);
  for (size_t size = 0; size < row.size(); ++size) {
    ExpectCorruptOrValid(type, row.substr(0, size), true);
  }
}

TEST(RowCodecTest, ALengthOtherThanItsHeaderSaysIsCorruption) {
  const RowType type = RowTypeOf(ThreeColumns()->c);
  ThreeColumnData data;
  const EncodedRows rows = EncodeRows(type, data.batch->c, 1);
  const std::string row(rows.data.data() + rows.offsets[0], rows.data.data() + rows.offsets[1]);
  ExpectCorruptOrValid(type, row, false);
  ExpectCorruptOrValid(type, row + std::string(1, '\0'), true);   // a byte after the last end
  ExpectCorruptOrValid(type, row + std::string(4, '\x7f'), true);
  // A row of one int32 column read as rows of an int64 column, and back:
  // every offset lies inside the record, only the length tells.
  std::vector<std::unique_ptr<Schema>> narrow, wide;
  narrow.push_back(S("i", "x"));
  wide.push_back(S("l", "x"));
  const RowType int32_row = RowTypeOf(S("+s", "", std::move(narrow))->c);
  const RowType int64_row = RowTypeOf(S("+s", "", std::move(wide))->c);
  const std::string five("\x01\x01\x05\x00\x00\x00", 6);
  const int64_t offsets[2] = {0, 6};
  EXPECT_NO_THROW(Batches{DecodeRows(int32_row, five.data(), 6, offsets, 1, {0}, 1, {})});
  try {
    Batches out{DecodeRows(int64_row, five.data(), 6, offsets, 1, {0}, 1, RowSource{"t.bag", 3})};
    ADD_FAILURE() << "an int32 row decoded as an int64 row";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::kCorruption);
    EXPECT_NE(std::string(error.what()).find("t.bag: record 3 is not a row"), std::string::npos)
        << error.what();
  }
  const std::string wide_five = five + std::string(4, '\0');
  const int64_t wide_offsets[2] = {0, 10};
  EXPECT_THROW(Batches{DecodeRows(int32_row, wide_five.data(), 10, wide_offsets, 1, {0}, 1, {})},
               Error);
}

TEST(RowCodecTest, RandomBytesNeverCrash) {
  const RowType type = RowTypeOf(ThreeColumns()->c);
  std::mt19937 random(5);
  for (int trial = 0; trial < 2000; ++trial) {
    std::string row(1 + random() % 40, '\0');
    for (char& c : row) c = static_cast<char>(random() % 4 == 0 ? 0xff : random() % 8);
    row[0] = static_cast<char>(kRowFormatVersion);
    ExpectCorruptOrValid(type, row, false);
  }
}

}  // namespace
}  // namespace sackli
