// `_engine.read_datapoints`: a batch of sackli.datasets datapoints (dicts of
// field values) built in one call, for DatasetReader.read_indices.
//
// The refs of the batch are read in one engine batch and parsed here
// (dataset_refs.h); each field's records are then read in one engine batch,
// all fields at once on the pool: `bytes` fields straight into their `bytes`
// objects, the others packed, while this thread turns the packed ones into
// `str` or `int` objects. Fields whose decoder is not one of those come back
// as `bytes` for the caller to decode.
//
// Anything unusual (refs that are not what `bags` writes, a ref outside its
// field's bag, a value that does not decode as its kind) returns None: the
// caller then reads the batch the slower way, which names the problem. Engine
// errors (a damaged or changed file) are raised as for any read.
#include <pybind11/pybind11.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dataset_refs.h"
#include "python/buffers.h"
#include "python/gil.h"
#include "python/indices.h"
#include "python/reader_core.h"
#include "python/register.h"
#include "reader.h"

namespace py = pybind11;

namespace sackli::python {
namespace {

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

  // This batch: the records to read, and where each datapoint's items are
  // (list fields: datapoint k's items are values[begin[k], begin[k + 1])).
  std::vector<uint64_t> globals;
  std::vector<size_t> begin;
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

// The records `globals` of `reader`, packed, read on the pool.
std::shared_ptr<PendingRead> StartPacked(const FieldPlan& field) {
  return field.reader->StartRead(field.globals);
}

// Which records each field needs for datapoints with refs `refs` (row-major,
// one ref per field of the refs record); false when a ref lies outside its
// field's bag.
bool PlanRecords(const std::vector<DatasetRef>& refs, size_t refs_per_row, size_t rows,
                 std::vector<FieldPlan>& fields) {
  for (FieldPlan& field : fields) {
    const uint64_t length = field.reader->size();
    field.globals.reserve(rows);
    if (field.is_list) field.begin.reserve(rows + 1);
    for (size_t k = 0; k < rows; ++k) {
      const DatasetRef& ref = refs[k * refs_per_row + field.position];
      if (!field.is_list) {
        if (ref.start >= length) return false;
        field.globals.push_back(field.reader->GlobalIndex(static_cast<int64_t>(ref.start)));
        continue;
      }
      if (ref.start > length || ref.length > length - ref.start) return false;
      uint64_t stop = ref.start + ref.length;
      if (field.last && *field.last < ref.length) stop = ref.start + *field.last;
      field.begin.push_back(field.globals.size());
      for (uint64_t i = ref.start + field.first; i < stop; ++i) {
        field.globals.push_back(field.reader->GlobalIndex(static_cast<int64_t>(i)));
      }
    }
    if (field.is_list) field.begin.push_back(field.globals.size());
  }
  return true;
}

// The values of packed records as `str` or `int` objects (a new list), or
// None when one does not decode as the field's kind.
py::object PackedValues(const FieldPlan& field, const DecodedRecords& records) {
  const size_t n = records.offsets.size() - 1;
  py::list values(n);
  const char* data = records.data.data();
  for (size_t k = 0; k < n; ++k) {
    const char* record = data + records.offsets[k];
    const size_t size = static_cast<size_t>(records.offsets[k + 1] - records.offsets[k]);
    PyObject* value;
    if (field.kind == ValueKind::kUtf8) {
      value = PyUnicode_DecodeUTF8(record, static_cast<Py_ssize_t>(size), nullptr);
      if (value == nullptr) {
        PyErr_Clear();  // the slower way names the record
        return py::none();
      }
    } else {
      if (size != field.int_size) return py::none();  // as `bags` reads it: the slower way
      uint64_t number = 0;
      for (size_t i = 0; i < size; ++i) {
        const auto byte = static_cast<unsigned char>(record[field.big_endian ? i : size - 1 - i]);
        number = (number << 8) | byte;
      }
      value = PyLong_FromUnsignedLongLong(number);
      if (value == nullptr) throw py::error_already_set();
    }
    PyList_SET_ITEM(values.ptr(), static_cast<Py_ssize_t>(k), value);
  }
  return values;
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
  std::shared_ptr<PendingRead> refs_read = refs_reader.StartRead(std::move(ref_globals));
  WaitNoticingSignals(*refs_read);
  std::vector<DatasetRef> refs(n * refs_per_row);
  bool planned = true;
  {
    ReleaseGil release;
    const DecodedRecords& records = refs_read->Result();
    for (size_t k = 0; k < n && planned; ++k) {
      const uint64_t begin = records.offsets[k];
      planned = ParseDatasetRefs(records.data.data() + begin,
                                 static_cast<size_t>(records.offsets[k + 1] - begin), is_list,
                                 refs.data() + k * refs_per_row);
    }
    planned = planned && PlanRecords(refs, refs_per_row, n, fields);
  }
  if (!planned) return py::none();
  // Every field's read starts now; the pool runs them while the values of
  // the packed ones are made below, in order.
  std::vector<std::optional<PendingRecords>> as_bytes(fields.size());
  std::vector<std::shared_ptr<PendingRead>> packed(fields.size());
  for (size_t f = 0; f < fields.size(); ++f) {
    if (fields[f].kind == ValueKind::kBytes) {
      as_bytes[f].emplace(*fields[f].reader, fields[f].globals);
    } else {
      packed[f] = StartPacked(fields[f]);
    }
  }
  std::vector<py::object> values(fields.size());
  for (size_t f = 0; f < fields.size(); ++f) {
    if (!packed[f]) continue;
    WaitNoticingSignals(*packed[f]);
    values[f] = PackedValues(fields[f], packed[f]->Result());
    if (values[f].is_none()) return py::none();
  }
  for (size_t f = 0; f < fields.size(); ++f) {
    if (as_bytes[f]) values[f] = as_bytes[f]->Result();
  }
  py::list datapoints(n);
  for (size_t k = 0; k < n; ++k) {
    py::dict datapoint;
    for (size_t f = 0; f < fields.size(); ++f) {
      PyObject* list = values[f].ptr();
      PyObject* value;
      if (fields[f].is_list) {
        value = PyList_GetSlice(list, static_cast<Py_ssize_t>(fields[f].begin[k]),
                                static_cast<Py_ssize_t>(fields[f].begin[k + 1]));
        if (value == nullptr) throw py::error_already_set();
      } else {
        value = PyList_GET_ITEM(list, static_cast<Py_ssize_t>(k));
        Py_INCREF(value);
      }
      const int status = PyDict_SetItem(datapoint.ptr(), fields[f].name.ptr(), value);
      Py_DECREF(value);
      if (status != 0) throw py::error_already_set();
    }
    PyList_SET_ITEM(datapoints.ptr(), static_cast<Py_ssize_t>(k), datapoint.release().ptr());
  }
  return datapoints;
}

}  // namespace

void RegisterDatapoints(py::module_& m) {
  m.def("read_datapoints", &ReadDatapoints, py::arg("refs"), py::arg("rows"),
        py::arg("fields"), py::arg("refs_are_lists"),
        "A batch of datasets' datapoints as dicts, or None when the batch must "
        "go the slower way (see native/python/datapoints.cc).");
}

}  // namespace sackli::python
