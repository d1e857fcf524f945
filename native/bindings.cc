// The Python face of the engine, module `sackli._engine`. It converts types,
// releases the GIL around engine work, allocates the output `bytes` for the
// engine to decode into, and maps engine errors onto Python exceptions. No
// format or read policy lives here: see the engine headers for that.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <zstd.h>

#include <cxxabi.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "bag.h"
#include "errors.h"
#include "format.h"
#include "local_file.h"
#include "read_plan.h"
#include "record_index.h"
#include "thread_pool.h"
#include "view.h"
#include "writer.h"

namespace py = pybind11;

namespace sackli {
namespace {

PyObject* g_corruption_error = nullptr;

// Above these sizes a single read or write releases the GIL for its work;
// below, switching threads would cost more than the work itself.
constexpr uint64_t kReleaseGilDecodeBytes = 16 * 1024;
constexpr uint64_t kReleaseGilCopyBytes = 1024 * 1024;
// How often a long wait re-takes the GIL to notice Ctrl-C.
constexpr int64_t kSignalCheckMilliseconds = 100;
// write_many hands the engine records in batches of about this size.
constexpr size_t kWriteManyBatchRecords = 4096;
constexpr size_t kWriteManyBatchBytes = 16 << 20;

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

// Whether the interpreter has begun to shut down.
bool InterpreterFinalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing();
#else
  return _Py_IsFinalizing();
#endif
}

// Taking the GIL while the interpreter shuts down ends the thread with
// pthread_exit, whose forced unwind cannot pass C++ destructors and aborts
// the process. A (daemon) thread that would do so parks instead: the process
// is exiting anyway, as CPython 3.14 itself does with such threads.
// The finalizing thread itself (the main thread) must go on: objects' __del__
// may still call into the engine while it tears the interpreter down.
unsigned long g_main_thread_ident = 0;

void ParkIfFinalizing() {
  if (!InterpreterFinalizing()) return;
  if (PyThread_get_thread_ident() == g_main_thread_ident) return;
  for (;;) ::pause();
}

// Releases the GIL for engine work; re-takes it when done (see above).
class ReleaseGil {
 public:
  ReleaseGil() : state_(PyEval_SaveThread()) {}
  ~ReleaseGil() {
    ParkIfFinalizing();
    // Finalization may begin while this thread waits for the GIL; CPython
    // then ends the thread with pthread_exit, whose forced unwind would
    // leave this noexcept destructor and abort. Park instead.
    try {
      PyEval_RestoreThread(state_);
    } catch (abi::__forced_unwind&) {
      for (;;) ::pause();
    }
  }
  ReleaseGil(const ReleaseGil&) = delete;
  ReleaseGil& operator=(const ReleaseGil&) = delete;

 private:
  PyThreadState* state_;
};

// Takes the GIL inside engine work that runs under ReleaseGil (callbacks).
class AcquireGil {
 public:
  AcquireGil() {
    ParkIfFinalizing();
    try {
      state_ = PyGILState_Ensure();
    } catch (abi::__forced_unwind&) {  // see ~ReleaseGil
      for (;;) ::pause();
    }
  }
  ~AcquireGil() { PyGILState_Release(state_); }
  AcquireGil(const AcquireGil&) = delete;
  AcquireGil& operator=(const AcquireGil&) = delete;

 private:
  PyGILState_STATE state_;
};

// Re-takes the GIL and raises KeyboardInterrupt (etc.) if a signal arrived.
void CheckSignals() {
  AcquireGil gil;
  if (PyErr_CheckSignals() != 0) throw py::error_already_set();
}

// A `bytes` of `size` uninitialised bytes for the engine to fill.
PyObject* NewBytes(uint64_t size) {
  PyObject* bytes =
      PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(size));
  if (bytes == nullptr) throw py::error_already_set();
  return bytes;
}

// A contiguous byte buffer borrowed from a Python object: bytes, str (as
// UTF-8) or anything with the buffer protocol.
class BorrowedBytes {
 public:
  explicit BorrowedBytes(PyObject* object) {
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
          std::string("a record must be bytes, str or a bytes-like object, "
                      "not ") +
          Py_TYPE(object)->tp_name);
    }
  }
  BorrowedBytes(BorrowedBytes&& other) noexcept
      : data_(other.data_), size_(other.size_), has_buffer_(other.has_buffer_) {
    buffer_ = other.buffer_;
    other.has_buffer_ = false;
  }
  BorrowedBytes(const BorrowedBytes&) = delete;
  ~BorrowedBytes() {
    if (has_buffer_) PyBuffer_Release(&buffer_);
  }
  std::string_view view() const { return {data_, size_}; }

 private:
  const char* data_ = nullptr;
  size_t size_ = 0;
  Py_buffer buffer_{};
  bool has_buffer_ = false;
};

// --- Reading ---------------------------------------------------------------

struct ReaderCore {
  std::shared_ptr<const Bag> bag;
  View view;
};

py::bytes ReadRecord(const ReaderCore& core, int64_t index) {
  const uint64_t g = core.view.Global(core.view.Resolve(index));
  StoredRecord record;
  // Mapped sources need no I/O to locate a record: stay on the GIL.
  if (core.bag->all_mapped()) {
    LocateStored(*core.bag, g, record);
  } else {
    ReleaseGil release;
    LocateStored(*core.bag, g, record);
  }
  py::bytes out = py::reinterpret_steal<py::bytes>(NewBytes(record.decoded_size));
  char* dst = PyBytes_AS_STRING(out.ptr());
  const bool compressed = record.shard->codec().compressed();
  if (record.decoded_size >=
      (compressed ? kReleaseGilDecodeBytes : kReleaseGilCopyBytes)) {
    ReleaseGil release;
    DecodeStored(record, dst);
  } else {
    DecodeStored(record, dst);
  }
  return out;
}

