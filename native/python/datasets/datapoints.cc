// `_engine.DatasetReadPlan`: the read rules of a mask (datasets/
// dataset_read_plan.h) for Python; `_engine.read_datapoints`: a batch of
// sackli.datasets datapoints (dicts of field values) built in one call by
// such a plan, for DatasetReader; `_engine.check_dataset_mask`: a mask's
// shape, for the Beam source; and `_engine.parse_dataset_refs`, the same
// plan's refs parser for column readers (sackli.arrow, `sackli verify`).
//
// The refs of the batch are parsed and located by the plan. Then, for a bag
// that is memory-mapped and stores its records uncompressed (every local
// `bags` file), the records are read where they lie: all of the batch's are
// located first, each one's head prefetched, then made into `bytes`, `str`
// or `int` objects (lists of them for list fields) on this thread. `bytes`
// scalars of larger batches (images) are copied by the pool straight into
// their `bytes`, in parallel with that. Other bags (compressed, remote) are
// read by the engine's batch reads. Fields whose decoder is not one of the
// built-in bytes/utf8/int ones come back as `bytes` for the caller.
//
// Anything unusual (refs that are not what `bags` writes, a ref outside its
// field's bag, a value that does not decode as its kind) returns a
// DatasetReadError (row, field, reason): the caller then reads the batch the
// slower way, which names the problem as `bags` does. Engine errors (a
// damaged or changed file) are raised as for any read.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "datasets/dataset_read_plan.h"
#include "datasets/dataset_refs.h"
#include "bagz/errors.h"
#include "bagz/fault_guard.h"
#include "bagz/prefetch.h"
#include "python/buffers.h"
#include "python/gil.h"
#include "python/indices.h"
#include "python/bagz/reader_core.h"
#include "python/register.h"
#include "bagz/read_plan.h"
#include "bagz/reader.h"

namespace py = pybind11;

