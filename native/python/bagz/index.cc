#include "python/bagz/lookup.h"
#include "python/register.h"

#include <memory>
#include <optional>
#include <vector>

#include "python/buffers.h"
#include "python/gil.h"
#include "bagz/reader.h"

namespace py = pybind11;

namespace sackli::python {
namespace {

std::unique_ptr<RecordIndex> BuildIndex(const Reader& reader, bool keep_all,
                                        uint64_t max_memory_bytes,
                                        uint64_t hash_mask) {
  ReleaseGil release;
  return std::make_unique<RecordIndex>(reader.bag(), reader.view(), keep_all,
                         max_memory_bytes, &CheckSignals, hash_mask);
}

}  // namespace

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

void RegisterIndex(py::module_& m) {
  // `index[record]` and `record in index` are plain CPython methods added
  // by fast_paths.cc.
  py::class_<RecordIndex>(m, "RecordIndex")
      .def(py::init([](const Reader& reader, bool keep_all,
                       uint64_t max_memory_bytes) {
             return BuildIndex(reader, keep_all, max_memory_bytes, ~uint64_t{0});
           }),
           py::arg("reader"), py::arg("keep_all"), py::arg("max_memory_bytes"))
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

  py::module_ testing = m.def_submodule(
      "testing", "Test-only entry points; not for production use.");
  testing.def("record_index_with_hash_mask", &BuildIndex, py::arg("reader"),
              py::arg("keep_all"), py::arg("max_memory_bytes"),
              py::arg("hash_mask"),
              "A RecordIndex whose hashes are ANDed with hash_mask (0: every "
              "record collides, so lookups rely on comparing bytes alone).");
}

}  // namespace sackli::python