// Distinct global indices of a request, ascending, and where each position
// of the request finds its record: `bytes` are immutable, so a record asked
// for twice is read once and both positions share the object.
struct DistinctIndices {
  std::vector<uint64_t> globals;  // distinct, ascending
  std::vector<size_t> slot;       // position k holds globals[slot[k]]
};

DistinctIndices Distinct(const std::vector<uint64_t>& globals) {
  const size_t n = globals.size();
  std::vector<std::pair<uint64_t, size_t>> sorted(n);
  for (size_t k = 0; k < n; ++k) sorted[k] = {globals[k], k};
  std::sort(sorted.begin(), sorted.end());
  DistinctIndices out;
  out.slot.resize(n);
  for (size_t i = 0; i < n; ++i) {
    if (i == 0 || sorted[i].first != sorted[i - 1].first) {
      out.globals.push_back(sorted[i].first);
    }
    out.slot[sorted[i].second] = out.globals.size() - 1;
  }
  return out;
}

// `objects` placed at the positions `slot` names, in a new list (each
// position holds a new reference).
py::list Scatter(const py::list& objects, const std::vector<size_t>& slot) {
  py::list out(slot.size());
  for (size_t k = 0; k < slot.size(); ++k) {
    PyObject* item = PyList_GET_ITEM(objects.ptr(), static_cast<Py_ssize_t>(slot[k]));
    Py_INCREF(item);
    PyList_SET_ITEM(out.ptr(), static_cast<Py_ssize_t>(k), item);
  }
  return out;
}

// Reads records with the given global indices into a new list.
py::list ReadGlobals(const std::shared_ptr<const Bag>& bag,
                     const std::vector<uint64_t>& globals) {
  py::list out(globals.size());
  PyObject* list = out.ptr();
  {
    ReleaseGil release;
    ReadBatch(
        bag, globals.data(), globals.size(),
        [list](size_t first, const ReadPlan& plan, char** dst) {
          AcquireGil gil;
          for (size_t k = 0; k < plan.size(); ++k) {
            PyObject* bytes = NewBytes(plan.decoded_size(k));
            PyList_SET_ITEM(list, static_cast<Py_ssize_t>(first + k), bytes);
            dst[k] = PyBytes_AS_STRING(bytes);
          }
        },
        &CheckSignals);
  }
  return out;
}

// As ReadGlobals, for indices that may repeat (or come in any order).
py::list ReadIndices(const std::shared_ptr<const Bag>& bag,
                     const std::vector<uint64_t>& globals) {
  if (globals.size() < 2) return ReadGlobals(bag, globals);
  DistinctIndices distinct;
  {
    ReleaseGil release;
    distinct = Distinct(globals);
  }
  return Scatter(ReadGlobals(bag, distinct.globals), distinct.slot);
}

// Waits for background work (anything with WaitFor(milliseconds)) with the
// GIL released, noticing Ctrl-C.
template <typename Task>
void WaitNoticingSignals(Task& task) {
  for (;;) {
    bool done;
    {
      ReleaseGil release;
      done = task.WaitFor(kSignalCheckMilliseconds);
    }
    if (done) return;
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
  }
}

// Records read ahead for an iterator, handed over as `bytes` by result().
// When planning needs no I/O (every file memory-mapped), the `bytes` are
// allocated at the start and the pool decodes straight into them: one copy,
// and memory the consumer freed from an earlier batch is reused. Otherwise the
// pool plans (fetching the bytes) and decodes into one buffer, copied into
// `bytes` at result().
class PendingRecords {
 public:
  PendingRecords(std::shared_ptr<const Bag> bag, std::vector<uint64_t> globals,
                 bool may_repeat) {
    if (!bag->all_mapped()) {
      read_ = PendingRead::Start(std::move(bag), std::move(globals));
      return;
    }
    if (may_repeat && globals.size() >= 2) {
      DistinctIndices distinct = Distinct(globals);
      globals = std::move(distinct.globals);
      slot_ = std::move(distinct.slot);
    }
    std::shared_ptr<ReadPlan> plan;
    try {
      plan = std::make_shared<ReadPlan>(bag, globals.data(), globals.size());
    } catch (...) {
      // Reported at result(), where the iterator reaches this batch.
      error_ = std::current_exception();
      return;
    }
    objects_ = py::list(plan->size());
    auto dst = std::make_shared<std::vector<char*>>(plan->size());
    for (size_t k = 0; k < plan->size(); ++k) {
      PyObject* bytes = NewBytes(plan->decoded_size(k));
      PyList_SET_ITEM(objects_.ptr(), static_cast<Py_ssize_t>(k), bytes);
      (*dst)[k] = PyBytes_AS_STRING(bytes);
    }
    fill_ = BackgroundTask::Start([plan, dst] { plan->Fill(dst->data()); },
                                  bag->options().max_parallelism);
  }
  PendingRecords(PendingRecords&&) = default;
  PendingRecords(const PendingRecords&) = delete;

  // The pool writes into objects_ until the fill ends: wait before they go.
  ~PendingRecords() {
    if (!fill_) return;
    ReleaseGil release;
    while (!fill_->WaitFor(kSignalCheckMilliseconds)) {
    }
  }

  py::list Result() {
    if (error_) std::rethrow_exception(error_);
    if (read_) return CopyOut();
    WaitNoticingSignals(*fill_);
    fill_->RethrowIfFailed();
    if (!objects_) throw py::value_error("result() was already taken");
    py::list objects = std::move(objects_);
    return slot_.empty() ? objects : Scatter(objects, slot_);
  }