namespace sackli::python {
namespace {

// Up to this many datapoints, `bytes` values are copied on this thread too:
// handing a few copies to the pool costs more than making them.
constexpr size_t kFewRowsInPlace = 16;

// ---- Masks: Python values to MaskValues, MaskErrors to exceptions ----

// A field name (a str) as the plan compares it: UTF-8, lone surrogates
// kept (a spec.json may have them), so that equal names stay equal.
std::string NameOf(py::handle name) {
  const py::bytes utf8 = py::reinterpret_steal<py::bytes>(
      PyUnicode_AsEncodedString(name.ptr(), "utf-8", "surrogatepass"));
  if (!utf8) throw py::error_already_set();
  return utf8;
}

// A range or slice bound: None, an int (clamped to int64), or another value.
MaskBound BoundOf(py::handle value) {
  if (value.is_none()) return {MaskBound::Type::kNone, 0};
  if (!PyLong_Check(value.ptr())) return {MaskBound::Type::kOther, 0};
  int overflow = 0;
  const long long number = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
  if (number == -1 && PyErr_Occurred()) throw py::error_already_set();
  if (overflow != 0) {
    return {MaskBound::Type::kInt, overflow > 0 ? INT64_MAX : INT64_MIN};
  }
  return {MaskBound::Type::kInt, number};
}

// A step: kInt (1) when it equals 1 (True and 1.0 too, as `in (None, 1)`).
MaskBound StepOf(py::handle step) {
  if (step.is_none()) return {MaskBound::Type::kNone, 0};
  const int one = PyObject_RichCompareBool(step.ptr(), py::int_(1).ptr(), Py_EQ);
  if (one < 0) throw py::error_already_set();
  return one == 1 ? MaskBound{MaskBound::Type::kInt, 1} : MaskBound{MaskBound::Type::kOther, 0};
}

// `value` as the plan's rules see it; `shape_only`: its type alone.
MaskValue MaskValueOf(py::handle key, py::handle value, bool shape_only) {
  MaskValue converted;
  if (PyUnicode_Check(key.ptr())) converted.field = NameOf(key);
  converted.truthy = [value] {
    const int truthy = PyObject_IsTrue(value.ptr());
    if (truthy < 0) throw py::error_already_set();
    return truthy == 1;
  };
  if (PyBool_Check(value.ptr())) {
    converted.type = MaskValue::Type::kBool;
  } else if (PyRange_Check(value.ptr()) || PySlice_Check(value.ptr())) {
    converted.type = PySlice_Check(value.ptr()) ? MaskValue::Type::kSlice
                                                : MaskValue::Type::kRange;
    if (!shape_only) {
      converted.start = BoundOf(value.attr("start"));
      converted.stop = BoundOf(value.attr("stop"));
      converted.step = StepOf(value.attr("step"));
    }
  } else {
    converted.type = MaskValue::Type::kOther;
  }
  return converted;
}

bool IsMapping(py::handle mask) {
  static const py::object* mapping =
      new py::object(py::module_::import("collections.abc").attr("Mapping"));
  return py::isinstance(mask, *mapping);
}

std::string TypeName(py::handle value) {
  return py::str(py::type::handle_of(value).attr("__name__"));
}

// The mask's keys and values, in order, and their conversions.
struct ConvertedMask {
  std::vector<py::object> keys;
  std::vector<py::object> values;
  std::vector<MaskValue> converted;
};

ConvertedMask ConvertMask(py::handle mask, bool shape_only) {
  ConvertedMask out;
  for (py::handle item : mask.attr("items")()) {
    py::tuple pair = py::reinterpret_borrow<py::tuple>(item);
    out.keys.emplace_back(pair[0]);
    out.values.emplace_back(pair[1]);
    out.converted.push_back(MaskValueOf(pair[0], pair[1], shape_only));
  }
  return out;
}

std::string Join(const std::vector<std::string>& parts) {
  std::string joined;
  for (const std::string& part : parts) joined += (joined.empty() ? "" : ", ") + part;
  return joined;
}

// Raises the exception users see for `error` (messages as `bags`' checks
// name them, prefixed by `where`, the dataset folder).
[[noreturn]] void RaiseMaskError(const MaskError& error, const ConvertedMask& mask,
                                 const std::vector<DatasetFieldSpec>& fields,
                                 py::list field_items, const std::string& where) {
  const auto name_of = [&](size_t i) { return field_items[i].cast<py::tuple>()[0]; };
  const auto repr = [](py::handle value) { return std::string(py::repr(value)); };
  if (error.reason == MaskError::Reason::kUnknownFields) {
    std::vector<std::string> unknown;
    for (size_t i : error.unknown) unknown.push_back(repr(mask.keys[i]));
    std::vector<std::string> names;
    for (size_t i = 0; i < fields.size(); ++i) names.push_back(repr(name_of(i)));
    throw py::value_error(where + ": the mask names fields the dataset does not have: " +
                          Join(unknown) + " (fields: " + Join(names) + ")");
  }
  const std::string& name = fields[error.field].name;
  py::object value = py::bool_(false);
  for (size_t i = 0; i < mask.keys.size(); ++i) {
    if (mask.converted[i].field == name) value = mask.values[i];
  }
  const std::string field = repr(name_of(error.field));
  switch (error.reason) {
    case MaskError::Reason::kBadListRange:
      throw py::value_error(where + ": the mask of list field " + field +
                            " must have start >= 0, stop >= 0 and step 1, not " +
                            std::string(py::str(value)));
    case MaskError::Reason::kListNotRange:
      throw py::type_error(where + ": the mask of list field " + field +
                           " must be a bool, range or slice, not " + TypeName(value));
    default:
      throw py::type_error(where + ": the mask of scalar field " + field +
                           " must be a bool, not " + TypeName(value));
  }
}

DatasetFieldSpec FieldSpecOf(py::handle item) {
  const py::tuple t = py::reinterpret_borrow<py::tuple>(item);
  if (t.size() != 5) {
    ThrowInvalidArgument(
        "a field of DatasetReadPlan is (name, is_list, kind, int size, big-endian)");
  }
  DatasetFieldSpec field;
  if (!PyUnicode_Check(t[0].ptr())) {
    ThrowInvalidArgument("a field name of DatasetReadPlan is a str");
  }
  field.name = NameOf(t[0]);
  field.is_list = t[1].cast<bool>();
  const int kind = t[2].cast<int>();
  if (kind < 0 || kind > static_cast<int>(DatasetValueKind::kUnsigned)) {
    ThrowInvalidArgument("a value kind of DatasetReadPlan is 0, 1 or 2");
  }
  field.kind = static_cast<DatasetValueKind>(kind);
  field.int_size = t[3].cast<size_t>();
  field.big_endian = t[4].cast<bool>();
  if (field.kind == DatasetValueKind::kUnsigned && (field.int_size == 0 || field.int_size > 8)) {
    ThrowInvalidArgument("unsigned values of DatasetReadPlan are 1 to 8 bytes");
  }
  return field;
}

// `_engine.DatasetReadPlan`: the plan, and the Python names of its fields
// (the spec's own str objects, the keys of the datapoints made).
struct BoundPlan {
  DatasetReadPlan plan;
  std::vector<py::object> names;
};

// DatasetReadPlan(fields, mask, where): `fields` the spec's, in order, as
// (name, is_list, kind, int size, big-endian); `mask` None or a mapping.
BoundPlan MakePlan(py::list field_items, py::handle mask, const std::string& where) {
  std::vector<DatasetFieldSpec> fields;
  for (py::handle item : field_items) fields.push_back(FieldSpecOf(item));
  std::variant<DatasetReadPlan, MaskError> made;
  if (mask.is_none()) {
    made = DatasetReadPlan::Make(fields, nullptr);
  } else {
    if (!IsMapping(mask)) {
      throw py::type_error(where + ": a mask must be a dict, not " + TypeName(mask));
    }
    const ConvertedMask converted = ConvertMask(mask, /*shape_only=*/false);
    made = DatasetReadPlan::Make(fields, &converted.converted);
    if (auto* error = std::get_if<MaskError>(&made)) {
      RaiseMaskError(*error, converted, fields, field_items, where);
    }
  }
  BoundPlan bound{std::get<DatasetReadPlan>(std::move(made)), {}};
  for (const DatasetFieldRead& read : bound.plan.fields()) {
    bound.names.emplace_back(field_items[read.position].cast<py::tuple>()[0]);
  }
  return bound;
}

// check_dataset_mask(mask): the mask's shape without a spec (the Beam
// source, when the pipeline is built); the mask as a dict.
py::dict CheckMask(py::handle mask) {
  if (!IsMapping(mask)) throw py::type_error("mask must be a dict, not " + TypeName(mask));
  const ConvertedMask converted = ConvertMask(mask, /*shape_only=*/true);
  if (auto bad = DatasetReadPlan::FirstBadMaskValue(converted.converted)) {
    throw py::type_error("the mask of field " + std::string(py::repr(converted.keys[*bad])) +
                         " must be a bool, range or slice, not " +
                         TypeName(converted.values[*bad]));
  }
  py::dict copy;
  for (size_t i = 0; i < converted.keys.size(); ++i) copy[converted.keys[i]] = converted.values[i];
  return copy;
}

// plan.list_items(i, starts, stops): the items read of the lists
// [starts[k], stops[k]) of the plan's field i, clipped to its range, as
// (starts, stops) (a stop before its start: an empty list).
std::pair<std::vector<uint64_t>, std::vector<uint64_t>> ListItems(
    const BoundPlan& bound, size_t index, const std::vector<uint64_t>& starts,
    const std::vector<uint64_t>& stops) {
  const DatasetReadPlan& plan = bound.plan;
  if (index >= plan.fields().size()) ThrowInvalidArgument("no such field in the plan");
  const ListRange& range = plan.fields()[index].range;
  std::pair<std::vector<uint64_t>, std::vector<uint64_t>> items;
  for (size_t k = 0; k < starts.size() && k < stops.size(); ++k) {
    const uint64_t length = stops[k] > starts[k] ? stops[k] - starts[k] : 0;
    const auto [first, count] = range.Clip(starts[k], length);
    items.first.push_back(first);
    items.second.push_back(first + count);
  }
  return items;
}

// ---- Batches ----

// One field of a batch: the plan's field, its file, and the batch's runs
// (datapoint k's records are the view indices [runs.start[k], runs.start[k]
// + runs.length[k])); globals, all of them in order, for the reads that take
// global indices.
struct FieldBatch {
  const DatasetFieldRead* read = nullptr;
  const Reader* reader = nullptr;
  FieldRuns runs;
  std::vector<uint64_t> globals;
  bool is_list() const { return read->spec.is_list; }
};

// field.globals: the field's records as global indices, run after run.
void PlanGlobals(FieldBatch& field) {
  for (size_t k = 0; k < field.runs.start.size(); ++k) {
    for (uint64_t i = 0; i < field.runs.length[k]; ++i) {
      field.globals.push_back(
          field.reader->GlobalIndex(static_cast<int64_t>(field.runs.start[k] + i)));
    }
  }
}

// The value of record[0, size) as the field's kind makes it (a new
// reference), or nullptr when it does not decode as that kind (no Python
// error set: the slower way names the record).
PyObject* MakeValue(const DatasetFieldRead& field, const char* record, size_t size) {
  switch (field.spec.kind) {
    case DatasetValueKind::kBytes: {
      PyObject* value = PyBytes_FromStringAndSize(record, static_cast<Py_ssize_t>(size));
      if (value == nullptr) throw py::error_already_set();
      return value;
    }
    case DatasetValueKind::kUtf8: {
      PyObject* value = PyUnicode_DecodeUTF8(record, static_cast<Py_ssize_t>(size), nullptr);
      if (value == nullptr) {
        if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) throw py::error_already_set();
        PyErr_Clear();
      }
      return value;
    }
    case DatasetValueKind::kUnsigned: {
      const std::optional<uint64_t> number = field.Unsigned(record, size);
      if (!number) return nullptr;
      PyObject* value = PyLong_FromUnsignedLongLong(*number);
      if (value == nullptr) throw py::error_already_set();
      return value;
    }
  }
  return nullptr;
}

// Whether `reader`'s records can be read where they lie: a mapped bag
// that stores them uncompressed, seen through a view of step 1.
bool ReadableInPlace(const Reader& reader) {
  const Bag& bag = *reader.bag();
  return reader.view().step == 1 && bag.all_mapped() && !bag.any_compressed();
}

// fn() with the reads of every shard of `bag` guarded (scopes nest; a no-op
// for unmapped shards).
template <typename Fn>
void GuardedBag(const Bag& bag, const Fn& fn, size_t shard = 0) {
  if (shard == bag.num_shards()) {
    fn();
    return;
  }
  Guarded(bag.shard(shard).records(), [&] { GuardedBag(bag, fn, shard + 1); });
}

// The records of packed reads, in order.
std::vector<RecordBytes> RecordsOf(const DecodedRecords& packed) {
  std::vector<RecordBytes> records;
  records.reserve(packed.offsets.size());
  for (size_t k = 0; k + 1 < packed.offsets.size(); ++k) {
    records.push_back({packed.data.data() + packed.offsets[k],
                       packed.offsets[k + 1] - packed.offsets[k]});
  }
  return records;
}

// The records of `runs` runs of `reader`, run(k) giving run k's (first global
// index, length), where they lie in the mapping, in order; each run's head
// is prefetched: the runs of a batch are scattered over the file, and each
// is a cache and TLB miss that the reads after this do not wait for.
// nullopt unless ReadableInPlace(reader) and every run lies in one piece.
template <typename Run>
std::optional<std::vector<RecordBytes>> RecordsInPlace(const Reader& reader, size_t runs,
                                                       const Run& run) {
  if (!ReadableInPlace(reader)) return std::nullopt;
  const Bag& bag = *reader.bag();
  const uint64_t max_record_bytes = bag.options().shard.max_record_bytes;
  std::vector<uint64_t> offsets;
  std::vector<RecordBytes> records;
  records.reserve(runs);
  for (size_t k = 0; k < runs; ++k) {
    const auto [first, length] = run(k);
    if (length == 0) continue;
    const char* data = nullptr;
    if (!MappedRun(bag, first, length, &data, offsets)) return std::nullopt;  // across shards
    PrefetchBytes(data, static_cast<size_t>(std::min<uint64_t>(offsets[length], kCacheLineBytes)));
    for (uint64_t i = 0; i < length; ++i) {
      // A record over the cap goes the planned way, which refuses it by name.
      if (offsets[i + 1] - offsets[i] > max_record_bytes) return std::nullopt;
      records.push_back({data + offsets[i], offsets[i + 1] - offsets[i]});
    }
  }
  return records;
}

// RecordsInPlace of a field's runs.
std::optional<std::vector<RecordBytes>> FieldRecordsInPlace(const FieldBatch& field) {
  const View& view = field.reader->view();
  return RecordsInPlace(*field.reader, field.runs.start.size(), [&](size_t k) {
    return std::pair(view.Global(field.runs.start[k]), field.runs.length[k]);
  });
}

// The values of `field` for each datapoint from its records (run after
// run): a list of n values, or of n lists for a list field; None, with
// *bad_row the datapoint, when one does not decode as the field's kind. The
// reads are guarded: the records may lie in the field's mapping.
py::object MakeValues(const FieldBatch& field, const std::vector<RecordBytes>& records, size_t n,
                      size_t* bad_row) {
  py::list values(n);
  bool decoded = true;
  GuardedBag(*field.reader->bag(), [&] {
    size_t at = 0;
    auto make = [&]() {
      const RecordBytes& record = records[at++];
      PyObject* value = MakeValue(*field.read, record.data, static_cast<size_t>(record.size));
      decoded = value != nullptr;
      return value;
    };
    for (size_t k = 0; k < n && decoded; ++k) {
      *bad_row = k;
      if (!field.is_list()) {
        PyObject* value = make();
        if (decoded) PyList_SET_ITEM(values.ptr(), static_cast<Py_ssize_t>(k), value);
        continue;
      }
      const uint64_t length = field.runs.length[k];
      PyObject* list = PyList_New(static_cast<Py_ssize_t>(length));
      if (list == nullptr) throw py::error_already_set();
      PyList_SET_ITEM(values.ptr(), static_cast<Py_ssize_t>(k), list);  // owned by values now
      for (uint64_t i = 0; i < length && decoded; ++i) {
        PyObject* item = make();
        if (decoded) PyList_SET_ITEM(list, static_cast<Py_ssize_t>(i), item);
      }
    }
  });
  return decoded ? py::object(std::move(values)) : py::object(py::none());
}

// read_datapoints(refs, rows, plan, readers) -> list of dicts, or a
// DatasetReadError (see top). `rows`: view indices of `refs`; `readers`:
// the files of the plan's fields, in the plan's order.
py::object ReadDatapoints(const Reader& refs_reader, py::handle rows, const BoundPlan& bound,
                          py::list field_readers) {
  const DatasetReadPlan& plan = bound.plan;
  const std::vector<py::object>& names = bound.names;
  const std::vector<DatasetFieldRead>& reads = plan.fields();
  if (field_readers.size() != reads.size()) {
    ThrowInvalidArgument("read_datapoints takes one reader per field of the plan");
  }
  std::vector<FieldBatch> fields(reads.size());
  std::vector<uint64_t> lengths(reads.size());
  for (size_t f = 0; f < reads.size(); ++f) {
    fields[f].read = &reads[f];
    fields[f].reader = &field_readers[f].cast<const Reader&>();
    lengths[f] = fields[f].reader->size();
  }
  std::vector<uint64_t> ref_globals = ResolveIndices(refs_reader.view(), rows);
  const size_t n = ref_globals.size();
  // Parsed where they lie when refs.bag is mapped, else read packed first.
  std::optional<std::vector<RecordBytes>> ref_records;
  {
    ReleaseGil release;
    ref_records = RecordsInPlace(refs_reader, n, [&](size_t k) {
      return std::pair(ref_globals[k], uint64_t{1});
    });
  }
  std::shared_ptr<PendingRead> refs_read;  // owns the packed records
  if (!ref_records) {
    refs_read = refs_reader.StartRead(std::move(ref_globals));
    WaitNoticingSignals(*refs_read);
    ref_records = RecordsOf(refs_read->Result());
  }
  // Every field's ref is parsed (the record must be what `bags` writes),
  // whether the batch reads the field or not.
  std::optional<DatasetReadError> error;
  {
    ReleaseGil release;
    std::vector<DatasetRef> refs;
    GuardedBag(*refs_reader.bag(), [&] { error = plan.ParseRefs(*ref_records, refs); });
    std::vector<FieldRuns> runs;
    if (!error) error = plan.LocateRuns(refs, n, lengths, runs);
    if (!error) {
      for (size_t f = 0; f < fields.size(); ++f) fields[f].runs = std::move(runs[f]);
    }
  }
  if (error) return py::cast(*error);
  // The pool's reads start first: `bytes` scalars of larger batches (copied
  // in parallel, straight into their `bytes`) and bags that cannot be read
  // in place. Meanwhile this thread makes the values of the others from
  // their mapping, then those of the packed reads.
  std::vector<std::optional<PendingRecords>> as_bytes(fields.size());
  std::vector<std::shared_ptr<PendingRead>> packed(fields.size());
  std::vector<py::object> values(fields.size());
  auto start_packed = [&](size_t f) {
    PlanGlobals(fields[f]);
    packed[f] = fields[f].reader->StartRead(fields[f].globals);
  };
  auto not_decoded = [](size_t row, size_t f) {
    return py::cast(DatasetReadError{row, f, DatasetReadError::Reason::kValueNotDecoded});
  };
  for (size_t f = 0; f < fields.size(); ++f) {
    const bool in_place = ReadableInPlace(*fields[f].reader);
    if (!fields[f].is_list() && fields[f].read->spec.kind == DatasetValueKind::kBytes &&
        !(in_place && n <= kFewRowsInPlace)) {
      PlanGlobals(fields[f]);
      as_bytes[f].emplace(*fields[f].reader, fields[f].globals);
    } else if (!in_place) {
      start_packed(f);
    }
  }
  size_t bad_row = 0;
  for (size_t f = 0; f < fields.size(); ++f) {
    if (as_bytes[f] || packed[f]) continue;
    std::optional<std::vector<RecordBytes>> records = FieldRecordsInPlace(fields[f]);
    if (!records) {  // a run across shards
      start_packed(f);
      continue;
    }
    values[f] = MakeValues(fields[f], *records, n, &bad_row);
    if (values[f].is_none()) return not_decoded(bad_row, f);
  }
  for (size_t f = 0; f < fields.size(); ++f) {
    if (!packed[f]) continue;
    WaitNoticingSignals(*packed[f]);
    values[f] = MakeValues(fields[f], RecordsOf(packed[f]->Result()), n, &bad_row);
    if (values[f].is_none()) return not_decoded(bad_row, f);
  }
  for (size_t f = 0; f < fields.size(); ++f) {
    if (as_bytes[f]) values[f] = as_bytes[f]->Result();
  }
  py::list datapoints(n);
  for (size_t k = 0; k < n; ++k) {
    PyObject* datapoint = PyDict_New();
    if (datapoint == nullptr) throw py::error_already_set();
    PyList_SET_ITEM(datapoints.ptr(), static_cast<Py_ssize_t>(k), datapoint);
    for (size_t f = 0; f < fields.size(); ++f) {
      PyObject* value = PyList_GET_ITEM(values[f].ptr(), static_cast<Py_ssize_t>(k));
      if (PyDict_SetItem(datapoint, names[f].ptr(), value) != 0) {
        throw py::error_already_set();
      }
    }
  }
  return datapoints;
}

// parse_dataset_refs(data, offsets, plan): the refs of packed refs.bag
// records (record k is data[offsets[k], offsets[k + 1]), offsets int64) as
// columns, for the plan's fields (sackli.arrow's tables and `sackli verify`
// read whole fields: a plan of `True`s): a list of (starts, lengths) int64
// buffers (lengths None for a scalar field), in the plan's order, or None
// when a record is not what `bags` writes or a ref is 2**62 or more (the
// caller's per-record path then names the record).
py::object ParseRefsColumns(py::handle data, py::handle offsets, const BoundPlan& bound) {
  const DatasetReadPlan& plan = bound.plan;
  const std::vector<DatasetFieldRead>& reads = plan.fields();
  BorrowedBytes bytes(data.ptr());
  BorrowedBytes ends(offsets.ptr());
  const size_t bounds = ends.view().size() / sizeof(int64_t);
  const size_t n = bounds == 0 ? 0 : bounds - 1;
  std::vector<int64_t> at(bounds);
  if (bounds > 0) std::memcpy(at.data(), ends.view().data(), bounds * sizeof(int64_t));
  constexpr uint64_t kLargestRef = uint64_t{1} << 62;  // int64 with room for start + length
  std::vector<std::vector<int64_t>> starts(reads.size(), std::vector<int64_t>(n));
  std::vector<std::vector<int64_t>> lengths(reads.size(), std::vector<int64_t>(n));
  bool parsed = true;
  {
    ReleaseGil release;
    const std::string_view view = bytes.view();
    std::vector<RecordBytes> records;
    records.reserve(n);
    for (size_t k = 0; k < n && parsed; ++k) {
      const int64_t begin = at[k];
      const int64_t end = at[k + 1];
      parsed = 0 <= begin && begin <= end && static_cast<uint64_t>(end) <= view.size();
      if (parsed) records.push_back({view.data() + begin, static_cast<uint64_t>(end - begin)});
    }
    std::vector<DatasetRef> refs;
    parsed = parsed && !plan.ParseRefs(records, refs);
    const size_t per_row = plan.refs_are_lists().size();
    for (size_t k = 0; k < n && parsed; ++k) {
      for (size_t i = 0; i < reads.size() && parsed; ++i) {
        const DatasetRef& ref = refs[k * per_row + reads[i].position];
        parsed = ref.start < kLargestRef && ref.length < kLargestRef;
        starts[i][k] = static_cast<int64_t>(ref.start);
        lengths[i][k] = static_cast<int64_t>(ref.length);
      }
    }
  }
  if (!parsed) return py::none();
  auto as_bytes = [](const std::vector<int64_t>& column) {
    return py::bytes(reinterpret_cast<const char*>(column.data()), column.size() * sizeof(int64_t));
  };
  py::list columns;
  for (size_t i = 0; i < reads.size(); ++i) {
    columns.append(py::make_tuple(as_bytes(starts[i]),
                                  reads[i].spec.is_list ? py::object(as_bytes(lengths[i]))
                                                        : py::object(py::none())));
  }
  return columns;
}

}  // namespace

