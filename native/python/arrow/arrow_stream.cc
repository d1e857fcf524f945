// `ReaderCore.arrow_c_stream()`: a reader's records as an Arrow C stream
// in a PyCapsule (the Arrow PyCapsule interface), for
// `sackli.Reader.__arrow_c_stream__`. The stream itself is the engine's
// (arrow_stream.h): pyarrow, Polars and DuckDB read a Reader without pyarrow
// being imported on our side. This file only adds the GIL handling and the
// capsule.
#include <pybind11/pybind11.h>

#include <memory>
#include <utility>

#include "arrow/arrow_stream.h"
#include "python/gil.h"
#include "python/register.h"
#include "bagz/reader.h"

namespace py = pybind11;

namespace sackli::python {
namespace {

// The consumer calls get_next on its own thread, maybe holding the GIL (as
// pyarrow and DuckDB may, called from Python), while the pool threads that
// read the batch may need the GIL (remote byte sources call into Python):
// waiting for a batch with the GIL held would deadlock. So a batch is waited
// for with the GIL released when this thread holds it.
class GilReleasingSource : public RecordBatchSource {
 public:
  explicit GilReleasingSource(std::unique_ptr<RecordBatchSource> inner)
      : inner_(std::move(inner)) {}

  bool Next(RecordBatchData& batch) override {
    if (!PyGILState_Check()) return inner_->Next(batch);
    ReleaseGil release;
    return inner_->Next(batch);
  }

 private:
  std::unique_ptr<RecordBatchSource> inner_;
};

constexpr char kStreamCapsuleName[] = "arrow_array_stream";

// The capsule owns the stream struct: releases the stream unless a consumer
// took it (and set release to null), then frees the struct.
void DeleteStreamCapsule(PyObject* capsule) {
  auto* stream = static_cast<ArrowArrayStream*>(
      PyCapsule_GetPointer(capsule, kStreamCapsuleName));
  if (stream == nullptr) {
    PyErr_WriteUnraisable(capsule);
    return;
  }
  if (stream->release != nullptr) stream->release(stream);
  delete stream;
}

py::object ArrowCStream(const Reader& reader) {
  auto stream = std::make_unique<ArrowArrayStream>();
  // No I/O yet (the first get_next reads), so no reason to drop the GIL.
  ExportRecordStream(std::make_unique<GilReleasingSource>(
                         BagBatchSource(reader.bag(), reader.view())),
                     stream.get());
  PyObject* capsule =
      PyCapsule_New(stream.get(), kStreamCapsuleName, &DeleteStreamCapsule);
  if (capsule == nullptr) {
    stream->release(stream.get());
    throw py::error_already_set();
  }
  stream.release();  // the capsule owns it now
  return py::reinterpret_steal<py::object>(capsule);
}

}  // namespace

// A method of ReaderCore (bound in reader_core.cc), so that a closed
// reader, whose core stands in for it and raises, raises here too.
void RegisterArrowStream(py::module_& m) {
  py::object reader_core = m.attr("ReaderCore");
  reader_core.attr("arrow_c_stream") = py::cpp_function(
      &ArrowCStream, py::name("arrow_c_stream"), py::is_method(reader_core),
      "arrow_c_stream() -> PyCapsule: the records as an Arrow C stream of one "
      "non-nullable large_binary column `record`.");
}

}  // namespace sackli::python
