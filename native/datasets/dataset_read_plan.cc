#include "datasets/dataset_read_plan.h"

#include <algorithm>
#include <limits>

namespace sackli {
namespace {

uint64_t SaturatingAdd(uint64_t a, uint64_t b) {
  return b > std::numeric_limits<uint64_t>::max() - a ? std::numeric_limits<uint64_t>::max()
                                                      : a + b;
}

// The items a list field's range or slice selects, or nullopt when it is
// not start >= 0 (None: 0), stop >= 0 (or None) and step 1 (or None).
std::optional<ListRange> ListRangeOf(const MaskValue& value) {
  const bool step_ok = value.step.type == MaskBound::Type::kNone ||
                       (value.step.type == MaskBound::Type::kInt && value.step.value == 1);
  const bool start_ok = value.start.type == MaskBound::Type::kNone ||
                        (value.start.type == MaskBound::Type::kInt && value.start.value >= 0);
  const bool stop_ok = value.stop.type == MaskBound::Type::kNone ||
                       (value.stop.type == MaskBound::Type::kInt && value.stop.value >= 0);
  if (!step_ok || !start_ok || !stop_ok) return std::nullopt;
  ListRange range;
  if (value.start.type == MaskBound::Type::kInt) {
    range.first = static_cast<uint64_t>(value.start.value);
  }
  if (value.stop.type == MaskBound::Type::kInt) {
    range.last = static_cast<uint64_t>(value.stop.value);
  }
  return range;
}

}  // namespace

std::pair<uint64_t, uint64_t> ListRange::Clip(uint64_t start, uint64_t length) const {
  uint64_t stop = SaturatingAdd(start, length);
  if (last && *last < length) stop = start + *last;
  const uint64_t from = SaturatingAdd(start, first);
  return {from, from < stop ? stop - from : 0};
}

std::optional<uint64_t> DatasetFieldRead::Unsigned(const char* record, size_t size) const {
  if (size != spec.int_size) return std::nullopt;  // `bags` decodes it: the caller's codec
  uint64_t number = 0;
  for (size_t i = 0; i < size; ++i) {
    const auto byte = static_cast<unsigned char>(record[spec.big_endian ? i : size - 1 - i]);
    number = (number << 8) | byte;
  }
  return number;
}

std::variant<DatasetReadPlan, MaskError> DatasetReadPlan::Make(
    const std::vector<DatasetFieldSpec>& fields, const std::vector<MaskValue>* mask) {
  DatasetReadPlan plan;
  for (const DatasetFieldSpec& field : fields) plan.refs_are_lists_.push_back(field.is_list);
  if (mask != nullptr) {
    MaskError unknown{MaskError::Reason::kUnknownFields, 0, {}};
    for (size_t i = 0; i < mask->size(); ++i) {
      const auto& name = (*mask)[i].field;
      const bool known = name && std::any_of(fields.begin(), fields.end(), [&](const auto& f) {
                           return f.name == *name;
                         });
      if (!known) unknown.unknown.push_back(i);
    }
    if (!unknown.unknown.empty()) return unknown;
  }
  for (size_t position = 0; position < fields.size(); ++position) {
    DatasetFieldRead read{fields[position], position, {}};
    if (mask == nullptr) {
      plan.reads_.push_back(std::move(read));
      continue;
    }
    // The field's value (absent: False); the last of equal keys wins, as in a dict.
    MaskValue value;
    for (const MaskValue& entry : *mask) {
      if (entry.field == read.spec.name) value = entry;
    }
    const bool is_list = read.spec.is_list;
    // As `bags`: a falsy value (False, an empty range) skips a list field.
    const auto truthy = [&] { return value.truthy && value.truthy(); };
    if (is_list && value.type != MaskValue::Type::kSlice && !truthy()) continue;
    if (value.type == MaskValue::Type::kBool) {
      if (truthy()) plan.reads_.push_back(std::move(read));
    } else if (is_list &&
               (value.type == MaskValue::Type::kRange || value.type == MaskValue::Type::kSlice)) {
      std::optional<ListRange> range = ListRangeOf(value);
      if (!range) return MaskError{MaskError::Reason::kBadListRange, position, {}};
      read.range = *range;
      plan.reads_.push_back(std::move(read));
    } else {
      return MaskError{is_list ? MaskError::Reason::kListNotRange
                               : MaskError::Reason::kScalarNotBool,
                       position, {}};
    }
  }
  return plan;
}

std::optional<size_t> DatasetReadPlan::FirstBadMaskValue(const std::vector<MaskValue>& mask) {
  for (size_t i = 0; i < mask.size(); ++i) {
    if (mask[i].type == MaskValue::Type::kOther) return i;
  }
  return std::nullopt;
}

bool DatasetReadPlan::any_list() const {
  return std::any_of(reads_.begin(), reads_.end(),
                     [](const DatasetFieldRead& read) { return read.spec.is_list; });
}

std::optional<DatasetReadError> DatasetReadPlan::ParseRefs(
    const std::vector<RecordBytes>& records, std::vector<DatasetRef>& refs) const {
  const size_t per_row = refs_are_lists_.size();
  refs.resize(records.size() * per_row);
  for (size_t k = 0; k < records.size(); ++k) {
    if (!ParseDatasetRefs(records[k].data, static_cast<size_t>(records[k].size), refs_are_lists_,
                          refs.data() + k * per_row)) {
      return DatasetReadError{k, std::nullopt, DatasetReadError::Reason::kBadRefs};
    }
  }
  return std::nullopt;
}

std::optional<DatasetReadError> DatasetReadPlan::LocateRuns(
    const std::vector<DatasetRef>& refs, size_t rows, const std::vector<uint64_t>& lengths,
    std::vector<FieldRuns>& runs) const {
  const size_t per_row = refs_are_lists_.size();
  runs.assign(reads_.size(), FieldRuns{});
  for (size_t f = 0; f < reads_.size(); ++f) {
    const DatasetFieldRead& read = reads_[f];
    const uint64_t length = lengths[f];
    FieldRuns& field = runs[f];
    field.start.reserve(rows);
    field.length.reserve(rows);
    for (size_t k = 0; k < rows; ++k) {
      const DatasetRef& ref = refs[k * per_row + read.position];
      const bool outside = read.spec.is_list
                               ? ref.start > length || ref.length > length - ref.start
                               : ref.start >= length;
      if (outside) return DatasetReadError{k, f, DatasetReadError::Reason::kRefOutside};
      const auto [start, count] = read.spec.is_list ? read.range.Clip(ref.start, ref.length)
                                                    : std::pair(ref.start, uint64_t{1});
      field.start.push_back(start);
      field.length.push_back(count);
    }
  }
  return std::nullopt;
}

}  // namespace sackli
