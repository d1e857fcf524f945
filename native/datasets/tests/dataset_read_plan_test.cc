// The read rules of a dataset mask (dataset_read_plan.h): which fields a
// mask selects, which it refuses and why, how list ranges clip, and where a
// batch's refs stop being readable.
#include <gtest/gtest.h>

#include <string>
#include <variant>
#include <vector>

#include "datasets/dataset_read_plan.h"

namespace sackli {
namespace {

// image (bytes), label (int(8) little-endian), words (utf8[]), in spec order.
std::vector<DatasetFieldSpec> Spec() {
  return {{"image", false, DatasetValueKind::kBytes, 0, false},
          {"label", false, DatasetValueKind::kUnsigned, 8, false},
          {"words", true, DatasetValueKind::kUtf8, 0, false}};
}

// A mask value of `type` for `field`, whose truth is `truthy`.
MaskValue Value(const std::string& field, MaskValue::Type type, bool truthy) {
  MaskValue mask;
  mask.field = field;
  mask.type = type;
  mask.truthy = [truthy] { return truthy; };
  return mask;
}

MaskValue Bool(const std::string& field, bool value) {
  return Value(field, MaskValue::Type::kBool, value);
}

MaskBound Int(int64_t value) { return {MaskBound::Type::kInt, value}; }
const MaskBound kNone{MaskBound::Type::kNone, 0};

MaskValue Slice(const std::string& field, MaskBound start, MaskBound stop,
                MaskBound step = kNone) {
  MaskValue mask = Value(field, MaskValue::Type::kSlice, true);
  mask.start = start;
  mask.stop = stop;
  mask.step = step;
  return mask;
}

MaskValue Other(const std::string& field, bool truthy) {
  return Value(field, MaskValue::Type::kOther, truthy);
}

std::vector<size_t> Positions(const DatasetReadPlan& plan) {
  std::vector<size_t> positions;
  for (const DatasetFieldRead& read : plan.fields()) positions.push_back(read.position);
  return positions;
}

DatasetReadPlan PlanOf(const std::vector<MaskValue>* mask) {
  auto plan = DatasetReadPlan::Make(Spec(), mask);
  EXPECT_TRUE(std::holds_alternative<DatasetReadPlan>(plan));
  return std::get<DatasetReadPlan>(std::move(plan));
}

MaskError ErrorOf(const std::vector<MaskValue>& mask) {
  auto plan = DatasetReadPlan::Make(Spec(), &mask);
  EXPECT_TRUE(std::holds_alternative<MaskError>(plan));
  return std::get<MaskError>(std::move(plan));
}

TEST(DatasetReadPlan, NoMaskReadsEveryFieldWhole) {
  const DatasetReadPlan plan = PlanOf(nullptr);
  EXPECT_EQ(Positions(plan), (std::vector<size_t>{0, 1, 2}));
  EXPECT_EQ(plan.refs_are_lists(), (std::vector<bool>{false, false, true}));
  EXPECT_TRUE(plan.any_list());
  EXPECT_EQ(plan.fields()[2].range.first, 0u);
  EXPECT_FALSE(plan.fields()[2].range.last.has_value());
}

TEST(DatasetReadPlan, MaskSelectsFieldsInSpecOrder) {
  const std::vector<MaskValue> mask = {Bool("words", true), Bool("label", true),
                                       Bool("image", false)};
  const DatasetReadPlan plan = PlanOf(&mask);
  EXPECT_EQ(Positions(plan), (std::vector<size_t>{1, 2}));
}

TEST(DatasetReadPlan, FalsyValuesSkipListFieldsButSlicesNever) {
  // As `bags`: None or an empty range skip a list field.
  std::vector<MaskValue> mask = {Other("words", false), Bool("label", true)};
  EXPECT_EQ(Positions(PlanOf(&mask)), (std::vector<size_t>{1}));
  mask = {Slice("words", Int(2), Int(1))};
  EXPECT_EQ(Positions(PlanOf(&mask)), (std::vector<size_t>{2}));
}

TEST(DatasetReadPlan, ListRangesBecomeFirstAndLast) {
  const std::vector<MaskValue> mask = {Slice("words", Int(1), Int(3), Int(1))};
  const DatasetReadPlan plan = PlanOf(&mask);
  ASSERT_EQ(plan.fields().size(), 1u);
  EXPECT_EQ(plan.fields()[0].range.first, 1u);
  EXPECT_EQ(plan.fields()[0].range.last, 3u);
  EXPECT_TRUE(plan.any_list());
}

TEST(DatasetReadPlan, AsksATruthOnlyWhenARuleNeedsIt) {
  // A scalar field's value is refused by its type, never asked its truth
  // (numpy arrays refuse to answer).
  MaskValue label = Other("label", true);
  label.truthy = [] () -> bool { ADD_FAILURE() << "asked"; return true; };
  EXPECT_EQ(ErrorOf({label}).reason, MaskError::Reason::kScalarNotBool);
}

TEST(DatasetReadPlan, RefusesWhatBagsRefuses) {
  MaskValue unknown = Bool("caption", true);
  MaskValue not_a_name = Bool("", true);
  not_a_name.field.reset();
  MaskError error = ErrorOf({Bool("label", true), unknown, not_a_name});
  EXPECT_EQ(error.reason, MaskError::Reason::kUnknownFields);
  EXPECT_EQ(error.unknown, (std::vector<size_t>{1, 2}));

  error = ErrorOf({Slice("words", Int(-1), kNone)});
  EXPECT_EQ(error.reason, MaskError::Reason::kBadListRange);
  EXPECT_EQ(error.field, 2u);
  EXPECT_EQ(ErrorOf({Slice("words", kNone, Int(-2))}).reason, MaskError::Reason::kBadListRange);
  EXPECT_EQ(ErrorOf({Slice("words", kNone, kNone, {MaskBound::Type::kOther, 0})}).reason,
            MaskError::Reason::kBadListRange);
  EXPECT_EQ(ErrorOf({Slice("words", {MaskBound::Type::kOther, 0}, kNone)}).reason,
            MaskError::Reason::kBadListRange);

  error = ErrorOf({Other("words", true)});
  EXPECT_EQ(error.reason, MaskError::Reason::kListNotRange);
  EXPECT_EQ(error.field, 2u);

  // A scalar field takes bools only: not 1, not a range, not even a falsy 0.
  error = ErrorOf({Other("label", false)});
  EXPECT_EQ(error.reason, MaskError::Reason::kScalarNotBool);
  EXPECT_EQ(error.field, 1u);
  EXPECT_EQ(ErrorOf({Slice("image", Int(0), Int(1))}).reason,
            MaskError::Reason::kScalarNotBool);
}

TEST(DatasetReadPlan, FirstBadMaskValueChecksTheShapeAlone) {
  EXPECT_FALSE(DatasetReadPlan::FirstBadMaskValue(
                   {Bool("anything", true), Slice("x", Int(-1), kNone)})
                   .has_value());
  EXPECT_EQ(DatasetReadPlan::FirstBadMaskValue({Bool("a", true), Other("b", true)}), 1u);
}

TEST(ListRange, ClipsToTheList) {
  const ListRange whole;
  EXPECT_EQ(whole.Clip(10, 4), (std::pair<uint64_t, uint64_t>{10, 4}));
  const ListRange middle{1, 3};
  EXPECT_EQ(middle.Clip(10, 5), (std::pair<uint64_t, uint64_t>{11, 2}));
  EXPECT_EQ(middle.Clip(10, 2), (std::pair<uint64_t, uint64_t>{11, 1}));
  EXPECT_EQ(middle.Clip(10, 1).second, 0u);   // the range starts past the list
  const ListRange backwards{3, 1};
  EXPECT_EQ(backwards.Clip(10, 5).second, 0u);  // stop before start: empty
  const ListRange far{UINT64_MAX, std::nullopt};
  EXPECT_EQ(far.Clip(10, 5).second, 0u);  // no wrap-around
}

TEST(DatasetFieldRead, UnsignedOfItsSizeAndOrder) {
  DatasetFieldRead little{{"n", false, DatasetValueKind::kUnsigned, 2, false}, 0, {}};
  DatasetFieldRead big{{"n", false, DatasetValueKind::kUnsigned, 2, true}, 0, {}};
  EXPECT_EQ(little.Unsigned("\x01\x02", 2), 0x0201u);
  EXPECT_EQ(big.Unsigned("\x01\x02", 2), 0x0102u);
  EXPECT_FALSE(little.Unsigned("\x01", 1).has_value());
}

TEST(DatasetReadPlan, ParsesAndLocatesABatch) {
  const DatasetReadPlan plan = PlanOf(nullptr);
  // msgpack [7, 1, [2, 3]] and [0, 0, []].
  const std::string first("\x93\x07\x01\x92\x02\x03", 6);
  const std::string second("\x93\x00\x00\x90", 4);
  std::vector<DatasetRef> refs;
  ASSERT_FALSE(plan.ParseRefs({{first.data(), first.size()}, {second.data(), second.size()}},
                              refs)
                   .has_value());
  std::vector<FieldRuns> runs;
  ASSERT_FALSE(plan.LocateRuns(refs, 2, {8, 2, 5}, runs).has_value());
  EXPECT_EQ(runs[0].start, (std::vector<uint64_t>{7, 0}));
  EXPECT_EQ(runs[0].length, (std::vector<uint64_t>{1, 1}));
  EXPECT_EQ(runs[2].start, (std::vector<uint64_t>{2, 0}));
  EXPECT_EQ(runs[2].length, (std::vector<uint64_t>{3, 0}));
}

TEST(DatasetReadPlan, NamesWhereABatchStops) {
  const DatasetReadPlan plan = PlanOf(nullptr);
  const std::string good("\x93\x07\x01\x92\x02\x03", 6);
  const std::string not_refs("\x92\x07\x01", 3);  // two refs, not three
  std::vector<DatasetRef> refs;
  auto error =
      plan.ParseRefs({{good.data(), good.size()}, {not_refs.data(), not_refs.size()}}, refs);
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->row, 1u);
  EXPECT_FALSE(error->field.has_value());
  EXPECT_EQ(error->reason, DatasetReadError::Reason::kBadRefs);

  ASSERT_FALSE(plan.ParseRefs({{good.data(), good.size()}}, refs).has_value());
  std::vector<FieldRuns> runs;
  // words' file has 4 records: [2, 3] runs past it.
  error = plan.LocateRuns(refs, 1, {8, 2, 4}, runs);
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->row, 0u);
  EXPECT_EQ(error->field, 2u);
  EXPECT_EQ(error->reason, DatasetReadError::Reason::kRefOutside);
  // image's has 7: record 7 is past it, and reported first (spec order).
  error = plan.LocateRuns(refs, 1, {7, 2, 4}, runs);
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->field, 0u);
}

}  // namespace
}  // namespace sackli