 private:
  py::list CopyOut() {
    WaitNoticingSignals(*read_);
    const DecodedRecords& records = read_->Result();
    const size_t n = records.offsets.empty() ? 0 : records.offsets.size() - 1;
    py::list out(n);
    for (size_t k = 0; k < n; ++k) {
      const uint64_t begin = records.offsets[k];
      PyObject* bytes = PyBytes_FromStringAndSize(
          records.data.data() + begin,
          static_cast<Py_ssize_t>(records.offsets[k + 1] - begin));
      if (bytes == nullptr) throw py::error_already_set();
      PyList_SET_ITEM(out.ptr(), static_cast<Py_ssize_t>(k), bytes);
    }
    return out;
  }

  std::shared_ptr<PendingRead> read_;      // unmapped bags
  std::shared_ptr<BackgroundTask> fill_;   // mapped bags
  py::list objects_;                       // the distinct records, being filled
  std::vector<size_t> slot_;               // empty: objects_ in request order
  std::exception_ptr error_;               // planning failed
};

std::vector<uint64_t> ViewRange(const View& view, uint64_t from, uint64_t count) {
  std::vector<uint64_t> globals(count);
  for (uint64_t k = 0; k < count; ++k) globals[k] = view.Global(from + k);
  return globals;
}

// Python indices (negative allowed) -> global indices. Accepts any sequence
// or iterable of integers, and integer buffers (numpy arrays of any integer
// dtype, array.array).
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

// The global index of `indices[k] == index`; IndexError naming the position.
uint64_t GlobalAt(const View& view, int64_t index, size_t k) {
  uint64_t j;
  if (!view.TryResolve(index, &j)) {
    ThrowOutOfRange("indices[" + std::to_string(k) + "] = " +
                    std::to_string(index) + " out of range for a reader of " +
                    std::to_string(view.length) + " records");
  }
  return view.Global(j);
}

template <typename T>
void AppendBufferIndices(const View& view, const py::buffer_info& info,
                         std::vector<uint64_t>& globals) {
  const auto* data = static_cast<const char*>(info.ptr);
  const size_t n = static_cast<size_t>(info.size);
  globals.reserve(n);
  for (size_t k = 0; k < n; ++k) {
    T value;
    std::memcpy(&value, data + k * static_cast<size_t>(info.strides[0]), sizeof(T));
    if constexpr (std::is_unsigned_v<T>) {
      if (value > static_cast<T>(INT64_MAX)) {
        ThrowOutOfRange("indices[" + std::to_string(k) + "] = " +
                        std::to_string(value) + " is out of range");
      }
    }
    globals.push_back(GlobalAt(view, static_cast<int64_t>(value), k));
  }
}

bool TryBufferIndices(const View& view, PyObject* object,
                      std::vector<uint64_t>& globals) {
  if (!PyObject_CheckBuffer(object) || PyBytes_Check(object) ||
      PyByteArray_Check(object)) {
    return false;
  }
  py::buffer buffer = py::reinterpret_borrow<py::buffer>(object);
  py::buffer_info info = buffer.request();
  if (info.ndim != 1) {
    throw py::value_error("indices must be one-dimensional, not " +
                          std::to_string(info.ndim) + "-dimensional");
  }
  const std::string& f = info.format;
  const char kind = f.empty() ? '?' : f.back();
  switch (kind) {
    case 'b': AppendBufferIndices<int8_t>(view, info, globals); return true;
    case 'B': AppendBufferIndices<uint8_t>(view, info, globals); return true;
    case 'h': AppendBufferIndices<int16_t>(view, info, globals); return true;
    case 'H': AppendBufferIndices<uint16_t>(view, info, globals); return true;
    case 'i': AppendBufferIndices<int32_t>(view, info, globals); return true;
    case 'I': AppendBufferIndices<uint32_t>(view, info, globals); return true;
    case 'l':
    case 'q': AppendBufferIndices<int64_t>(view, info, globals); return true;
    case 'L':
    case 'Q': AppendBufferIndices<uint64_t>(view, info, globals); return true;
    default:
      throw py::type_error("indices must be integers, not an array of format '" +
                           f + "'");
  }
}

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
    return ViewRange(sliced, 0, sliced.length);
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

// The number of leading entries of `indices` (a list of ints) that are valid
// indices of the view.
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

// A reader index (`r[i]`) as int64: any int-like; IndexError beyond int64.
int64_t IndexArgument(py::handle index) {
  PyObject* object = index.ptr();
  if (!PyLong_Check(object) && !PyIndex_Check(object)) {
    throw py::type_error(std::string("reader indices must be integers or "
                                     "slices, not ") +
                         Py_TYPE(object)->tp_name);
  }
  return ToInt64(object, 0);
}

// Read-only memory the engine owns (decoded records, a mapped file region or
// their offsets), lent to Python through the buffer protocol: pyarrow and
// numpy wrap it without a copy, and `owner` keeps the memory alive for as
// long as any of them holds the buffer.
struct EngineBuffer {
  std::shared_ptr<const void> owner;
  const void* data = nullptr;
  size_t items = 0;
  bool int64_items = false;  // int64 offsets ("q") rather than bytes ("B")

  py::buffer_info Info() const {
    const size_t itemsize = int64_items ? sizeof(int64_t) : 1;
    return py::buffer_info(const_cast<void*>(data),
                           static_cast<py::ssize_t>(itemsize),
                           int64_items ? "q" : "B", 1,
                           {static_cast<py::ssize_t>(items)},
                           {static_cast<py::ssize_t>(itemsize)},
                           /*readonly=*/true);
  }
};

