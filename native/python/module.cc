// The Python face of the engine, module `sackli._engine`. Each file of
// native/python/ binds one class or concern and registers itself here. The
// bindings convert types, release the GIL around engine work, allocate the
// output `bytes` for the engine to decode into, and map engine errors onto
// Python exceptions; no format or read policy lives here (see the engine
// headers for that).
#include <pybind11/pybind11.h>
#include <zstd.h>

#include <string>

#include "bagz/format.h"
#include "bagz/record_checksums.h"
#include "python/gil.h"
#include "python/register.h"
#include "bagz/thread_pool.h"
#include "bagz/writer.h"

namespace py = pybind11;

namespace sackli::python {
namespace {

// Format facts the Python side reads instead of re-deriving them.
void RegisterFormat(py::module_& m) {
  m.def("limits_path_for", &LimitsPathFor);
  m.def("checksums_path_for", &ChecksumsPathFor);
  m.def("partial_folder_prefix", &PartialFolderPrefix);
  m.attr("PARTIAL_MARKER") = kPartialMarker;
  m.def("has_zstd_suffix", &HasZstdSuffix);
  m.attr("LIMIT_BYTES") = kLimitBytes;
}

void RegisterMisc(py::module_& m) {
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
}

}  // namespace
}  // namespace sackli::python

PYBIND11_MODULE(_engine, m) {
  using namespace sackli::python;
  m.doc() = "sackli's C++ engine; use the `sackli` package, not this module.";
  RememberMainThread();
  RegisterErrors(m);
  RegisterBuffers(m);
  RegisterOptions(m);
  RegisterBlockCache(m);
  RegisterReader(m);
  RegisterIndex(m);
  RegisterWriter(m);
  RegisterArrowStream(m);
  RegisterFastPaths(m);
  RegisterIntMap(m);
  RegisterRowCodec(m);
  RegisterDatapoints(m);
  RegisterFormat(m);
  RegisterMisc(m);
}
