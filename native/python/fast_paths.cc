// Entry points written as plain CPython functions rather than pybind11
// bindings. Why: a lone record read (`r[i]`) or index lookup
// (`index[record]`) does so little work that pybind11's dispatch (argument
// loading, overload resolution) would cost as much as the work itself. So:
//   - `ReaderCore.get(i)`, a method descriptor on the bound class;
//   - `reader_getitem`, which sackli.Reader takes as its __getitem__, so that
//     `r[i]` runs no Python frame;
//   - `RecordIndex.__getitem__` / `__contains__`, method descriptors.
// Everything else about these classes is bound in reader_core.cc and
// index.cc; these functions only convert arguments and call them.
#include <pybind11/pybind11.h>

#include "python/indices.h"
#include "python/lookup.h"
#include "python/reader_core.h"
#include "python/register.h"
#include "python/translate_errors.h"
#include "reader.h"

namespace py = pybind11;

namespace sackli::python {
namespace {

// ReaderCore.get(index), and r[i] once the core is found.
PyObject* GetRecord(PyObject* core, PyObject* index) {
  try {
    const Reader& reader = py::cast<const Reader&>(py::handle(core));
    return ReadRecord(reader, IndexArgument(index)).release().ptr();
  } catch (...) {
    return SetPythonError();
  }
}

PyMethodDef g_reader_core_get = {
    "get", GetRecord, METH_O,
    "get(index) -> bytes: the record at a view index (negative from the end)."};

PyTypeObject* g_reader_core_type = nullptr;

// reader_getitem(reader, index): integers (ints, and scalars with __index__
// that are not sequences, e.g. numpy integers) are read here; everything else
// (slices, lists, arrays, wrong types) and closed readers, whose `_core`
// raises, go to `reader._getitem_slow(index)`.
PyObject* ReaderGetItem(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 2) {
    PyErr_SetString(PyExc_TypeError, "__getitem__ takes exactly one argument");
    return nullptr;
  }
  PyObject* reader = args[0];
  PyObject* index = args[1];
  static PyObject* core_name = PyUnicode_InternFromString("_core");
  static PyObject* slow_name = PyUnicode_InternFromString("_getitem_slow");
  // numpy arrays have __index__ too (for 0-d arrays), but are sequences.
  if (PyLong_Check(index) || (PyIndex_Check(index) && !PySequence_Check(index))) {
    PyObject* core = PyObject_GetAttr(reader, core_name);
    if (core == nullptr) return nullptr;
    const bool open = Py_TYPE(core) == g_reader_core_type;
    PyObject* result = open ? GetRecord(core, index) : nullptr;
    Py_DECREF(core);
    if (open) return result;
  }
  return PyObject_CallMethodOneArg(reader, slow_name, index);
}

PyMethodDef g_reader_getitem = {
    "reader_getitem",
    reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(ReaderGetItem)),
    METH_FASTCALL, "reader_getitem(reader, index): sackli.Reader.__getitem__."};

// The engine index inside `self` (a RecordIndex or a Python subclass of it,
// which the method descriptor has checked). Read from pybind11's instance
// layout directly: py::cast would look the subclass's type up on every call,
// which made a lookup ~1.5x slower (90 -> 130 ns measured).
const RecordIndex& IndexOf(PyObject* self) {
  auto* instance = reinterpret_cast<py::detail::instance*>(self);
  const void* value = instance->get_value_and_holder().value_ptr();
  if (value == nullptr) {
    throw py::type_error("the index was not initialised (__init__ not called)");
  }
  return *static_cast<const RecordIndex*>(value);
}

PyObject* IndexGetItem(PyObject* self, PyObject* record) {
  try {
    py::object found = IndexLookup(IndexOf(self), record);
    if (found.is_none()) {
      PyErr_SetObject(PyExc_KeyError, record);
      return nullptr;
    }
    return found.release().ptr();
  } catch (...) {
    return SetPythonError();
  }
}

PyObject* IndexContains(PyObject* self, PyObject* record) {
  try {
    if (!PyBytes_Check(record) && !PyUnicode_Check(record) &&
        !PyObject_CheckBuffer(record)) {
      Py_RETURN_FALSE;
    }
    return PyBool_FromLong(!IndexLookup(IndexOf(self), record).is_none());
  } catch (...) {
    return SetPythonError();
  }
}

PyMethodDef g_index_getitem = {
    "__getitem__", IndexGetItem, METH_O | METH_COEXIST,
    "index[record]: the answer for `record` (bytes, str as UTF-8, or a "
    "bytes-like object); KeyError when absent."};
PyMethodDef g_index_contains = {
    "__contains__", IndexContains, METH_O | METH_COEXIST,
    "record in index: whether some record equals `record`."};

// Adds `def` to the bound class `type` as a method descriptor.
void AddMethod(py::handle type, PyMethodDef* def) {
  py::object method = py::reinterpret_steal<py::object>(
      PyDescr_NewMethod(reinterpret_cast<PyTypeObject*>(type.ptr()), def));
  if (!method || PyObject_SetAttrString(type.ptr(), def->ml_name,
                                        method.ptr()) != 0) {
    throw py::error_already_set();
  }
}

}  // namespace

void RegisterFastPaths(py::module_& m) {
  py::handle core_type = m.attr("ReaderCore");
  g_reader_core_type = reinterpret_cast<PyTypeObject*>(core_type.ptr());
  AddMethod(core_type, &g_reader_core_get);
  // An instancemethod binds the reader as the first argument, as a Python
  // function in the class body would.
  py::object getitem = py::reinterpret_steal<py::object>(
      PyCFunction_New(&g_reader_getitem, nullptr));
  if (!getitem) throw py::error_already_set();
  m.attr("reader_getitem") =
      py::reinterpret_steal<py::object>(PyInstanceMethod_New(getitem.ptr()));

  py::handle index_type = m.attr("RecordIndex");
  AddMethod(index_type, &g_index_getitem);
  AddMethod(index_type, &g_index_contains);
}

}  // namespace sackli::python
