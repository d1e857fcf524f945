// Python indices -> the engine's global indices. Accepted: a slice, any
// sequence or iterable of integers (anything with __index__), and
// one-dimensional integer buffers (numpy arrays of any integer dtype,
// array.array). Negative indices count from the end of the view.
// Failures: IndexError (kOutOfRange) naming the position and the value,
// "indices[3] = 12 out of range for a reader of 10 records"; ValueError
// (kInvalidArgument) for a buffer of more than one dimension; TypeError for
// anything that is not an integer.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <vector>

#include "view.h"

namespace sackli::python {

// The global indices of `indices` in `view`.
std::vector<uint64_t> ResolveIndices(const View& view, pybind11::handle indices);

// The number of leading entries of `indices` (a list) that are valid indices
// of the view: how far a lazily pulled batch may be read before its error.
size_t ValidPrefix(const View& view, const pybind11::list& indices);

// A reader index (`r[i]`) as int64: any int-like; IndexError beyond int64;
// TypeError for anything else.
int64_t IndexArgument(PyObject* index);

}  // namespace sackli::python
