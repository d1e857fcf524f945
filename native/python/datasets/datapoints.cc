// `_engine.read_datapoints`: a batch of sackli.datasets datapoints (dicts of
// field values) built in one call, for DatasetReader.read_indices; and
// `_engine.parse_dataset_refs`, the same refs parser for column readers.
//
// The refs of the batch are parsed in C++ (dataset_refs.h). Then, for a bag
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
// field's bag, a value that does not decode as its kind) returns None: the
// caller then reads the batch the slower way, which names the problem. Engine
// errors (a damaged or changed file) are raised as for any read.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

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

// How a field's records become values.
enum class ValueKind {
  kBytes = 0,     // the record as `bytes` (also: decoded by the caller)
  kUtf8 = 1,      // UTF-8 as `str`
  kUnsigned = 2,  // an unsigned integer of `int_size` bytes as `int`
};

// One field to read, as the caller describes it.
struct FieldPlan {
  py::object name;
  size_t position = 0;  // of its ref in a refs record
  bool is_list = false;
  const Reader* reader = nullptr;
  ValueKind kind = ValueKind::kBytes;
  size_t int_size = 0;
  bool big_endian = false;
  // List fields: items [first, last) of each list (last: none when absent).
  uint64_t first = 0;
  std::optional<uint64_t> last;

  // This batch: datapoint k's records are the view indices [run_start[k],
  // run_start[k] + run_length[k]) (one record for a scalar field); globals,
  // all of them in order, for the reads that take global indices.
  std::vector<uint64_t> run_start;
  std::vector<uint64_t> run_length;
  std::vector<uint64_t> globals;
};

FieldPlan FieldArgument(py::handle spec) {
  const py::tuple t = py::reinterpret_borrow<py::tuple>(spec);
  if (t.size() != 9) ThrowInvalidArgument("a field of read_datapoints is a 9-tuple");
  FieldPlan field;
  field.name = t[0];
  field.position = t[1].cast<size_t>();
  field.is_list = t[2].cast<bool>();
  field.reader = &t[3].cast<const Reader&>();
  field.kind = static_cast<ValueKind>(t[4].cast<int>());
  field.int_size = t[5].cast<size_t>();
  field.big_endian = t[6].cast<bool>();
  field.first = t[7].cast<uint64_t>();
  if (!t[8].is_none()) field.last = t[8].cast<uint64_t>();
  if (field.kind == ValueKind::kUnsigned && (field.int_size == 0 || field.int_size > 8)) {
    ThrowInvalidArgument("unsigned values of read_datapoints are 1 to 8 bytes");
  }
  return field;
}

// Each datapoint's run of records in each field, from refs `refs` (row-major,
// one ref per field of the refs record); false when a ref lies outside its
// field's bag.
bool PlanRuns(const std::vector<DatasetRef>& refs, size_t refs_per_row, size_t rows,
              std::vector<FieldPlan>& fields) {
  for (FieldPlan& field : fields) {
    const uint64_t length = field.reader->size();
    field.run_start.reserve(rows);
    field.run_length.reserve(rows);
    for (size_t k = 0; k < rows; ++k) {
      const DatasetRef& ref = refs[k * refs_per_row + field.position];
      if (!field.is_list) {
        if (ref.start >= length) return false;
        field.run_start.push_back(ref.start);
        field.run_length.push_back(1);
        continue;
      }
      if (ref.start > length || ref.length > length - ref.start) return false;
      uint64_t stop = ref.start + ref.length;
      if (field.last && *field.last < ref.length) stop = ref.start + *field.last;
      const uint64_t start = ref.start + field.first;
      field.run_start.push_back(start);
      field.run_length.push_back(start < stop ? stop - start : 0);
    }
  }
  return true;
}

// field.globals: the field's records as global indices, run after run.
void PlanGlobals(FieldPlan& field) {
  for (size_t k = 0; k < field.run_start.size(); ++k) {
    for (uint64_t i = 0; i < field.run_length[k]; ++i) {
      field.globals.push_back(
          field.reader->GlobalIndex(static_cast<int64_t>(field.run_start[k] + i)));
    }
  }
}