void RegisterDatapoints(py::module_& m) {
  py::class_<DatasetReadError>(m, "DatasetReadError",
                               "Where a batch of read_datapoints stopped: the datapoint "
                               "(index in the batch), the plan's field (None: its refs) "
                               "and why; the caller reads the batch the slower way.")
      .def_readonly("row", &DatasetReadError::row)
      .def_readonly("field", &DatasetReadError::field)
      .def_property_readonly("reason", [](const DatasetReadError& error) {
        switch (error.reason) {
          case DatasetReadError::Reason::kBadRefs: return "bad refs";
          case DatasetReadError::Reason::kRefOutside: return "ref outside the field";
          default: return "value not decoded";
        }
      })
      .def("__repr__", [](const DatasetReadError& error) {
        return "<DatasetReadError row " + std::to_string(error.row) + ">";
      });
  py::class_<BoundPlan>(m, "DatasetReadPlan",
                              "The read rules of one mask of a dataset: the fields read "
                              "(spec positions), their list ranges and codecs (see "
                              "native/datasets/dataset_read_plan.h).")
      .def(py::init(&MakePlan), py::arg("fields"), py::arg("mask"), py::arg("where"),
           "fields: the spec's, in order, as (name, is_list, kind, int size, big-endian); "
           "mask: None or a mapping; raises TypeError / ValueError for a bad mask, the "
           "messages prefixed by `where`.")
      .def_property_readonly("positions", [](const BoundPlan& bound) {
        std::vector<size_t> positions;
        for (const DatasetFieldRead& read : bound.plan.fields()) positions.push_back(read.position);
        return positions;
      }, "The spec positions of the fields read, in spec order.")
      .def_property_readonly("any_list",
                             [](const BoundPlan& bound) { return bound.plan.any_list(); })
      .def("list_items", &ListItems, py::arg("field"), py::arg("starts"), py::arg("stops"),
           "The items read of lists [starts[k], stops[k]) of the plan's field `field`: "
           "(starts, stops), the mask's range clipped to each list.");
  m.def("check_dataset_mask", &CheckMask, py::arg("mask"),
        "A mask's shape without a spec (a mapping of bools, ranges and slices), as a dict; "
        "TypeError otherwise.");
  m.def("read_datapoints", &ReadDatapoints, py::arg("refs"), py::arg("rows"), py::arg("plan"),
        py::arg("readers"),
        "A batch of datasets' datapoints as dicts, or a DatasetReadError when the batch "
        "must go the slower way (see native/python/datasets/datapoints.cc).");
  m.def("parse_dataset_refs", &ParseRefsColumns, py::arg("data"), py::arg("offsets"),
        py::arg("plan"),
        "Packed refs.bag records as (starts, lengths) int64 columns for the refs "
        "of the plan's fields, or None when a record is not what bags writes.");
}

}  // namespace sackli::python
