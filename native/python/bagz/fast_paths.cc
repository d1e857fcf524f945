// Entry points written as plain CPython functions rather than pybind11
// bindings. Why: a lone record read (`r[i]`) or index lookup
// (`index[record]`) does so little work that pybind11's dispatch (argument
// loading, overload resolution) would cost as much as the work itself. So:
//   - `ReaderCore.get(i)`, a method descriptor on the bound class;
//   - `reader_getitem`, which sackli.Reader takes as its __getitem__, so that
//     `r[i]` runs no Python frame: once the class exists,
//     install_reader_getitem(Reader) makes it a method descriptor of the
//     class, which Python calls unbound (no bound method made per call), and
//     notes where instances keep `_core`;
//   - `RecordIndex.__getitem__` / `__contains__`, method descriptors.
// Everything else about these classes is bound in reader_core.cc and
// index.cc; these functions only convert arguments and call them.
#include <pybind11/pybind11.h>
#include <structmember.h>

#include "python/indices.h"
#include "python/bagz/lookup.h"
#include "python/bagz/reader_core.h"
#include "python/register.h"
#include "python/translate_errors.h"
#include "bagz/reader.h"

namespace py = pybind11;

namespace sackli::python {
namespace {

// The C++ object inside `self`, an instance of a bound class (or of a Python
// subclass of it) whose type the caller has checked, read from pybind11's
// instance layout directly: py::cast looks the type up on every call, which
// made an index lookup ~1.5x slower (90 -> 130 ns measured) and cost a tenth
// of a small r[i]. `what` names the object in the error for an instance
// whose __init__ never ran.
template <typename T>
const T& BoundValue(PyObject* self, const char* what) {
  auto* instance = reinterpret_cast<py::detail::instance*>(self);
  const void* value = instance->get_value_and_holder().value_ptr();
  if (value == nullptr) {
    throw py::type_error(std::string(what) + " was not initialised (__init__ not called)");
  }
  return *static_cast<const T*>(value);
}

// The engine reader inside `core`, a ReaderCore.
const Reader& ReaderOf(PyObject* core) { return BoundValue<Reader>(core, "the reader core"); }

// ReaderCore.get(index), and r[i] once the core is found.
PyObject* GetRecord(PyObject* core, PyObject* index) {
  try {
    return ReadRecord(ReaderOf(core), IndexArgument(index)).release().ptr();
  } catch (...) {
    return SetPythonError();
  }
}

PyMethodDef g_reader_core_get = {
    "get", GetRecord, METH_O,
    "get(index) -> bytes: the record at a view index (negative from the end)."};

PyTypeObject* g_reader_core_type = nullptr;
// sackli.Reader and the offset of its `_core` slot in an instance, once
// install_reader_getitem ran; instances of that exact class read the slot
// directly (subclasses, which could redefine `_core`, through getattr).
PyTypeObject* g_reader_type = nullptr;
Py_ssize_t g_core_offset = 0;

// The reader's `_core` (a new reference), or nullptr with an exception set.
PyObject* CoreOf(PyObject* reader) {
  static PyObject* core_name = PyUnicode_InternFromString("_core");
  if (Py_TYPE(reader) == g_reader_type) {
    PyObject* core = *reinterpret_cast<PyObject**>(
        reinterpret_cast<char*>(reader) + g_core_offset);
    if (core != nullptr) {
      Py_INCREF(core);  // held: close() may drop it while a read runs
      return core;
    }
  }
  return PyObject_GetAttr(reader, core_name);
}

// reader_getitem(reader, index): integers (ints, and scalars with __index__
// that are not sequences, e.g. numpy integers) are read here; everything else
// (slices, lists, arrays, wrong types) and closed readers, whose `_core`
// raises, go to `reader._getitem_slow(index)`.
PyObject* ReaderGetItem(PyObject* reader, PyObject* index) {
  static PyObject* slow_name = PyUnicode_InternFromString("_getitem_slow");
  // numpy arrays have __index__ too (for 0-d arrays), but are sequences.
  if (PyLong_Check(index) || (PyIndex_Check(index) && !PySequence_Check(index))) {
    PyObject* core = CoreOf(reader);
    if (core == nullptr) return nullptr;
    const bool open = Py_TYPE(core) == g_reader_core_type;
    PyObject* result = open ? GetRecord(core, index) : nullptr;
    Py_DECREF(core);
    if (open) return result;
  }
  return PyObject_CallMethodOneArg(reader, slow_name, index);
}

// As a plain function (the module's `reader_getitem` until the class is
// installed) and as a method of sackli.Reader.
PyObject* ReaderGetItemFast(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 2) {
    PyErr_SetString(PyExc_TypeError, "__getitem__ takes exactly one argument");
    return nullptr;
  }
  return ReaderGetItem(args[0], args[1]);
}

PyMethodDef g_reader_getitem = {
    "reader_getitem",
    reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(ReaderGetItemFast)),
    METH_FASTCALL, "reader_getitem(reader, index): sackli.Reader.__getitem__."};

PyMethodDef g_reader_getitem_method = {
    "__getitem__", ReaderGetItem, METH_O | METH_COEXIST,
    "r[i]: the record at i; r[a:b:c]: a view; r[list or array]: those records."};

// install_reader_getitem(Reader): Reader.__getitem__ becomes a method
// descriptor of Reader (also the module's `reader_getitem` from then on).
PyObject* InstallReaderGetItem(PyObject* module, PyObject* cls) {
  if (!PyType_Check(cls)) {
    PyErr_SetString(PyExc_TypeError, "install_reader_getitem takes a class");
    return nullptr;
  }
  auto* type = reinterpret_cast<PyTypeObject*>(cls);
  PyObject* slot = PyDict_GetItemString(type->tp_dict, "_core");  // borrowed
  if (slot == nullptr || !Py_IS_TYPE(slot, &PyMemberDescr_Type) ||
      reinterpret_cast<PyMemberDescrObject*>(slot)->d_member->type != T_OBJECT_EX) {
    PyErr_SetString(PyExc_TypeError, "the class has no `_core` slot");
    return nullptr;
  }
  PyObject* method = PyDescr_NewMethod(type, &g_reader_getitem_method);
  if (method == nullptr) return nullptr;
  if (PyObject_SetAttrString(cls, "__getitem__", method) != 0 ||
      PyObject_SetAttrString(module, "reader_getitem", method) != 0) {
    Py_DECREF(method);
    return nullptr;
  }
  Py_DECREF(method);
  g_core_offset = reinterpret_cast<PyMemberDescrObject*>(slot)->d_member->offset;
  g_reader_type = type;
  Py_RETURN_NONE;
}

PyMethodDef g_install_reader_getitem = {
    "install_reader_getitem", InstallReaderGetItem, METH_O,
    "install_reader_getitem(Reader): makes r[i] a method of Reader (done once "
    "by sackli._reader)."};

// The engine index inside `self` (a RecordIndex or a Python subclass of it,
// which the method descriptor has checked).
const RecordIndex& IndexOf(PyObject* self) { return BoundValue<RecordIndex>(self, "the index"); }

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
  py::object install = py::reinterpret_steal<py::object>(
      PyCFunction_New(&g_install_reader_getitem, m.ptr()));
  if (!install) throw py::error_already_set();
  m.attr("install_reader_getitem") = install;

  py::handle index_type = m.attr("RecordIndex");
  AddMethod(index_type, &g_index_getitem);
  AddMethod(index_type, &g_index_contains);
}

}  // namespace sackli::python
