// Engine errors as Python exceptions, one mapping for every binding (design
// notes §6): kNotFound -> FileNotFoundError (errno-chosen OSError subclass),
// kIo -> OSError subclass by errno, kCorruption -> sackli.CorruptionError (a
// ValueError), kOutOfRange -> IndexError, kInvalidArgument and kClosed ->
// ValueError, kOutOfMemory -> MemoryError, kTooLarge ->
// sackli.RecordTooLargeError (a ValueError). Every other C++ exception
// becomes a Python one too, never an abort: std::invalid_argument ->
// ValueError, std::bad_alloc -> MemoryError, any other -> sackli.EngineError
// (a RuntimeError: a bug). Bindings throw engine errors (ThrowOutOfRange, ...), never a
// Python exception of their own, except TypeError for wrong argument types.
#pragma once

#include <pybind11/pybind11.h>

namespace sackli::python {

// For plain CPython entry points (see fast_paths.cc): sets the Python error
// for the C++ exception being handled and returns nullptr. Call only inside
// a catch block.
PyObject* SetPythonError();

}  // namespace sackli::python
