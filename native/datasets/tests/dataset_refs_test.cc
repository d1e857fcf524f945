// refs.bag records (dataset_refs.h): the forms msgpack writes are read; every
// other byte string is refused, never misread.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "datasets/dataset_refs.h"

namespace sackli {
namespace {

std::vector<DatasetRef> Parse(const std::string& record, const std::vector<bool>& is_list,
                              bool* ok) {
  std::vector<DatasetRef> refs(is_list.size());
  *ok = ParseDatasetRefs(record.data(), record.size(), is_list, refs.data());
  return refs;
}

TEST(DatasetRefs, ReadsWhatBagsWrites) {
  // msgpack.packb([7, [300, 2], [], 70000]): image, words, clips, label.
  const std::string record("\x94\x07\x92\xcd\x01\x2c\x02\x90\xce\x00\x01\x11\x70", 13);
  bool ok = false;
  const auto refs = Parse(record, {false, true, true, false}, &ok);
  ASSERT_TRUE(ok);
  EXPECT_EQ(refs[0].start, 7u);
  EXPECT_EQ(refs[1].start, 300u);
  EXPECT_EQ(refs[1].length, 2u);
  EXPECT_EQ(refs[2].length, 0u);
  EXPECT_EQ(refs[3].start, 70000u);
}

TEST(DatasetRefs, ReadsEveryIntegerWidthAndWideArrays) {
  bool ok = false;
  // array 16 of one uint64, int8, int 64 (non-negative).
  auto refs = Parse(std::string("\xdc\x00\x03\xcf\x00\x00\x00\x01\x00\x00\x00\x00\xd0\x05"
                                "\xd3\x00\x00\x00\x00\x00\x00\x00\x09", 23),
                    {false, false, false}, &ok);
  ASSERT_TRUE(ok);
  EXPECT_EQ(refs[0].start, uint64_t{1} << 32);
  EXPECT_EQ(refs[1].start, 5u);
  EXPECT_EQ(refs[2].start, 9u);
}

TEST(DatasetRefs, RefusesAnythingElse) {
  const std::vector<bool> scalar_and_list = {false, true};
  const std::vector<std::string> refused = {
      std::string(),                                  // empty
      std::string("\x92\x01", 2),                     // truncated
      std::string("\x93\x01\x90\x02", 4),             // three refs for two fields
      std::string("\x91\x01", 2),                     // one ref for two fields
      std::string("\x92\x01\x90\x00", 4),             // trailing byte
      std::string("\x92\xff\x90", 3),                 // negative fixint
      std::string("\x92\xd0\xff\x90", 4),             // negative int 8
      std::string("\x92\xc3\x90", 3),                 // true
      std::string("\x92\xca\x00\x00\x00\x00\x90", 7), // float
      std::string("\x92\x90\x90", 3),                 // a list for the scalar
      std::string("\x92\x01\x01", 3),                 // an int for the list
      std::string("\x92\x01\x91\x01", 4),             // a list of one
      std::string("\x92\x01\x93\x01\x02\x03", 6),     // a list of three
      std::string("\x92\x01\x92\x01\xa1x", 6),        // a str inside
      std::string("\x92\x01\x92\x01\xcd\x01", 6),     // a truncated uint 16
      std::string("\x82\x01\x02\x03\x04", 5),         // a map
  };
  for (const std::string& record : refused) {
    bool ok = true;
    Parse(record, scalar_and_list, &ok);
    EXPECT_FALSE(ok) << testing::PrintToString(record);
  }
}

TEST(DatasetRefs, EveryPrefixOfAGoodRecordIsRefused) {
  const std::string record("\x94\x07\x92\xcd\x01\x2c\x02\x90\xce\x00\x01\x11\x70", 13);
  for (size_t n = 0; n < record.size(); ++n) {
    bool ok = true;
    Parse(record.substr(0, n), {false, true, true, false}, &ok);
    EXPECT_FALSE(ok) << n;
  }
}

}  // namespace
}  // namespace sackli