// The value of record[0, size) as the field's kind makes it (a new
// reference), or nullptr when it does not decode as that kind (no Python
// error set: the slower way names the record).
PyObject* MakeValue(const FieldPlan& field, const char* record, size_t size) {
  switch (field.kind) {
    case ValueKind::kBytes: {
      PyObject* value = PyBytes_FromStringAndSize(record, static_cast<Py_ssize_t>(size));
      if (value == nullptr) throw py::error_already_set();
      return value;
    }
    case ValueKind::kUtf8: {
      PyObject* value = PyUnicode_DecodeUTF8(record, static_cast<Py_ssize_t>(size), nullptr);
      if (value == nullptr) {
        if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) throw py::error_already_set();
        PyErr_Clear();
      }
      return value;
    }
    case ValueKind::kUnsigned: {
      if (size != field.int_size) return nullptr;  // `bags` decodes it: the slower way
      uint64_t number = 0;
      for (size_t i = 0; i < size; ++i) {
        const auto byte = static_cast<unsigned char>(record[field.big_endian ? i : size - 1 - i]);
        number = (number << 8) | byte;
      }
      PyObject* value = PyLong_FromUnsignedLongLong(number);
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

// A record's bytes: where it lies in its mapping, or in a packed read.
struct RecordBytes {
  const char* data;
  uint64_t size;
};

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
      records.push_back({data + offsets[i], offsets[i + 1] - offsets[i]});
    }
  }
  return records;
}

// RecordsInPlace of a field's runs.
std::optional<std::vector<RecordBytes>> FieldRecordsInPlace(const FieldPlan& field) {
  const View& view = field.reader->view();
  return RecordsInPlace(*field.reader, field.run_start.size(), [&](size_t k) {
    return std::pair(view.Global(field.run_start[k]), field.run_length[k]);
  });
}

