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
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "bagz/view.h"

namespace sackli::python {

// What ForEachBufferInteger found `object` to be.
enum class IntegerBuffer {
  kNotABuffer,      // no buffer protocol, or bytes / bytearray (records, not numbers)
  kIntegers,        // a one-dimensional buffer of native integers: visited
  kForeignOrder,    // integers in a byte order other than this machine's
  kOtherItems,      // items that are not integers (floats, structs, ...)
  kOtherShape,      // not one-dimensional
};

// Calls fn(k, value) for the k-th item of a one-dimensional buffer of
// integers in native byte order (a numpy array of any integer dtype,
// array.array), `value` of the type the item is stored as (int8_t ...
// uint64_t), and says what it found; fn is called only for kIntegers.
// `format` and `ndim` receive the buffer's, for error messages.
template <typename Fn>
IntegerBuffer ForEachBufferInteger(PyObject* object, const Fn& fn, std::string* format = nullptr,
                                   pybind11::ssize_t* ndim = nullptr) {
  if (!PyObject_CheckBuffer(object) || PyBytes_Check(object) || PyByteArray_Check(object)) {
    return IntegerBuffer::kNotABuffer;
  }
  const pybind11::buffer_info info = pybind11::reinterpret_borrow<pybind11::buffer>(object).request();
  if (format != nullptr) *format = info.format;
  if (ndim != nullptr) *ndim = info.ndim;
  if (info.ndim != 1) return IntegerBuffer::kOtherShape;
  const std::string& f = info.format;
  const char kind = f.empty() ? '?' : f.back();
  const bool is_signed = std::strchr("bhilq", kind) != nullptr;
  if (!is_signed && std::strchr("BHILQ", kind) == nullptr) return IntegerBuffer::kOtherItems;
  if (f.size() > 2) return IntegerBuffer::kOtherItems;
  // A prefix other than native ('@', '=', '<' on the little-endian machines
  // we build for) is another byte order.
  if (f.size() == 2 && std::strchr("@=<", f[0]) == nullptr) return IntegerBuffer::kForeignOrder;
  const auto* data = static_cast<const char*>(info.ptr);
  auto visit = [&](auto typed) {
    using T = decltype(typed);
    for (pybind11::ssize_t k = 0; k < info.size; ++k) {
      T value;
      std::memcpy(&value, data + k * info.strides[0], sizeof(T));
      fn(static_cast<size_t>(k), value);
    }
    return IntegerBuffer::kIntegers;
  };
  // By item size: a prefixed 'l' is 4 bytes, a native one 8.
  switch (info.itemsize) {
    case 1: return is_signed ? visit(int8_t{}) : visit(uint8_t{});
    case 2: return is_signed ? visit(int16_t{}) : visit(uint16_t{});
    case 4: return is_signed ? visit(int32_t{}) : visit(uint32_t{});
    case 8: return is_signed ? visit(int64_t{}) : visit(uint64_t{});
    default: return IntegerBuffer::kOtherItems;
  }
}

// The global indices of `indices` in `view`.
std::vector<uint64_t> ResolveIndices(const View& view, pybind11::handle indices);

// The number of leading entries of `indices` (a list) that are valid indices
// of the view: how far a lazily pulled batch may be read before its error.
size_t ValidPrefix(const View& view, const pybind11::list& indices);

// A reader index (`r[i]`) as int64: any int-like; IndexError beyond int64;
// TypeError for anything else.
int64_t IndexArgument(PyObject* index);

}  // namespace sackli::python