// (data, offsets) of records laid out back to back: record k is
// data[offsets[k], offsets[k + 1]). Offsets are uint64 in the engine and
// lent as int64 (they never reach 2**63).
py::tuple PackedBuffers(std::shared_ptr<const void> owner, const char* data,
                        size_t data_size, const std::vector<uint64_t>& offsets) {
  static_assert(sizeof(uint64_t) == sizeof(int64_t));
  return py::make_tuple(EngineBuffer{owner, data, data_size, false},
                        EngineBuffer{owner, offsets.data(), offsets.size(), true});
}

// A batch read running in the background into one buffer (for sackli.arrow).
class PendingBatch {
 public:
  explicit PendingBatch(std::shared_ptr<PendingRead> pending)
      : pending_(std::move(pending)) {}

  // The records as (data, offsets) buffers, without a Python object each.
  py::tuple Packed() {
    WaitNoticingSignals(*pending_);
    const DecodedRecords& records = pending_->Result();
    return PackedBuffers(pending_, records.data.data(), records.data.size(),
                         records.offsets);
  }

 private:
  std::shared_ptr<PendingRead> pending_;
};

// Index of the first record equal to `value` in view indices [from, to), or -1;
// with `count_all`, the number of such records instead.
int64_t ScanFor(const ReaderCore& core, std::string_view value, uint64_t from,
                uint64_t to, bool count_all) {
  int64_t found = -1;
  int64_t count = 0;
  ReleaseGil release;
  VisitRecords(
      core.bag, core.view, from, to,
      [&](uint64_t size) { return size == value.size(); },
      [&](uint64_t j, const char* data, uint64_t size) {
        if (std::string_view(data, static_cast<size_t>(size)) != value) return true;
        ++count;
        if (count_all) return true;
        found = static_cast<int64_t>(j);
        return false;
      },
      &CheckSignals);
  return count_all ? count : found;
}

// Clamps a Python-style (start, stop) pair of list.index() to [0, length].
uint64_t ClampBound(int64_t bound, uint64_t length) {
  const int64_t n = static_cast<int64_t>(length);
  if (bound < 0) bound = std::max<int64_t>(bound + n, 0);
  return static_cast<uint64_t>(std::min(bound, n));
}

// --- Options -----------------------------------------------------------------

CompressionChoice MakeChoice(int mode, int level, const py::bytes& dictionary) {
  if (mode < 0 || mode > 2) throw py::value_error("unknown compression mode");
  CompressionChoice choice;
  choice.mode = static_cast<CompressionChoice::Mode>(mode);
  choice.level = level;
  choice.dictionary = dictionary;
  return choice;
}

// A remote object read through a Python handle with `size` (int) and
// `read(offset, length)` returning that many bytes (retries are the
// handle's business). Pool threads call it with the GIL taken; the Python
// clients release it while they wait on the network, so reads overlap.
class PyByteSource : public ByteSource {
 public:
  PyByteSource(py::object handle, std::string path)
      : handle_(std::move(handle)), path_(std::move(path)) {
    size_ = handle_.attr("size").cast<uint64_t>();
  }
  ~PyByteSource() override {
    AcquireGil gil;  // the last owner may be a thread without the GIL
    handle_ = py::object();
  }

  uint64_t size() const override { return size_; }
  const std::string& path() const override { return path_; }
  bool remote() const override { return true; }

  void Read(uint64_t offset, size_t length, char* dst) const override {
    if (offset > size_ || length > size_ - offset) {
      ThrowCorruption(path_, offset,
                      "read of " + std::to_string(length) +
                          " bytes past the end of the object (" +
                          std::to_string(size_) + " bytes)");
    }
    if (length == 0) return;
    AcquireGil gil;
    py::object data = handle_.attr("read")(offset, length);
    py::buffer_info info = py::buffer(data).request();
    const size_t got = static_cast<size_t>(info.size * info.itemsize);
    if (got != length) {
      throw Error(ErrorKind::kIo,
                  path_ + ": asked for " + std::to_string(length) +
                      " bytes at offset " + std::to_string(offset) + ", got " +
                      std::to_string(got),
                  path_, EIO);
    }
    std::memcpy(dst, info.ptr, length);
  }

 private:
  py::object handle_;
  std::string path_;
  uint64_t size_ = 0;
};

// Local files through the engine; paths the Python `remote` callback
// claims (it returns a handle, or None for a local path) through it.
SourceOpener MakeOpener(py::object remote, AccessPattern access,
                        CachePolicy cache) {
  SourceOpener local = LocalOpener(access, cache);
  if (remote.is_none()) return local;
  auto callback = std::shared_ptr<py::object>(
      new py::object(std::move(remote)), [](py::object* o) {
        AcquireGil gil;
        delete o;
      });
  auto claim = [callback](const std::string& path) -> py::object {
    return (*callback)(path);
  };
  return SourceOpener{
      [local, claim](const std::string& path) -> std::shared_ptr<ByteSource> {
        {
          AcquireGil gil;
          py::object handle = claim(path);
          if (!handle.is_none()) {
            return std::make_shared<PyByteSource>(std::move(handle), path);
          }
        }
        return local.open(path);
      },
      [local, callback](const std::string& path) -> bool {
        {
          AcquireGil gil;
          py::object found = callback->attr("exists")(path);
          if (!found.is_none()) return found.cast<bool>();
        }
        return local.exists(path);
      }};
}