// The values of `field` for each datapoint from its records (run after
// run): a list of n values, or of n lists for a list field; None when one
// does not decode as the field's kind. The reads are guarded: the records
// may lie in the field's mapping.
py::object MakeValues(const FieldPlan& field, const std::vector<RecordBytes>& records, size_t n) {
  py::list values(n);
  bool decoded = true;
  GuardedBag(*field.reader->bag(), [&] {
    size_t at = 0;
    auto make = [&]() {
      const RecordBytes& record = records[at++];
      PyObject* value = MakeValue(field, record.data, static_cast<size_t>(record.size));
      decoded = value != nullptr;
      return value;
    };
    for (size_t k = 0; k < n && decoded; ++k) {
      if (!field.is_list) {
        PyObject* value = make();
        if (decoded) PyList_SET_ITEM(values.ptr(), static_cast<Py_ssize_t>(k), value);
        continue;
      }
      const uint64_t length = field.run_length[k];
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

// read_datapoints(refs, rows, fields, refs_are_lists) -> list of dicts, or
// None (see top). `rows`: view indices of `refs`; `fields`: the fields to
// read (FieldArgument); refs_are_lists[i]: whether ref i of a refs record is
// a list field's.
py::object ReadDatapoints(const Reader& refs_reader, py::handle rows, py::list field_specs,
                          py::list refs_are_lists) {
  // Every field's ref is parsed (the record must be what `bags` writes),
  // whether the batch reads the field or not.
  std::vector<bool> is_list;
  for (py::handle item : refs_are_lists) is_list.push_back(item.cast<bool>());
  const size_t refs_per_row = is_list.size();
  std::vector<FieldPlan> fields;
  for (py::handle spec : field_specs) {
    fields.push_back(FieldArgument(spec));
    if (fields.back().position >= refs_per_row ||
        is_list[fields.back().position] != fields.back().is_list) {
      ThrowInvalidArgument("a field of read_datapoints does not match refs_are_lists");
    }
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
  std::vector<DatasetRef> refs(n * refs_per_row);
  bool planned = true;
  {
    ReleaseGil release;
    GuardedBag(*refs_reader.bag(), [&] {
      for (size_t k = 0; k < n && planned; ++k) {
        const RecordBytes& record = (*ref_records)[k];
        planned = ParseDatasetRefs(record.data, static_cast<size_t>(record.size), is_list,
                                   refs.data() + k * refs_per_row);
      }
    });
    planned = planned && PlanRuns(refs, refs_per_row, n, fields);
  }
  if (!planned) return py::none();
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
  for (size_t f = 0; f < fields.size(); ++f) {
    const bool in_place = ReadableInPlace(*fields[f].reader);
    if (!fields[f].is_list && fields[f].kind == ValueKind::kBytes &&
        !(in_place && n <= kFewRowsInPlace)) {
      PlanGlobals(fields[f]);
      as_bytes[f].emplace(*fields[f].reader, fields[f].globals);
    } else if (!in_place) {
      start_packed(f);
    }
  }
  for (size_t f = 0; f < fields.size(); ++f) {
    if (as_bytes[f] || packed[f]) continue;
    std::optional<std::vector<RecordBytes>> records = FieldRecordsInPlace(fields[f]);
    if (!records) {  // a run across shards
      start_packed(f);
      continue;
    }
    values[f] = MakeValues(fields[f], *records, n);
    if (values[f].is_none()) return py::none();
  }
  for (size_t f = 0; f < fields.size(); ++f) {
    if (!packed[f]) continue;
    WaitNoticingSignals(*packed[f]);
    values[f] = MakeValues(fields[f], RecordsOf(packed[f]->Result()), n);
    if (values[f].is_none()) return py::none();
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
      if (PyDict_SetItem(datapoint, fields[f].name.ptr(), value) != 0) {
        throw py::error_already_set();
      }
    }
  }
  return datapoints;
}

// parse_dataset_refs(data, offsets, refs_are_lists, positions): the refs
// of packed refs.bag records (record k is data[offsets[k], offsets[k + 1]),
// offsets int64) as columns, for the refs at `positions`: a list of
// (starts, lengths) int64 buffers (lengths None for a scalar field), or None
// when a record is not what `bags` writes or a ref is 2**62 or more (the
// caller's per-record path then names the record).
py::object ParseRefsColumns(py::handle data, py::handle offsets, py::list refs_are_lists,
                            std::vector<size_t> positions) {
  std::vector<bool> is_list;
  for (py::handle item : refs_are_lists) is_list.push_back(item.cast<bool>());
  for (size_t position : positions) {
    if (position >= is_list.size()) ThrowInvalidArgument("a ref position past the record");
  }
  BorrowedBytes bytes(data.ptr());
  BorrowedBytes ends(offsets.ptr());
  const size_t bounds = ends.view().size() / sizeof(int64_t);
  const size_t n = bounds == 0 ? 0 : bounds - 1;
  std::vector<int64_t> at(bounds);
  if (bounds > 0) std::memcpy(at.data(), ends.view().data(), bounds * sizeof(int64_t));
  constexpr uint64_t kLargestRef = uint64_t{1} << 62;  // int64 with room for start + length
  std::vector<std::vector<int64_t>> starts(positions.size(), std::vector<int64_t>(n));
  std::vector<std::vector<int64_t>> lengths(positions.size(), std::vector<int64_t>(n));
  bool parsed = true;
  {
    ReleaseGil release;
    std::vector<DatasetRef> refs(is_list.size());
    const std::string_view view = bytes.view();
    for (size_t k = 0; k < n && parsed; ++k) {
      const int64_t begin = at[k];
      const int64_t end = at[k + 1];
      parsed = 0 <= begin && begin <= end && static_cast<uint64_t>(end) <= view.size() &&
               ParseDatasetRefs(view.data() + begin, static_cast<size_t>(end - begin), is_list,
                                refs.data());
      for (size_t i = 0; i < positions.size() && parsed; ++i) {
        const DatasetRef& ref = refs[positions[i]];
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
  for (size_t i = 0; i < positions.size(); ++i) {
    columns.append(py::make_tuple(as_bytes(starts[i]),
                                  is_list[positions[i]] ? py::object(as_bytes(lengths[i]))
                                                        : py::object(py::none())));
  }
  return columns;
}

}  // namespace

void RegisterDatapoints(py::module_& m) {
  m.def("read_datapoints", &ReadDatapoints, py::arg("refs"), py::arg("rows"),
        py::arg("fields"), py::arg("refs_are_lists"),
        "A batch of datasets' datapoints as dicts, or None when the batch must "
        "go the slower way (see native/python/datapoints.cc).");
  m.def("parse_dataset_refs", &ParseRefsColumns, py::arg("data"), py::arg("offsets"),
        py::arg("refs_are_lists"), py::arg("positions"),
        "Packed refs.bag records as (starts, lengths) int64 columns for the refs "
        "at `positions`, or None when a record is not what bags writes.");
}

}  // namespace sackli::python
