// `_engine.WriterCore`: the engine's Writer (writer.h), taking records as
// bytes, str (UTF-8) or any bytes-like object. Compression runs on the
// engine's pool; calls release the GIL whenever they may wait for it. With
// a `stream`, the records stream into it (python/upload_sink.h); calls then
// always release the GIL before taking the writer's lock, since whoever holds
// that lock may need the GIL to call the stream.
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "bagz/codec.h"
#include "bagz/errors.h"
#include "python/buffers.h"
#include "python/gil.h"
#include "python/bagz/options.h"
#include "python/register.h"
#include "python/bagz/upload_sink.h"
#include "bagz/writer.h"

namespace py = pybind11;

namespace sackli::python {
namespace {

// A single record this large is copied in with the GIL released.
constexpr size_t kReleaseGilCopyBytes = 1024 * 1024;

// The writer's batches of records of `largest` bytes (a copy of each and
// its compressed form) come from the heap glibc keeps instead of fresh
// pages that fault in every time (buffers.h): 1 MiB records took 3x bagz's
// CPU in page faults before.
void KeepHeapForRecords(size_t largest) { KeepHeapForBatches(2 * uint64_t{largest}); }

// write_many over a Python iterable gathers borrowed buffers up to the
// engine's WriteMany slice bounds before each call: memory held for one
// call stays bounded however long the iterable is.
bool BatchFull(size_t records, size_t bytes) {
  return records >= Writer::kWriteManyMaxRecords ||
         bytes >= Writer::kWriteManyMaxBytes;
}

Writer* NewWriter(const std::string& path, const WriterBindingOptions& options,
                  py::object stream, const std::string& url) {
  WriterConfig engine;
  engine.placement = options.placement;
  engine.codec = Codec::ForPaths({path}, options.compression)[0];
  engine.max_parallelism = options.max_parallelism;
  engine.atomic = options.atomic;
  engine.durable = options.durable;
  // A compressed bag's records are checked by their frames' content
  // checksums: a sidecar is only for raw records.
  engine.record_checksums = options.record_checksums && !engine.codec.compressed();
  if (options.record_checksums && engine.codec.compressed() && !engine.codec.checksum()) {
    throw Error(ErrorKind::kInvalidArgument,
                path + ": record_checksums=True with checksum=False: a compressed "
                       "bag's records are checked by their zstd frames' content checksum, "
                       "which checksum=False leaves out",
                path);
  }
  std::unique_ptr<AppendSink> sink;
  if (!stream.is_none()) sink = MakeUploadSink(std::move(stream), url.empty() ? path : url);
  ReleaseGil release;
  if (sink) return new Writer(path, engine, std::move(sink));
  return new Writer(path, engine);
}

void Write(Writer& writer, py::handle record) {
  BorrowedBytes bytes(record.ptr());
  KeepHeapForRecords(bytes.view().size());
  // Compression happens on the pool; the call copies the record and, when
  // too many batches are in flight, waits.
  if (writer.streamed() || bytes.view().size() >= kReleaseGilCopyBytes ||
      writer.backlogged()) {
    ReleaseGil release;
    writer.Write(bytes.view());
  } else {
    writer.Write(bytes.view());
  }
}

// Records of any iterable, gathered as borrowed buffers into batches.
void WriteIterable(Writer& writer, py::iterable records) {
  std::vector<BorrowedBytes> batch;
  // Never reallocated: a borrowed buffer is not moved once taken.
  batch.reserve(Writer::kWriteManyMaxRecords);
  std::vector<py::object> owners;  // keep borrowed objects alive
  std::vector<std::string_view> views;
  size_t batch_bytes = 0;
  auto flush_batch = [&] {
    views.clear();
    size_t largest = 0;
    for (const BorrowedBytes& b : batch) {
      views.push_back(b.view());
      largest = std::max(largest, b.view().size());
    }
    KeepHeapForRecords(largest);
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
    if (BatchFull(batch.size(), batch_bytes)) flush_batch();
  }
  if (!batch.empty()) flush_batch();
}

// Records data[offsets[k], offsets[k + 1]) of Python buffers, viewed in
// place: the views stay valid while this object (holding the buffers) lives.
struct PackedRecords {
  py::buffer_info data;
  py::buffer_info offsets;
  std::vector<std::string_view> views;
};

PackedRecords ViewPacked(const py::buffer& data, const py::buffer& offsets) {
  PackedRecords packed{data.request(), offsets.request(), {}};
  const py::buffer_info& d = packed.data;
  const py::buffer_info& o = packed.offsets;
  if (o.ndim != 1 || o.itemsize != 8 ||
      (o.format != "q" && o.format != "l" && o.format != "Q" && o.format != "L") ||
      o.strides[0] != 8) {
    throw py::type_error("offsets must be a contiguous int64 buffer");
  }
  const auto* ends = static_cast<const int64_t*>(o.ptr);
  const size_t n = o.size > 0 ? static_cast<size_t>(o.size) - 1 : 0;
  const int64_t size = static_cast<int64_t>(d.size * d.itemsize);
  packed.views.reserve(n);
  const char* base = static_cast<const char*>(d.ptr);
  for (size_t k = 0; k < n; ++k) {
    if (ends[k] < 0 || ends[k] > ends[k + 1] || ends[k + 1] > size) {
      ThrowInvalidArgument("offsets[" + std::to_string(k) + ":" +
                           std::to_string(k + 2) + "] = [" +
                           std::to_string(ends[k]) + ", " +
                           std::to_string(ends[k + 1]) +
                           "] is not a span of the data (" +
                           std::to_string(size) + " bytes)");
    }
    packed.views.emplace_back(base + ends[k],
                              static_cast<size_t>(ends[k + 1] - ends[k]));
  }
  return packed;
}

// Records already laid out together: one Python call for a whole batch.
void WritePacked(Writer& writer, const py::buffer& data, const py::buffer& offsets) {
  const PackedRecords packed = ViewPacked(data, offsets);
  size_t largest = 0;
  for (const std::string_view record : packed.views) largest = std::max(largest, record.size());
  KeepHeapForRecords(largest);
  // WriteMany slices a call of any size itself.
  ReleaseGil release;
  writer.WriteMany(packed.views);
}

// Total bytes the packed records take as zstd frames of `level`, with
// Huffman-coded or raw literals: lets a writer measure on a sample which
// setting pays before it writes a whole table.
uint64_t ZstdPackedSize(const py::buffer& data, const py::buffer& offsets,
                        int level, bool raw_literals) {
  const PackedRecords packed = ViewPacked(data, offsets);
  const Codec codec = Codec::Zstd(level, "", raw_literals);
  ReleaseGil release;
  uint64_t total = 0;
  std::string frame;
  for (const std::string_view record : packed.views) {
    frame.clear();
    codec.Encode(record.data(), record.size(), frame);
    total += frame.size();
  }
  return total;
}

// `method` of the writer with the GIL released (it may wait for the pool).
template <typename... Args>
auto Released(void (Writer::*method)(Args...)) {
  return [method](Writer& writer, Args... args) {
    ReleaseGil release;
    (writer.*method)(args...);
  };
}

}  // namespace

void RegisterWriter(py::module_& m) {
  m.def("zstd_packed_size", &ZstdPackedSize, py::arg("data"), py::arg("offsets"),
        py::arg("level"), py::arg("raw_literals"),
        "Total size of the packed records compressed as zstd frames of "
        "`level` (literals raw or Huffman-coded).");
  py::class_<Writer>(m, "WriterCore")
      .def(py::init(&NewWriter), py::arg("path"), py::arg("options"),
           py::arg("stream") = py::none(), py::arg("url") = "")
      .def("write", &Write, py::arg("record"))
      .def("write_many", &WriteIterable, py::arg("records"))
      .def("write_packed", &WritePacked, py::arg("data"), py::arg("offsets"))
      .def("flush", Released(&Writer::Flush))
      .def("close", Released(&Writer::Close), py::arg("publish") = true)
      .def("publish", Released(&Writer::Publish), py::arg("target"),
           py::arg("sync_folder") = true)
      .def("discard", Released(&Writer::Discard))
      .def("abandon", Released(&Writer::Abandon))
      .def_property_readonly("path", &Writer::path)
      .def_property_readonly("partial_path", &Writer::partial_path)
      .def_property_readonly("record_checksums", &Writer::record_checksums)
      // The lock-taking getters release the GIL (see the top of the file).
      .def_property_readonly("records_written",
                             [](const Writer& writer) {
                               ReleaseGil release;
                               return writer.records_written();
                             })
      .def_property_readonly("bytes_written",
                             [](Writer& writer) {
                               ReleaseGil release;  // waits for the batches
                               return writer.bytes_written();
                             })
      .def_property_readonly("closed",
                             [](const Writer& writer) {
                               ReleaseGil release;
                               return writer.closed();
                             })
      .def_property_readonly("streamed", &Writer::streamed);
}

}  // namespace sackli::python