std::shared_ptr<const Bag> OpenBag(const std::vector<std::string>& paths,
                                   int compression_mode, int level,
                                   const py::bytes& dictionary, int layout,
                                   int placement, int storage,
                                   size_t max_parallelism, int access,
                                   int cache, py::object remote) {
  SourceOpener opener = MakeOpener(std::move(remote),
                                   static_cast<AccessPattern>(access),
                                   static_cast<CachePolicy>(cache));
  const CompressionChoice choice = MakeChoice(compression_mode, level, dictionary);
  ReleaseGil release;
  const std::vector<Codec> codecs = Codec::ForPaths(paths, choice);
  std::vector<ShardPath> shards;
  for (size_t i = 0; i < paths.size(); ++i) {
    shards.push_back(ShardPath{paths[i], codecs[i]});
  }
  BagOptions options;
  options.layout = static_cast<ShardingLayout>(layout);
  options.shard.placement = static_cast<LimitsPlacement>(placement);
  options.shard.storage = static_cast<LimitsStorage>(storage);
  options.max_parallelism = max_parallelism;
  return Bag::Open(shards, options, opener);
}

// One Index / MultiIndex lookup: the first index (an int), all indices (a
// list), or None when absent. Lookups that must read the bag to confirm a
// hash match release the GIL; in-memory ones are too short to.
py::object IndexLookup(const RecordIndex& index, py::handle record) {
  BorrowedBytes bytes(record.ptr());
  auto lookup = [&](const auto& find) {
    if (index.confirms_in_memory()) return find();
    ReleaseGil release;
    return find();
  };
  if (!index.keep_all()) {
    const std::optional<uint64_t> first =
        lookup([&] { return index.First(bytes.view()); });
    return first ? py::int_(*first) : py::object(py::none());
  }
  const std::vector<uint64_t> all = lookup([&] { return index.All(bytes.view()); });
  if (all.empty()) return py::none();
  py::list out(all.size());
  for (size_t k = 0; k < all.size(); ++k) {
    PyObject* value = PyLong_FromUnsignedLongLong(all[k]);
    if (value == nullptr) throw py::error_already_set();
    PyList_SET_ITEM(out.ptr(), static_cast<Py_ssize_t>(k), value);
  }
  return std::move(out);
}

// --- r[i] without pybind11's dispatch ------------------------------------------
// A lone record read is dominated by per-call overhead, so these two entry
// points are plain CPython functions: `ReaderCore.get(i)`, and `reader_getitem`,
// which `sackli.Reader` takes as its `__getitem__` so that `r[i]` runs no
// Python frame.

// Sets the Python error for the exception being handled; returns nullptr.
PyObject* SetPythonError() {
  try {
    throw;
  } catch (py::error_already_set& e) {
    e.restore();
  } catch (const py::builtin_exception& e) {
    e.set_error();
  } catch (...) {
    TranslateError(std::current_exception());
    if (!PyErr_Occurred()) {
      PyErr_SetString(PyExc_RuntimeError, "sackli: unexpected C++ exception");
    }
  }
  return nullptr;
}

// ReaderCore.get(index), and r[i] once the core is found.
PyObject* GetRecord(PyObject* core, PyObject* index) {
  try {
    const ReaderCore& c = py::cast<const ReaderCore&>(py::handle(core));
    return ReadRecord(c, IndexArgument(index)).release().ptr();
  } catch (...) {
    return SetPythonError();
  }
}

PyMethodDef g_reader_core_get = {
    "get", GetRecord, METH_O,
    "get(index) -> bytes: the record at a view index (negative from the end)."};

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
  static PyTypeObject* core_type = nullptr;
  static PyObject* core_name = PyUnicode_InternFromString("_core");
  static PyObject* slow_name = PyUnicode_InternFromString("_getitem_slow");
  if (core_type == nullptr) {
    core_type = reinterpret_cast<PyTypeObject*>(py::type::of<ReaderCore>().ptr());
  }
  // numpy arrays have __index__ too (for 0-d arrays), but are sequences.
  if (PyLong_Check(index) || (PyIndex_Check(index) && !PySequence_Check(index))) {
    PyObject* core = PyObject_GetAttr(reader, core_name);
    if (core == nullptr) return nullptr;
    const bool open = Py_TYPE(core) == core_type;
    PyObject* result = open ? GetRecord(core, index) : nullptr;
    Py_DECREF(core);
    if (open) return result;
  }
  return PyObject_CallMethodOneArg(reader, slow_name, index);
}

PyMethodDef g_reader_getitem = {
    "reader_getitem", reinterpret_cast<PyCFunction>(
                          reinterpret_cast<void (*)()>(ReaderGetItem)),
    METH_FASTCALL, "reader_getitem(reader, index): sackli.Reader.__getitem__."};

// Index lookups as plain CPython methods (pybind11's dispatch would cost as
// much as the lookup itself).

// The engine index inside `self`, which the method descriptor has checked to
// be a RecordIndex (or a Python subclass of it).
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

}  // namespace
}  // namespace sackli

