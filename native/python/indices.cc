#include "python/indices.h"

#include <cstring>
#include <string>
#include <type_traits>

#include "bagz/errors.h"

namespace py = pybind11;

namespace sackli::python {
namespace {

// An int-like item at `position` as int64; IndexError beyond int64.
int64_t ToInt64(PyObject* item, size_t position) {
  py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(item));
  if (!index) throw py::error_already_set();
  int overflow = 0;
  const long long value = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
  if (overflow != 0) {
    ThrowOutOfRange("index " + py::str(index).cast<std::string>() +
                    " is out of range (at position " + std::to_string(position) +
                    ")");
  }
  if (value == -1 && PyErr_Occurred()) throw py::error_already_set();
  return value;
}

// The global index of `indices[k] == index`.
uint64_t GlobalAt(const View& view, int64_t index, size_t k) {
  uint64_t j;
  if (!view.TryResolve(index, &j)) {
    ThrowOutOfRange("indices[" + std::to_string(k) + "] = " +
                    std::to_string(index) + " out of range for a reader of " +
                    std::to_string(view.length) + " records");
  }
  return view.Global(j);
}

// The global indices of a buffer of integers; false, adding nothing, when
// `object` is not a buffer or holds integers in a foreign byte order (read
// item by item then).
bool TryBufferIndices(const View& view, PyObject* object,
                      std::vector<uint64_t>& globals) {
  std::string format;
  py::ssize_t ndim = 0;
  const IntegerBuffer found = ForEachBufferInteger(object, [&](size_t k, auto value) {
    if constexpr (std::is_unsigned_v<decltype(value)>) {
      if (value > static_cast<decltype(value)>(INT64_MAX)) {
        ThrowOutOfRange("indices[" + std::to_string(k) + "] = " + std::to_string(value) +
                        " out of range for a reader of " + std::to_string(view.length) +
                        " records");
      }
    }
    globals.push_back(GlobalAt(view, static_cast<int64_t>(value), k));
  }, &format, &ndim);
  switch (found) {
    case IntegerBuffer::kIntegers: return true;
    case IntegerBuffer::kNotABuffer:
    case IntegerBuffer::kForeignOrder: return false;
    case IntegerBuffer::kOtherShape:
      ThrowInvalidArgument("indices must be one-dimensional, not " + std::to_string(ndim) +
                           "-dimensional");
    case IntegerBuffer::kOtherItems: break;
  }
  throw py::type_error("indices must be integers, not an array of format '" + format + "'");
}

}  // namespace

std::vector<uint64_t> ResolveIndices(const View& view, py::handle indices) {
  std::vector<uint64_t> globals;
  PyObject* object = indices.ptr();
  if (PySlice_Check(object)) {
    Py_ssize_t start, stop, step;
    if (PySlice_Unpack(object, &start, &stop, &step) < 0) {
      throw py::error_already_set();
    }
    const Py_ssize_t n = PySlice_AdjustIndices(
        static_cast<Py_ssize_t>(view.length), &start, &stop, step);
    const View sliced = view.Slice(start, step, static_cast<uint64_t>(n));
    globals.resize(sliced.length);
    for (uint64_t k = 0; k < sliced.length; ++k) globals[k] = sliced.Global(k);
    return globals;
  }
  if (TryBufferIndices(view, object, globals)) return globals;
  if (PyUnicode_Check(object) || PyBytes_Check(object)) {
    throw py::type_error("indices must be integers, not " +
                         std::string(Py_TYPE(object)->tp_name));
  }
  py::object sequence = py::reinterpret_steal<py::object>(
      PySequence_Fast(object, "indices must be an iterable of integers"));
  if (!sequence) throw py::error_already_set();
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(sequence.ptr());
  PyObject** items = PySequence_Fast_ITEMS(sequence.ptr());
  globals.reserve(static_cast<size_t>(n));
  for (Py_ssize_t k = 0; k < n; ++k) {
    const size_t position = static_cast<size_t>(k);
    globals.push_back(GlobalAt(view, ToInt64(items[k], position), position));
  }
  return globals;
}

size_t ValidPrefix(const View& view, const py::list& indices) {
  for (size_t k = 0; k < indices.size(); ++k) {
    PyObject* item = PyList_GET_ITEM(indices.ptr(), static_cast<Py_ssize_t>(k));
    py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(item));
    if (!index) {
      PyErr_Clear();
      return k;
    }
    int overflow = 0;
    const long long value = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
    uint64_t j;
    if (overflow != 0 || !view.TryResolve(value, &j)) return k;
  }
  return indices.size();
}

int64_t IndexArgument(PyObject* index) {
  if (!PyLong_Check(index) && !PyIndex_Check(index)) {
    throw py::type_error(std::string("reader indices must be integers or "
                                     "slices, not ") +
                         Py_TYPE(index)->tp_name);
  }
  return ToInt64(index, 0);
}

}  // namespace sackli::python
