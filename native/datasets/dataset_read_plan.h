// The read rules of sackli.datasets in one place: which fields a mask
// selects, which items of a list field are read (the mask's range, clipped
// to the list), how each field's records become values (the built-in
// codecs), and where a batch's refs point. A `DatasetReadPlan` is built once
// per mask (the Python reader caches it per mask) and serves every read:
// single datapoints, batches, and the Beam source (which reads batches).
//
// Nothing here knows Python: the binding (native/python/datasets/
// datapoints.cc) converts a mask into MaskValues, reads the records and
// makes the values, and turns a MaskError into the message users see.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "datasets/dataset_refs.h"

namespace sackli {

// How a field's records become values.
enum class DatasetValueKind : int {
  kBytes = 0,     // the record as bytes (also: decoded by the caller's codec)
  kUtf8 = 1,      // UTF-8 text
  kUnsigned = 2,  // an unsigned integer of `int_size` bytes
};

// A field of a dataset's spec (in spec order) and its codec.
struct DatasetFieldSpec {
  std::string name;
  bool is_list = false;
  DatasetValueKind kind = DatasetValueKind::kBytes;
  size_t int_size = 0;  // kUnsigned: 1 to 8
  bool big_endian = false;
};

// A bound of a mask's range or slice: None, an int (clamped to int64), or
// something else.
struct MaskBound {
  enum class Type { kNone, kInt, kOther };
  Type type = Type::kNone;
  int64_t value = 0;
};

// One entry of a mask, as the binding converts it.
struct MaskValue {
  enum class Type { kBool, kRange, kSlice, kOther };
  std::optional<std::string> field;  // nullopt: the key is not a str
  Type type = Type::kBool;
  // The value's truth (an empty range is false), asked only when a rule
  // needs it (a list field's value that is not a slice), as Python does.
  std::function<bool()> truthy;
  MaskBound start;      // kRange / kSlice
  MaskBound stop;
  MaskBound step;       // kInt only when the step equals 1
};

// Why a mask has no plan; `field` is the spec index of the field concerned
// (kUnknownFields: `unknown` holds the indices of the mask's unknown keys).
struct MaskError {
  enum class Reason {
    kUnknownFields,     // ValueError: names fields the spec does not have
    kBadListRange,      // ValueError: a list field's range is not start >= 0, stop >= 0, step 1
    kListNotRange,      // TypeError: a list field's value is not a bool, range or slice
    kScalarNotBool,     // TypeError: a scalar field's value is not a bool
  };
  Reason reason;
  size_t field = 0;
  std::vector<size_t> unknown;
};

// Items [first, last) of each list of a field (last: none when absent).
struct ListRange {
  uint64_t first = 0;
  std::optional<uint64_t> last;

  // The items read of a list of `length` items starting at record `start`:
  // (first record, count), the range clipped to the list.
  std::pair<uint64_t, uint64_t> Clip(uint64_t start, uint64_t length) const;
};

// A field a plan reads.
struct DatasetFieldRead {
  DatasetFieldSpec spec;
  size_t position = 0;  // in the spec, and of its ref in a refs record
  ListRange range;      // list fields

  // The unsigned integer of record[0, size), or nullopt when the record is
  // not `int_size` bytes (kUnsigned fields).
  std::optional<uint64_t> Unsigned(const char* record, size_t size) const;
};

// Where a batch read stopped: datapoint `row` (its index in the batch),
// field `field` (the plan's index; none for kBadRefs), and why.
struct DatasetReadError {
  enum class Reason {
    kBadRefs,         // the refs record is not what `bags` writes
    kRefOutside,      // a ref points past the field's file
    kValueNotDecoded  // a record does not decode as the field's kind
  };
  size_t row = 0;
  std::optional<size_t> field;
  Reason reason = Reason::kBadRefs;
};

// A record's bytes (where it lies in a mapping, or in a packed read).
struct RecordBytes {
  const char* data;
  uint64_t size;
};

// The records each datapoint of a batch reads from one field: datapoint k's
// are [start[k], start[k] + length[k]) of the field's file.
struct FieldRuns {
  std::vector<uint64_t> start;
  std::vector<uint64_t> length;
};

class DatasetReadPlan {
 public:
  // The plan reading `mask` (nullptr: every field whole) of a dataset with
  // `fields`, or why the mask is refused. The rules are `bags`': a falsy
  // value skips a list field (a slice never is), scalar fields take bools
  // only, list fields bools, ranges and slices of step 1 with start >= 0
  // and stop >= 0 (or None).
  static std::variant<DatasetReadPlan, MaskError> Make(
      const std::vector<DatasetFieldSpec>& fields, const std::vector<MaskValue>* mask);

  // The mask's shape alone, without a spec (the Beam source checks it when
  // the pipeline is built): the index of the first value that is not a
  // bool, range or slice, or nullopt.
  static std::optional<size_t> FirstBadMaskValue(const std::vector<MaskValue>& mask);

  const std::vector<DatasetFieldRead>& fields() const { return reads_; }
  // Whether each ref of a refs record is a list field's (the spec's).
  const std::vector<bool>& refs_are_lists() const { return refs_are_lists_; }
  bool any_list() const;

  // Parses the refs records of a batch into refs, row-major; kBadRefs
  // naming the first record that is not what `bags` writes.
  std::optional<DatasetReadError> ParseRefs(const std::vector<RecordBytes>& records,
                                            std::vector<DatasetRef>& refs) const;

  // Each field's runs for the batch whose parsed refs are `refs` (`rows`
  // datapoints), the files of the plan's fields holding `lengths` records;
  // kRefOutside naming the first ref (field by field, then row by row) that
  // points past its file.
  std::optional<DatasetReadError> LocateRuns(const std::vector<DatasetRef>& refs, size_t rows,
                                             const std::vector<uint64_t>& lengths,
                                             std::vector<FieldRuns>& runs) const;

 private:
  std::vector<DatasetFieldRead> reads_;
  std::vector<bool> refs_are_lists_;
};

}  // namespace sackli
