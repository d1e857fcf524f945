#include "python/bagz/reader_core.h"
#include "python/register.h"

#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bagz/errors.h"
#include "python/buffers.h"
#include "python/gil.h"
#include "python/indices.h"
#include "python/bagz/options.h"
#include "python/bagz/remote_source.h"

namespace py = pybind11;

namespace sackli::python {
namespace {

// Above these sizes a single read releases the GIL for its decoding; below,
// switching threads would cost more than the work itself.
constexpr uint64_t kReleaseGilDecodeBytes = 16 * 1024;
constexpr uint64_t kReleaseGilCopyBytes = 1024 * 1024;

// Reads records with the given global indices (repeats allowed) into a new
// list; repeated positions share one `bytes`.
py::list ReadToList(const Reader& reader, const std::vector<uint64_t>& globals) {
  py::list out(globals.size());
  PyObject* list = out.ptr();
  std::vector<size_t> first;
  {
    ReleaseGil release;
    first = reader.ReadGlobals(
        globals,
        [list](const size_t* positions, const ReadPlan& plan, char** dst) {
          AcquireGil gil;
          KeepHeapForBatches(plan.total_decoded_bytes());
          for (size_t k = 0; k < plan.size(); ++k) {
            if (plan.FirstPosition(k) != k) continue;  // shared below
            PyObject* bytes = NewBytes(plan.decoded_size(k));
            PyList_SET_ITEM(list, static_cast<Py_ssize_t>(positions[k]), bytes);
            dst[k] = BytesData(bytes);
          }
        },
        &CheckSignals);
  }
  ShareRepeats(list, first);
  return out;
}

// A batch read running in the background into one buffer.
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

Reader OpenReader(const std::vector<std::string>& paths,
                  const ReaderBindingOptions& options, py::object remote) {
  SourceOpener opener =
      MakeOpener(std::move(remote), options.access, options.cache);
  ReleaseGil release;
  const std::vector<Codec> codecs = Codec::ForPaths(paths, options.compression);
  std::vector<ShardPath> shards;
  shards.reserve(paths.size());
  for (size_t i = 0; i < paths.size(); ++i) {
    shards.push_back(ShardPath{paths[i], codecs[i]});
  }
  return Reader(Bag::Open(shards, options.bag, opener));
}

void RegisterBag(py::module_& m) {
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
      // For Beam's splitting: see ShardRecordOffsets.
      .def("record_offsets",
           [](const Bag& bag, size_t shard, uint64_t first, uint64_t count) {
             std::shared_ptr<std::vector<uint64_t>> offsets;
             {
               ReleaseGil release;
               offsets = std::make_shared<std::vector<uint64_t>>(
                   ShardRecordOffsets(bag, shard, first, count));
             }
             return EngineBuffer{offsets, offsets->data(), offsets->size(), true};
           },
           py::arg("shard"), py::arg("first"), py::arg("count"));
}

}  // namespace

PendingRecords::PendingRecords(const Reader& reader, std::vector<uint64_t> globals) {
  ahead_ = ReadAhead::Start(
      reader, std::move(globals), [this](const ReadPlan& plan, char** dst) {
        objects_ = py::list(plan.size());
        in_place_ = true;
        first_ = FirstPositions(plan);
        KeepHeapForBatches(plan.total_decoded_bytes());
        for (size_t k = 0; k < plan.size(); ++k) {
          if (plan.FirstPosition(k) != k) continue;  // shared at result()
          PyObject* bytes = NewBytes(plan.decoded_size(k));
          PyList_SET_ITEM(objects_.ptr(), static_cast<Py_ssize_t>(k), bytes);
          dst[k] = BytesData(bytes);
        }
      });
}

PendingRecords::PendingRecords(PendingRecords&& other) noexcept
    : ahead_(std::move(other.ahead_)),
      objects_(std::move(other.objects_)),
      first_(std::move(other.first_)),
      in_place_(std::exchange(other.in_place_, false)) {}

PendingRecords::~PendingRecords() {
  if (in_place_) WaitUninterrupted(ahead_);
}

py::list PendingRecords::Result() {
  WaitNoticingSignals(ahead_);
  ahead_.RethrowIfFailed();
  if (const DecodedRecords* records = ahead_.buffered()) return CopyOut(*records);
  if (!objects_) ThrowInvalidArgument("result() was already taken");
  py::list objects = std::move(objects_);
  ShareRepeats(objects.ptr(), first_);
  return objects;
}

py::list PendingRecords::CopyOut(const DecodedRecords& records) {
  const size_t n = records.offsets.empty() ? 0 : records.offsets.size() - 1;
  py::list out(n);
  for (size_t k = 0; k < n; ++k) {
    if (!records.first_position.empty() && records.first_position[k] != k) {
      continue;  // shared below
    }
    const uint64_t begin = records.offsets[k];
    PyObject* bytes = PyBytes_FromStringAndSize(
        records.data.data() + begin,
        static_cast<Py_ssize_t>(records.offsets[k + 1] - begin));
    if (bytes == nullptr) throw py::error_already_set();
    PyList_SET_ITEM(out.ptr(), static_cast<Py_ssize_t>(k), bytes);
  }
  ShareRepeats(out.ptr(), records.first_position);
  return out;
}


namespace {

// A `bytes` for the decoded record; a MemoryError names the file and record.
PyObject* NewRecordBytes(const StoredRecord& record) {
  try {
    return NewBytes(record.decoded_size);
  } catch (py::error_already_set& e) {
    if (!e.matches(PyExc_MemoryError)) throw;
    record.shard->ThrowOutOfMemory(
        record.local, record.begin,
        "allocating " + std::to_string(record.decoded_size) + " bytes");
  }
}

}  // namespace

py::bytes ReadRecord(const Reader& reader, int64_t index) {
  StoredRecord record;
  // Mapped sources need no I/O to locate a record: stay on the GIL.
  if (reader.LocateNeedsIo()) {
    ReleaseGil release;
    reader.Locate(index, record);
  } else {
    reader.Locate(index, record);
  }
  py::bytes out = py::reinterpret_steal<py::bytes>(NewRecordBytes(record));
  char* dst = BytesData(out.ptr());
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

void RegisterReader(py::module_& m) {
  RegisterBag(m);

  // One call per Reader(): opening is dominated by per-call overhead.
  m.def("open_reader", &OpenReader, py::arg("paths"), py::arg("options"),
        py::arg("remote"));

  py::class_<PendingBatch>(m, "PendingBatch").def("packed", &PendingBatch::Packed);
  py::class_<PendingRecords>(m, "PendingRecords")
      .def("result", &PendingRecords::Result);

  py::class_<Reader>(m, "ReaderCore")
      // A view restored from a pickle, checked against the bag reopened.
      .def(py::init([](std::shared_ptr<Bag> bag, uint64_t start, int64_t step,
                       uint64_t length) {
        return Reader(std::move(bag), View{start, step, length});
      }))
      .def("__len__", &Reader::size)
      .def_property_readonly("view", [](const Reader& r) {
        return py::make_tuple(r.view().start, r.view().step, r.view().length);
      })
      .def_property_readonly("bag", [](const Reader& r) {
        return std::const_pointer_cast<Bag>(r.bag());
      })
      .def("slice",
           [](const Reader& r, const py::slice& s) {
             size_t start, stop, step, length;
             if (!s.compute(r.size(), &start, &stop, &step, &length)) {
               throw py::error_already_set();
             }
             return r.Slice(static_cast<int64_t>(start),
                            static_cast<int64_t>(step), length);
           })
      .def("read_all",
           [](const Reader& r) { return ReadToList(r, r.AllGlobals()); })
      .def("read_range",
           [](const Reader& r, int64_t start, int64_t count) {
             return ReadToList(r, r.RangeGlobals(start, count));
           })
      .def("read_indices",
           [](const Reader& r, py::handle indices) {
             return ReadToList(r, ResolveIndices(r.view(), indices));
           })
      // Iterators' read-ahead: batches started now, `result()` later.
      .def("start_records",
           [](const Reader& r, py::handle indices) {
             return PendingRecords(r, ResolveIndices(r.view(), indices));
           })
      .def("start_records_range",
           [](const Reader& r, int64_t start, int64_t count) {
             return PendingRecords(r, r.RangeGlobals(start, count));
           })
      .def("valid_prefix",
           [](const Reader& r, const py::list& indices) {
             return ValidPrefix(r.view(), indices);
           })
      .def("start_read_indices",
           [](const Reader& r, py::handle indices, std::string prefix) {
             return PendingBatch(
                 r.StartRead(ResolveIndices(r.view(), indices), std::move(prefix)));
           },
           py::arg("indices"), py::arg("prefix") = py::bytes())
      .def("start_read_range",
           [](const Reader& r, int64_t start, int64_t count, std::string prefix) {
             return PendingBatch(
                 r.StartRead(r.RangeGlobals(start, count), std::move(prefix)));
           },
           py::arg("start"), py::arg("count"), py::arg("prefix") = py::bytes())
      .def("mapped_run",
           [](const Reader& r, uint64_t start,
              uint64_t count) -> std::optional<py::tuple> {
             std::optional<Reader::Run> run = r.MappedRun(start, count);
             if (!run) return std::nullopt;
             // One owner holds the offsets and the bag, whose mapping the
             // data points into.
             auto owner = std::make_shared<
                 std::pair<std::shared_ptr<const Bag>, std::vector<uint64_t>>>(
                 r.bag(), std::move(run->offsets));
             return PackedBuffers(owner, run->data,
                                  static_cast<size_t>(owner->second.back()),
                                  owner->second);
           })
      .def("find",
           [](const Reader& r, const py::bytes& value, int64_t start,
              std::optional<int64_t> stop) {
             const std::string_view v = value;
             ReleaseGil release;
             return r.Find(v, start, stop, &CheckSignals);
           })
      .def("count",
           [](const Reader& r, const py::bytes& value) {
             const std::string_view v = value;
             ReleaseGil release;
             return r.Count(v, &CheckSignals);
           })
      .def("approximate_bytes_per_record", &Reader::ApproximateBytesPerRecord);
}

}  // namespace sackli::python
