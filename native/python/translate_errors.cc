#include "python/translate_errors.h"
#include "python/register.h"

#include <cerrno>
#include <new>
#include <stdexcept>
#include <string>

#include "bagz/errors.h"

namespace py = pybind11;

namespace sackli::python {
namespace {

PyObject* g_corruption_error = nullptr;

void RaiseOsError(int errno_value, const std::string& message,
                  const std::string& path) {
  // OSError(errno, message, filename) picks the subclass from errno
  // (FileNotFoundError, PermissionError, IsADirectoryError, ...).
  py::object error = py::reinterpret_steal<py::object>(PyObject_CallFunction(
      PyExc_OSError, "(iss)", errno_value ? errno_value : EIO, message.c_str(),
      path.c_str()));
  if (!error) return;  // the call raised; that error stands
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(error.ptr())),
                  error.ptr());
}

void TranslateError(std::exception_ptr ptr) {
  try {
    std::rethrow_exception(ptr);
  } catch (const Error& e) {
    switch (e.kind()) {
      case ErrorKind::kNotFound:
        RaiseOsError(e.errno_value() ? e.errno_value() : ENOENT, e.what(),
                     e.path());
        return;
      case ErrorKind::kIo:
        RaiseOsError(e.errno_value(), e.what(), e.path());
        return;
      case ErrorKind::kCorruption:
        PyErr_SetString(g_corruption_error, e.what());
        return;
      case ErrorKind::kOutOfRange:
        PyErr_SetString(PyExc_IndexError, e.what());
        return;
      case ErrorKind::kInvalidArgument:
      case ErrorKind::kClosed:
        PyErr_SetString(PyExc_ValueError, e.what());
        return;
    }
  } catch (const std::invalid_argument& e) {
    PyErr_SetString(PyExc_ValueError, e.what());
  }
}

}  // namespace

void RegisterErrors(py::module_& m) {
  static py::exception<Error> corruption(m, "CorruptionError", PyExc_ValueError);
  g_corruption_error = corruption.ptr();
  py::register_exception_translator(&TranslateError);
}

PyObject* SetPythonError() {
  try {
    throw;
  } catch (py::error_already_set& e) {
    e.restore();
  } catch (const py::builtin_exception& e) {
    e.set_error();
  } catch (const std::bad_alloc&) {
    // Out of memory (RLIMIT_AS, a huge record): MemoryError, as Python's
    // own allocations raise, never an abort.
    PyErr_NoMemory();
  } catch (...) {
    try {
      TranslateError(std::current_exception());
    } catch (...) {
      // Not an engine error: said below.
    }
    if (!PyErr_Occurred()) {
      PyErr_SetString(PyExc_RuntimeError, "sackli: unexpected C++ exception");
    }
  }
  return nullptr;
}

}  // namespace sackli::python
