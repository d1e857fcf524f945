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
PyObject* g_too_large_error = nullptr;
PyObject* g_engine_error = nullptr;

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

// The Python exception type of an engine error that is no OSError.
PyObject* PythonTypeOf(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kCorruption:
      return g_corruption_error;
    case ErrorKind::kOutOfRange:
      return PyExc_IndexError;
    case ErrorKind::kInvalidArgument:
    case ErrorKind::kClosed:
      return PyExc_ValueError;
    case ErrorKind::kOutOfMemory:
      return PyExc_MemoryError;
    case ErrorKind::kTooLarge:
      return g_too_large_error;
    case ErrorKind::kNotFound:
    case ErrorKind::kIo:
      break;  // OSErrors, chosen by errno: see TranslateError
  }
  return g_engine_error;
}

// Every exception a binding lets out becomes a Python exception here; none
// may escape (through a plain CPython entry point it would abort the
// process). pybind11's own exceptions go on to pybind11's translator.
void TranslateError(std::exception_ptr ptr) {
  try {
    std::rethrow_exception(ptr);
  } catch (const py::error_already_set&) {
    throw;
  } catch (const py::builtin_exception&) {
    throw;
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::kNotFound) {
      RaiseOsError(e.errno_value() ? e.errno_value() : ENOENT, e.what(), e.path());
    } else if (e.kind() == ErrorKind::kIo) {
      RaiseOsError(e.errno_value(), e.what(), e.path());
    } else {
      PyErr_SetString(PythonTypeOf(e.kind()), e.what());
    }
  } catch (const std::invalid_argument& e) {
    PyErr_SetString(PyExc_ValueError, e.what());
  } catch (const std::bad_alloc&) {
    // Where the file and record are known the engine throws kOutOfMemory
    // naming them; this is an allocation elsewhere (a plan, a buffer).
    PyErr_SetString(PyExc_MemoryError, "sackli: out of memory");
  } catch (const std::exception& e) {
    PyErr_SetString(g_engine_error, (std::string("sackli engine: ") + e.what()).c_str());
  } catch (...) {
    PyErr_SetString(g_engine_error, "sackli engine: an unknown C++ exception");
  }
}

// _engine._raise_for_test(kind): throws the C++ exception `kind` names, so
// tests see what every entry point's translation makes of it.
void RaiseForTest(const std::string& kind) {
  if (kind == "bad_alloc") throw std::bad_alloc();
  if (kind == "runtime_error") throw std::runtime_error("injected runtime_error");
  if (kind == "logic_error") throw std::logic_error("injected logic_error");
  if (kind == "unknown") throw 42;
  if (kind == "out_of_memory") {
    throw Error(ErrorKind::kOutOfMemory, "f.bagz: record 3: out of memory (injected)", "f.bagz");
  }
  if (kind == "too_large") {
    throw Error(ErrorKind::kTooLarge, "f.bagz: record 3 decodes to 9 bytes (injected)", "f.bagz");
  }
  ThrowInvalidArgument("_raise_for_test: unknown kind " + kind);
}

// The same through a plain CPython entry point (SetPythonError), as r[i] is.
PyObject* RaiseForTestFast(PyObject*, PyObject* kind) {
  try {
    RaiseForTest(py::cast<std::string>(py::handle(kind)));
    Py_RETURN_NONE;
  } catch (...) {
    return SetPythonError();
  }
}

PyMethodDef g_raise_for_test_fast = {
    "_raise_for_test_fast", RaiseForTestFast, METH_O,
    "_raise_for_test_fast(kind): as _raise_for_test, through a plain CPython "
    "entry point (tests only)."};

}  // namespace

void RegisterErrors(py::module_& m) {
  static py::exception<Error> corruption(m, "CorruptionError", PyExc_ValueError);
  g_corruption_error = corruption.ptr();
  // Distinct C++ tags: py::exception<T> keeps one Python type per T.
  struct TooLargeTag {};
  struct EngineTag {};
  static py::exception<TooLargeTag> too_large(m, "RecordTooLargeError", PyExc_ValueError);
  g_too_large_error = too_large.ptr();
  static py::exception<EngineTag> engine(m, "EngineError", PyExc_RuntimeError);
  g_engine_error = engine.ptr();
  py::register_exception_translator(&TranslateError);
  m.def("_raise_for_test", &RaiseForTest, py::arg("kind"),
        "Throws the C++ exception `kind` names (bad_alloc, runtime_error, "
        "logic_error, unknown, out_of_memory, too_large): tests only.");
  py::object fast = py::reinterpret_steal<py::object>(
      PyCFunction_New(&g_raise_for_test_fast, nullptr));
  if (!fast) throw py::error_already_set();
  m.attr("_raise_for_test_fast") = fast;
}

PyObject* SetPythonError() {
  try {
    throw;
  } catch (py::error_already_set& e) {
    e.restore();
  } catch (const py::builtin_exception& e) {
    e.set_error();
  } catch (...) {
    // TranslateError turns every C++ exception into a Python one
    // (std::bad_alloc into MemoryError): none escapes to abort.
    TranslateError(std::current_exception());
    if (!PyErr_Occurred()) {
      PyErr_SetString(PyExc_RuntimeError, "sackli: unexpected C++ exception");
    }
  }
  return nullptr;
}

}  // namespace sackli::python