PYBIND11_MODULE(_engine, m) {
  using namespace sackli;
  m.doc() = "sackli's C++ engine; use the `sackli` package, not this module.";

  g_main_thread_ident = py::module_::import("threading")
                            .attr("main_thread")()
                            .attr("ident")
                            .cast<unsigned long>();

  static py::exception<Error> corruption(m, "CorruptionError", PyExc_ValueError);
  g_corruption_error = corruption.ptr();
  py::register_exception_translator(&TranslateError);

  py::class_<Bag, std::shared_ptr<Bag>>(m, "Bag")
      .def_property_readonly("size", &Bag::size)
      .def_property_readonly("num_shards", &Bag::num_shards)
      .def_property_readonly("records_bytes", &Bag::records_bytes)
      .def("shard_sizes", [](const Bag& bag) {
        std::vector<uint64_t> sizes;
        for (size_t s = 0; s < bag.num_shards(); ++s) {
          sizes.push_back(bag.shard(s).num_records());
        }
        return sizes;
      })
      // Offsets of records [first, first + count) of one shard in its
      // records section: count + 1 int64 values, the begin of record
      // `first`, then each record's end (validated). For Beam's splitting.
      .def("record_offsets",
           [](const Bag& bag, size_t shard, uint64_t first, uint64_t count) {
             if (shard >= bag.num_shards()) {
               throw py::index_error("shard " + std::to_string(shard) +
                                     " out of range for a bag of " +
                                     std::to_string(bag.num_shards()) +
                                     " shards");
             }
             const Shard& s = bag.shard(shard);
             if (first > s.num_records() || count > s.num_records() - first) {
               throw py::index_error(
                   "records [" + std::to_string(first) + ", " +
                   std::to_string(first + count) + ") out of range for " +
                   s.path() + " (" + std::to_string(s.num_records()) +
                   " records)");
             }
             auto offsets = std::make_shared<std::vector<uint64_t>>(count + 1);
             {
               ReleaseGil release;
               s.Limits(first, count, offsets->data(), offsets->data() + 1);
             }
             return EngineBuffer{offsets, offsets->data(), offsets->size(),
                                 true};
           },
           py::arg("shard"), py::arg("first"), py::arg("count"));

  // Opens a bag and returns a reader core over all of it, in one call per
  // Reader() with positional arguments (opening is dominated by per-call
  // overhead).
  m.def("open_reader",
        [](const std::vector<std::string>& paths, int compression_mode,
           int level, const py::bytes& dictionary, int layout, int placement,
           int storage, size_t max_parallelism, int access, int cache,
           py::object remote) {
          std::shared_ptr<const Bag> bag =
              OpenBag(paths, compression_mode, level, dictionary, layout,
                      placement, storage, max_parallelism, access, cache,
                      std::move(remote));
          const View view{0, 1, bag->size()};
          return ReaderCore{std::move(bag), view};
        });

  py::class_<EngineBuffer>(m, "EngineBuffer", py::buffer_protocol())
      .def_buffer(&EngineBuffer::Info)
      .def("__len__", [](const EngineBuffer& b) { return b.items; });

  py::class_<PendingBatch>(m, "PendingBatch")
      .def("packed", &PendingBatch::Packed);

  py::class_<PendingRecords>(m, "PendingRecords")
      .def("result", &PendingRecords::Result);

  py::class_<ReaderCore>(m, "ReaderCore")
      .def(py::init([](std::shared_ptr<Bag> bag, uint64_t start, int64_t step,
                       uint64_t length) {
        // A view restored from a pickle: check it against the bag reopened.
        const int64_t last = static_cast<int64_t>(start) +
                             (static_cast<int64_t>(length) - 1) * step;
        if (length > 0 && (start >= bag->size() || last < 0 ||
                           static_cast<uint64_t>(last) >= bag->size())) {
          throw py::value_error("the reader view does not fit the bag, which "
                                "changed since the reader was pickled");
        }
        return ReaderCore{std::move(bag), View{start, step, length}};
      }))
      .def("__len__", [](const ReaderCore& c) { return c.view.length; })
      .def_property_readonly("view", [](const ReaderCore& c) {
        return py::make_tuple(c.view.start, c.view.step, c.view.length);
      })
      .def_property_readonly("bag", [](const ReaderCore& c) {
        return std::const_pointer_cast<Bag>(c.bag);
      })
      .def("slice",
           [](const ReaderCore& c, const py::slice& s) {
             size_t start, stop, step, length;
             if (!s.compute(c.view.length, &start, &stop, &step, &length)) {
               throw py::error_already_set();
             }
             return ReaderCore{
                 c.bag, c.view.Slice(static_cast<int64_t>(start),
                                     static_cast<int64_t>(step), length)};
           })
      .def("read_all",
           [](const ReaderCore& c) {
             return ReadGlobals(c.bag, ViewRange(c.view, 0, c.view.length));
           })
      .def("read_range",
           [](const ReaderCore& c, int64_t start, int64_t count) {
             const int64_t n = static_cast<int64_t>(c.view.length);
             if (start < 0 || count < 0 || start > n || count > n - start) {
               ThrowOutOfRange("range [" + std::to_string(start) + ", " +
                               std::to_string(start + count) +
                               ") out of range for a reader of " +
                               std::to_string(n) + " records");
             }
             return ReadGlobals(c.bag, ViewRange(c.view, static_cast<uint64_t>(start),
                                                 static_cast<uint64_t>(count)));
           })
      .def("read_indices",
           [](const ReaderCore& c, py::handle indices) {
             return ReadIndices(c.bag, ResolveIndices(c.view, indices));
           })
      // Iterators' read-ahead: batches started now, `result()` later.
      .def("start_records",
           [](const ReaderCore& c, py::handle indices) {
             return PendingRecords(c.bag, ResolveIndices(c.view, indices),
                                   /*may_repeat=*/true);
           })
      .def("start_records_range",
           [](const ReaderCore& c, uint64_t start, uint64_t count) {
             if (start > c.view.length || count > c.view.length - start) {
               ThrowOutOfRange("range out of range");
             }
             return PendingRecords(c.bag, ViewRange(c.view, start, count),
                                   /*may_repeat=*/false);
           })
      .def("valid_prefix",
           [](const ReaderCore& c, const py::list& indices) {
             return ValidPrefix(c.view, indices);
           })
      .def("start_read_indices",
           [](const ReaderCore& c, py::handle indices, const py::bytes& prefix) {
             return PendingBatch(PendingRead::Start(
                 c.bag, ResolveIndices(c.view, indices), prefix));
           },
           py::arg("indices"), py::arg("prefix") = py::bytes())
      .def("start_read_range",
           [](const ReaderCore& c, uint64_t start, uint64_t count,
              const py::bytes& prefix) {
             if (start > c.view.length || count > c.view.length - start) {
               ThrowOutOfRange("range out of range");
             }
             return PendingBatch(PendingRead::Start(
                 c.bag, ViewRange(c.view, start, count), prefix));
           },
           py::arg("start"), py::arg("count"), py::arg("prefix") = py::bytes())
      .def("mapped_run",
           [](const ReaderCore& c, uint64_t start,
              uint64_t count) -> std::optional<py::tuple> {
             // View records [start, start + count) straight from the mapping.
             if (c.view.step != 1 || count == 0 || start > c.view.length ||
                 count > c.view.length - start) {
               return std::nullopt;
             }
             // One owner holds both the offsets and the bag, whose mapping
             // the data points into.
             auto owner = std::make_shared<
                 std::pair<std::shared_ptr<const Bag>, std::vector<uint64_t>>>(
                 c.bag, std::vector<uint64_t>());
             const char* data = nullptr;
             if (!MappedRun(*c.bag, c.view.Global(start), count, &data,
                            owner->second)) {
               return std::nullopt;
             }
             return PackedBuffers(owner, data,
                                  static_cast<size_t>(owner->second.back()),
                                  owner->second);
           })
      .def("find",
           [](const ReaderCore& c, const py::bytes& value, int64_t start,
              std::optional<int64_t> stop) {
             const uint64_t from = ClampBound(start, c.view.length);
             const uint64_t to =
                 stop ? ClampBound(*stop, c.view.length) : c.view.length;
             const std::string_view v = value;
             return from < to ? ScanFor(c, v, from, to, false) : int64_t{-1};
           })
      .def("count",
           [](const ReaderCore& c, const py::bytes& value) {
             return ScanFor(c, value, 0, c.view.length, true);
           })
      .def("approximate_bytes_per_record", [](const ReaderCore& c) {
        const uint64_t n = c.bag->size();
        return n == 0 ? 0.0
                      : static_cast<double>(c.bag->records_bytes()) /
                            static_cast<double>(n);
      });

  {
    PyObject* core_type = m.attr("ReaderCore").ptr();
    py::object get = py::reinterpret_steal<py::object>(PyDescr_NewMethod(
        reinterpret_cast<PyTypeObject*>(core_type), &g_reader_core_get));
    if (!get || PyObject_SetAttrString(core_type, "get", get.ptr()) != 0) {
      throw py::error_already_set();
    }
    // An instancemethod binds the reader as the first argument, as a Python
    // function in the class body would.
    py::object getitem = py::reinterpret_steal<py::object>(
        PyCFunction_New(&g_reader_getitem, nullptr));
    if (!getitem) throw py::error_already_set();
    m.attr("reader_getitem") = py::reinterpret_steal<py::object>(
        PyInstanceMethod_New(getitem.ptr()));
  }

  // Index / MultiIndex (sackli/_index.py subclasses this class, so lookups
  // reach C++ without a Python frame).
  py::class_<RecordIndex>(m, "RecordIndex")
      .def(py::init([](const ReaderCore& c, bool keep_all,
                       uint64_t max_memory_bytes, uint64_t hash_mask) {
             ReleaseGil release;
             return new RecordIndex(c.bag, c.view, keep_all, max_memory_bytes,
                                    &CheckSignals, hash_mask);
           }),
           py::arg("reader"), py::arg("keep_all"), py::arg("max_memory_bytes"),
           py::arg("hash_mask") = ~uint64_t{0})
      .def("__len__", &RecordIndex::num_unique,
           "The number of distinct records (compare with len(reader)).")
      .def("get",
           [](const RecordIndex& index, py::handle record, py::object fallback) {
             py::object found = IndexLookup(index, record);
             return found.is_none() ? fallback : found;
           },
           py::arg("record"), py::arg("default") = py::none(),
           "get(record, default=None): the answer for `record`, or `default` "
           "when absent.")
      .def_property_readonly(
          "memory_bytes", &RecordIndex::memory_bytes,
          "Bytes of decoded records the index keeps to confirm lookups (0 "
          "for uncompressed memory-mapped files, compared in place).")
      .def_property_readonly(
          "confirms_in_memory", &RecordIndex::confirms_in_memory,
          "Whether every lookup is answered without reading the bag (False "
          "once the records to keep passed max_memory_bytes).");

  {
    PyObject* index_type = m.attr("RecordIndex").ptr();
    for (PyMethodDef* def : {&g_index_getitem, &g_index_contains}) {
      py::object method = py::reinterpret_steal<py::object>(PyDescr_NewMethod(
          reinterpret_cast<PyTypeObject*>(index_type), def));
      if (!method || PyObject_SetAttrString(index_type, def->ml_name,
                                            method.ptr()) != 0) {
        throw py::error_already_set();
      }
    }
  }

  py::class_<Writer>(m, "WriterCore")
      .def(py::init([](const std::string& path, int placement,
                       int compression_mode, int level,
                       const py::bytes& dictionary, size_t max_parallelism) {
             const CompressionChoice choice =
                 MakeChoice(compression_mode, level, dictionary);
             WriterOptions options;
             options.placement = static_cast<LimitsPlacement>(placement);
             options.codec = Codec::ForPaths({path}, choice)[0];
             options.max_parallelism = std::max<size_t>(max_parallelism, 1);
             ReleaseGil release;
             return new Writer(path, options);
           }),
           py::arg("path"), py::arg("placement"), py::arg("compression_mode"),
           py::arg("level"), py::arg("dictionary"), py::arg("max_parallelism"))
      .def("write",
           [](Writer& writer, py::handle record) {
             BorrowedBytes bytes(record.ptr());
             // Compression happens on the pool; the call copies the record
             // and, when too many batches are in flight, waits.
             if (bytes.view().size() >= kReleaseGilCopyBytes ||
                 writer.backlogged()) {
               ReleaseGil release;
               writer.Write(bytes.view());
             } else {
               writer.Write(bytes.view());
             }
           })
      .def("write_many",
           [](Writer& writer, py::iterable records) {
             std::vector<BorrowedBytes> batch;
             // Never reallocated: a borrowed buffer is not moved once taken.
             batch.reserve(kWriteManyBatchRecords);
             std::vector<py::object> owners;  // keep borrowed objects alive
             std::vector<std::string_view> views;
             size_t batch_bytes = 0;
             auto flush_batch = [&] {
               views.clear();
               for (const BorrowedBytes& b : batch) views.push_back(b.view());
               {
                 ReleaseGil release;
                 writer.WriteMany(views);
               }
               batch.clear();
               owners.clear();
               batch_bytes = 0;
             };
             for (py::handle record : records) {
               owners.push_back(py::reinterpret_borrow<py::object>(record));
               batch.emplace_back(record.ptr());
               batch_bytes += batch.back().view().size();
               if (batch.size() >= kWriteManyBatchRecords ||
                   batch_bytes >= kWriteManyBatchBytes) {
                 flush_batch();
               }
             }
             if (!batch.empty()) flush_batch();
           })
      .def("write_packed",
           [](Writer& writer, const py::buffer& data, const py::buffer& offsets) {
             // Records data[offsets[k], offsets[k + 1]): one Python call for
             // a whole batch of records that are already laid out together.
             const py::buffer_info d = data.request();
             const py::buffer_info o = offsets.request();
             if (o.ndim != 1 || o.itemsize != 8 ||
                 (o.format != "q" && o.format != "l" && o.format != "Q" &&
                  o.format != "L") ||
                 o.strides[0] != 8) {
               throw py::type_error("offsets must be a contiguous int64 buffer");
             }
             const auto* ends = static_cast<const int64_t*>(o.ptr);
             const size_t n = o.size > 0 ? static_cast<size_t>(o.size) - 1 : 0;
             const int64_t size = static_cast<int64_t>(d.size * d.itemsize);
             std::vector<std::string_view> views;
             views.reserve(n);
             const char* base = static_cast<const char*>(d.ptr);
             for (size_t k = 0; k < n; ++k) {
               if (ends[k] < 0 || ends[k] > ends[k + 1] || ends[k + 1] > size) {
                 throw py::value_error(
                     "offsets[" + std::to_string(k) + ":" + std::to_string(k + 2) +
                     "] = [" + std::to_string(ends[k]) + ", " +
                     std::to_string(ends[k + 1]) +
                     "] is not a span of the data (" + std::to_string(size) +
                     " bytes)");
               }
               views.emplace_back(base + ends[k],
                                  static_cast<size_t>(ends[k + 1] - ends[k]));
             }
             // In sub-batches, as write_many: compressed records of one
             // WriteMany are held until it returns.
             ReleaseGil release;
             size_t first = 0;
             while (first < n) {
               size_t last = first;
               size_t batch_bytes = 0;
               while (last < n && last - first < kWriteManyBatchRecords &&
                      batch_bytes < kWriteManyBatchBytes) {
                 batch_bytes += views[last++].size();
               }
               writer.WriteMany({views.begin() + first, views.begin() + last});
               first = last;
             }
           },
           py::arg("data"), py::arg("offsets"))
      .def("flush",
           [](Writer& writer) {
             ReleaseGil release;
             writer.Flush();
           })
      .def("close",
           [](Writer& writer, bool publish) {
             ReleaseGil release;
             writer.Close(publish);
           },
           py::arg("publish") = true)
      .def("publish",
           [](Writer& writer, const std::string& target) {
             ReleaseGil release;
             writer.Publish(target);
           },
           py::arg("target"))
      .def("discard",
           [](Writer& writer) {
             ReleaseGil release;
             writer.Discard();
           })
      .def_property_readonly("path", &Writer::path)
      .def_property_readonly("partial_path", &Writer::partial_path)
      .def_property_readonly("records_written", &Writer::records_written)
      .def_property_readonly("bytes_written",
                             [](Writer& writer) {
                               ReleaseGil release;  // waits for the batches
                               return writer.bytes_written();
                             })
      .def_property_readonly("closed", &Writer::closed);

  m.def("recover", [](const std::string& path) {
    RecoverResult result;
    {
      ReleaseGil release;
      result = RecoverBag(path);
    }
    return py::make_tuple(result.records, result.dropped_limits,
                          result.dropped_bytes);
  });

  m.def("thread_pool_size", [] { return ThreadPool::Shared().num_threads(); });
  m.def("zstd_version", [] { return std::string(ZSTD_versionString()); });
  m.def("limits_path_for", &LimitsPathFor);
  m.def("partial_folder_prefix", &PartialFolderPrefix);
  m.attr("PARTIAL_MARKER") = kPartialMarker;
  m.def("has_zstd_suffix", &HasZstdSuffix);
  m.attr("LIMIT_BYTES") = kLimitBytes;
}
