// `_engine.RowCodec`: the row codec (row_layout.h, row_encode.h,
// row_decode.h) for sackli.arrow. Arrow data comes and goes as PyCapsules of
// the Arrow PyCapsule interface (`__arrow_c_schema__`, `__arrow_c_array__`);
// rows as packed buffers (one buffer + int64 offsets). No Python object is
// made per row either way; the engine work runs with the GIL released.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "python/buffers.h"
#include "python/gil.h"
#include "python/register.h"
#include "rows/row_decode.h"
#include "rows/row_encode.h"
#include "rows/row_layout.h"

namespace py = pybind11;

namespace sackli::python {
namespace {

constexpr char kSchemaCapsuleName[] = "arrow_schema";
constexpr char kArrayCapsuleName[] = "arrow_array";

template <typename T>
T* FromCapsule(const py::handle& capsule, const char* name) {
  if (!PyCapsule_IsValid(capsule.ptr(), name)) {
    throw py::type_error(std::string("expected a PyCapsule named '") + name + "'");
  }
  return static_cast<T*>(PyCapsule_GetPointer(capsule.ptr(), name));
}

// The capsule owns the array struct: releases it unless a consumer moved it
// out (release set to null), then frees the struct.
void DeleteArrayCapsule(PyObject* capsule) {
  auto* array = static_cast<ArrowArray*>(PyCapsule_GetPointer(capsule, kArrayCapsuleName));
  if (array == nullptr) {
    PyErr_WriteUnraisable(capsule);
    return;
  }
  if (array->release != nullptr) array->release(array);
  delete array;
}

py::object ArrayCapsule(ArrowArray&& array) {
  auto owned = std::make_unique<ArrowArray>(array);
  array.release = nullptr;
  PyObject* capsule = PyCapsule_New(owned.get(), kArrayCapsuleName, &DeleteArrayCapsule);
  if (capsule == nullptr) {
    owned->release(owned.get());
    throw py::error_already_set();
  }
  owned.release();
  return py::reinterpret_steal<py::object>(capsule);
}

class RowCodec {
 public:
  explicit RowCodec(const py::handle& schema_capsule)
      : type_(RowTypeOf(*FromCapsule<ArrowSchema>(schema_capsule, kSchemaCapsuleName))) {}

  py::tuple Encode(const py::handle& array_capsule, size_t parallelism) const {
    const ArrowArray* array = FromCapsule<ArrowArray>(array_capsule, kArrayCapsuleName);
    auto rows = std::make_shared<EncodedRows>();
    {
      ReleaseGil release;
      *rows = EncodeRows(type_, *array, parallelism);
    }
    return PackedBuffers(rows, rows->data.data(), rows->data.size(), rows->offsets);
  }

  py::list Decode(const py::handle& data, const py::handle& offsets,
                  const std::vector<size_t>& columns, size_t parallelism,
                  const std::string& source, uint64_t first) const {
    const BorrowedBytes data_bytes(data.ptr());
    const BorrowedBytes offset_bytes(offsets.ptr());
    const std::string_view ends = offset_bytes.view();
    if (ends.size() % sizeof(int64_t) != 0 || ends.size() < sizeof(int64_t)) {
      ThrowInvalidArgument("offsets must hold n + 1 int64 values");
    }
    std::vector<ArrowArray> batches;
    {
      ReleaseGil release;
      batches = DecodeRows(type_, data_bytes.view().data(), data_bytes.view().size(),
                           reinterpret_cast<const int64_t*>(ends.data()),
                           ends.size() / sizeof(int64_t) - 1, columns, parallelism,
                           RowSource{source, first});
    }
    py::list capsules;
    for (ArrowArray& batch : batches) capsules.append(ArrayCapsule(std::move(batch)));
    return capsules;
  }

 private:
  RowType type_;
};

}  // namespace

void RegisterRowCodec(py::module_& m) {
  m.def(
      "row_codec_unsupported",
      [](const py::handle& schema_capsule) -> py::object {
        const std::string reason =
            RowCodecUnsupported(*FromCapsule<ArrowSchema>(schema_capsule, kSchemaCapsuleName));
        return reason.empty() ? py::none() : py::object(py::str(reason));
      },
      "row_codec_unsupported(schema_capsule) -> str | None: why the row codec cannot hold "
      "rows of this schema (a struct), or None when it can.");
  py::class_<RowCodec>(m, "RowCodec", "The engine's Arrow row codec for one schema.")
      .def(py::init<const py::handle&>(), py::arg("schema_capsule"))
      .def("encode", &RowCodec::Encode, py::arg("array_capsule"), py::arg("parallelism"),
           "encode(array_capsule, parallelism) -> (data, offsets): each row of a record batch "
           "(its __arrow_c_array__ capsule) as a record.")
      .def("decode", &RowCodec::Decode, py::arg("data"), py::arg("offsets"),
           py::arg("columns"), py::arg("parallelism"), py::arg("source"), py::arg("first"),
           "decode(data, offsets, columns, parallelism, source, first) -> list of "
           "arrow_array capsules: the rows, as record batches of those columns.");
}

}  // namespace sackli::python
