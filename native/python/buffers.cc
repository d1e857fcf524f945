#include "python/buffers.h"
#include "python/register.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>

namespace py = pybind11;

namespace sackli::python {

PyObject* NewBytes(uint64_t size) {
  PyObject* bytes =
      PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(size));
  if (bytes == nullptr) throw py::error_already_set();
  return bytes;
}

void KeepHeapForBatches(uint64_t total) {
#if !defined(__GLIBC__)
  (void)total;  // see buffers.h: only glibc's thresholds move
  return;
#endif
  // Below this, trimming and faulting the memory back costs little.
  constexpr uint64_t kSmallestBatch = 1 << 20;
  constexpr uint64_t kLargestBlock = 16 << 20;
  static std::atomic<uint64_t> largest_block_freed{0};
  // SACKLI_KEEP_BATCH_MEMORY=0 leaves glibc's thresholds as they are.
  static const bool enabled = [] {
    const char* setting = std::getenv("SACKLI_KEEP_BATCH_MEMORY");
    return setting == nullptr || std::string(setting) != "0";
  }();
  if (!enabled || total < kSmallestBatch) return;
  const uint64_t block = std::min(total, kLargestBlock);
  if (block <= largest_block_freed.load(std::memory_order_relaxed)) return;
  largest_block_freed.store(block, std::memory_order_relaxed);
  // volatile: a compiler may drop a malloc whose block is only freed.
  void* volatile memory = std::malloc(static_cast<size_t>(block));
  std::free(memory);
}

BorrowedBytes::BorrowedBytes(PyObject* object) {
  if (PyBytes_Check(object)) {
    data_ = PyBytes_AS_STRING(object);
    size_ = static_cast<size_t>(PyBytes_GET_SIZE(object));
  } else if (PyUnicode_Check(object)) {
    Py_ssize_t size;
    data_ = PyUnicode_AsUTF8AndSize(object, &size);
    if (data_ == nullptr) throw py::error_already_set();
    size_ = static_cast<size_t>(size);
  } else if (PyObject_CheckBuffer(object)) {
    if (PyObject_GetBuffer(object, &buffer_, PyBUF_SIMPLE) != 0) {
      throw py::error_already_set();
    }
    has_buffer_ = true;
    data_ = static_cast<const char*>(buffer_.buf);
    size_ = static_cast<size_t>(buffer_.len);
  } else {
    throw py::type_error(
        std::string("a record must be bytes, str or a bytes-like object, not ") +
        Py_TYPE(object)->tp_name);
  }
}

BorrowedBytes::BorrowedBytes(BorrowedBytes&& other) noexcept
    : data_(other.data_), size_(other.size_), has_buffer_(other.has_buffer_) {
  buffer_ = other.buffer_;
  other.has_buffer_ = false;
}

BorrowedBytes::~BorrowedBytes() {
  if (has_buffer_) PyBuffer_Release(&buffer_);
}

py::buffer_info EngineBuffer::Info() const {
  const size_t itemsize = int64_items ? sizeof(int64_t) : 1;
  return py::buffer_info(const_cast<void*>(data),
                         static_cast<py::ssize_t>(itemsize),
                         int64_items ? "q" : "B", 1,
                         {static_cast<py::ssize_t>(items)},
                         {static_cast<py::ssize_t>(itemsize)},
                         /*readonly=*/true);
}

py::tuple PackedBuffers(std::shared_ptr<const void> owner, const char* data,
                        size_t data_size, const std::vector<uint64_t>& offsets) {
  static_assert(sizeof(uint64_t) == sizeof(int64_t));
  return py::make_tuple(EngineBuffer{owner, data, data_size, false},
                        EngineBuffer{owner, offsets.data(), offsets.size(), true});
}

void RegisterBuffers(py::module_& m) {
  py::class_<EngineBuffer>(m, "EngineBuffer", py::buffer_protocol())
      .def_buffer(&EngineBuffer::Info)
      .def("__len__", [](const EngineBuffer& b) { return b.items; });
}

}  // namespace sackli::python
