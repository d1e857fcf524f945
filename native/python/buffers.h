// Bytes between Python and the engine: records borrowed from Python objects
// for writing, `bytes` allocated for the engine to decode into, and engine
// memory lent to Python through the buffer protocol.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

namespace sackli::python {

// A new `bytes` of `size` uninitialised bytes for the engine to fill (a new
// reference). Throws error_already_set when Python cannot allocate it.
PyObject* NewBytes(uint64_t size);

// Called before a batch allocates `bytes` objects of `total` bytes in all.
// Keeps glibc from handing that memory back to the kernel once the caller
// frees the batch, so that the next batch reuses it instead of page-faulting
// all of it in again, zeroed (about 2,600 faults, several ms, for 10 MB).
//
// glibc trims the top of its heap whenever more than its trim threshold is
// free there: 128 KiB in a process that has never freed a large block. Once
// a process frees a block glibc had mmap()ed (up to 32 MiB), glibc raises
// the mmap threshold to that block's size and the trim threshold to twice
// it; most processes that handle large arrays or files are in that state.
// This puts a process in it once, with a block of the batch's size (at most
// 16 MiB, so the trim threshold stays at most 32 MiB). When the thresholds
// are high enough already, it costs one malloc/free. Elsewhere than glibc
// (musl, macOS) it does nothing: the thresholds it moves are glibc's. The
// environment variable SACKLI_KEEP_BATCH_MEMORY=0 (read once) turns it off.
void KeepHeapForBatches(uint64_t total);

// The writable storage of a `bytes` made by NewBytes.
inline char* BytesData(PyObject* bytes) { return PyBytes_AS_STRING(bytes); }

// A contiguous byte buffer borrowed from a Python object: bytes, str (as
// UTF-8) or anything with the buffer protocol; TypeError otherwise. The
// object must outlive the view (the caller keeps a reference).
class BorrowedBytes {
 public:
  explicit BorrowedBytes(PyObject* object);
  BorrowedBytes(BorrowedBytes&& other) noexcept;
  BorrowedBytes(const BorrowedBytes&) = delete;
  BorrowedBytes& operator=(const BorrowedBytes&) = delete;
  ~BorrowedBytes();
  std::string_view view() const { return {data_, size_}; }

 private:
  const char* data_ = nullptr;
  size_t size_ = 0;
  Py_buffer buffer_{};
  bool has_buffer_ = false;
};

// Read-only memory the engine owns (decoded records, a mapped file region or
// their offsets), lent to Python through the buffer protocol: pyarrow and
// numpy wrap it without a copy, and `owner` keeps the memory alive for as
// long as any of them holds the buffer. Bound as `_engine.EngineBuffer`.
struct EngineBuffer {
  std::shared_ptr<const void> owner;
  const void* data = nullptr;
  size_t items = 0;
  bool int64_items = false;  // int64 offsets ("q") rather than bytes ("B")

  pybind11::buffer_info Info() const;
};

// (data, offsets) of records laid out back to back: record k is
// data[offsets[k], offsets[k + 1]). Offsets are uint64 in the engine and
// lent as int64 (they never reach 2**63).
pybind11::tuple PackedBuffers(std::shared_ptr<const void> owner,
                              const char* data, size_t data_size,
                              const std::vector<uint64_t>& offsets);

// A list of n `bytes`, position k sharing the object of first[k] when
// first[k] != k (each slot a new reference); first may be empty (no
// repeats). Slots first[k] == k must be set already; the others are set here.
template <typename Position>
void ShareRepeats(PyObject* list, const std::vector<Position>& first) {
  for (size_t k = 0; k < first.size(); ++k) {
    if (first[k] == k) continue;
    PyObject* item = PyList_GET_ITEM(list, static_cast<Py_ssize_t>(first[k]));
    Py_INCREF(item);
    PyList_SET_ITEM(list, static_cast<Py_ssize_t>(k), item);
  }
}

}  // namespace sackli::python
