#include "python/bagz/options.h"
#include "python/register.h"

#include <climits>
#include <string>

#include "bagz/errors.h"
#include "bagz/thread_pool.h"

namespace py = pybind11;

namespace sackli::python {
namespace {

// `value` as enum E, whose values are 0 .. E::kLast. Not an option rule
// (Python's options checked the field): a conversion that refuses an int
// naming no value of E.
template <typename E>
E ToEnum(const char* field, int value) {
  const int count = static_cast<int>(E::kLast) + 1;
  if (value < 0 || value >= count) {
    ThrowInvalidArgument(std::string(field) + " must be in [0, " +
                         std::to_string(count) + "), not " +
                         std::to_string(value));
  }
  return static_cast<E>(value);
}

CompressionChoice MakeChoice(int mode, int level, py::bytes dictionary,
                             bool raw_literals) {
  CompressionChoice choice;
  choice.mode = ToEnum<CompressionChoice::Mode>("compression_mode", mode);
  choice.level = level;
  choice.dictionary = std::string(dictionary);
  choice.raw_literals = raw_literals;
  return choice;
}

}  // namespace

void RegisterOptions(py::module_& m) {
  // The bounds of option values that are the engine's own facts, for
  // sackli/_options.py to check against (not copies of them).
  m.attr("MAX_PARALLELISM") = py::int_(ThreadPool::kMaxThreads);
  // max_record_bytes=None (no cap) as the engine holds it.
  m.attr("UNLIMITED_RECORD_BYTES") = py::int_(kUnlimitedRecordBytes);
  m.def("check_zstd_level", [](const py::int_& level) {
          int overflow = 0;
          const long long value = PyLong_AsLongLongAndOverflow(level.ptr(), &overflow);
          if (overflow != 0 || value < INT_MIN || value > INT_MAX) {
            ThrowZstdLevelOutside(py::str(level));  // beyond any zstd level
          }
          CheckZstdLevel(static_cast<int>(value));
        }, py::arg("level"),
        "ValueError unless `level` is within libzstd's range of levels.");

  // max_parallelism is taken as a size_t: pybind11 refuses a negative int,
  // and the engine runs 0 as 1.
  py::class_<ReaderBindingOptions>(m, "ReaderBindingOptions",
                                   "How the engine opens a bag (from "
                                   "sackli.ReaderOptions; enum fields as ints).")
      .def(py::init([](int compression_mode, int level, py::bytes dictionary,
                       bool raw_literals,
                       int sharding_layout, int limits_placement,
                       int limits_storage, size_t max_parallelism,
                       size_t remote_parallelism,
                       int access_pattern, int cache_policy,
                       uint64_t max_record_bytes) {
             ReaderBindingOptions o;
             o.bag.shard.max_record_bytes = max_record_bytes;
             o.compression = MakeChoice(compression_mode, level, dictionary, raw_literals);
             o.bag.layout = ToEnum<ShardingLayout>("sharding_layout", sharding_layout);
             o.bag.shard.placement = ToEnum<LimitsPlacement>("limits_placement",
                                                             limits_placement);
             o.bag.shard.storage = ToEnum<LimitsStorage>("limits_storage",
                                                         limits_storage);
             o.bag.max_parallelism = max_parallelism;
             o.bag.remote_parallelism = remote_parallelism;
             o.access = ToEnum<AccessPattern>("access_pattern", access_pattern);
             o.cache = ToEnum<CachePolicy>("cache_policy", cache_policy);
             return o;
           }),
           py::kw_only(), py::arg("compression_mode"), py::arg("level"),
           py::arg("dictionary"), py::arg("raw_literals") = false,
           py::arg("sharding_layout"),
           py::arg("limits_placement"), py::arg("limits_storage"),
           py::arg("max_parallelism"), py::arg("remote_parallelism"),
           py::arg("access_pattern"), py::arg("cache_policy"),
           py::arg("max_record_bytes") = kUnlimitedRecordBytes);

  py::class_<WriterBindingOptions>(m, "WriterBindingOptions",
                                   "How the engine writes a bag (from "
                                   "sackli.WriterOptions; enum fields as ints).")
      .def(py::init([](int compression_mode, int level, py::bytes dictionary,
                       bool raw_literals,
                       int limits_placement, size_t max_parallelism,
                       bool atomic, bool durable, bool checksum,
                       bool record_checksums) {
             WriterBindingOptions o;
             o.atomic = atomic;
             o.durable = durable;
             o.record_checksums = record_checksums;
             o.compression = MakeChoice(compression_mode, level, dictionary, raw_literals);
             o.compression.checksum = checksum;
             o.placement = ToEnum<LimitsPlacement>("limits_placement", limits_placement);
             o.max_parallelism = max_parallelism;
             return o;
           }),
           py::kw_only(), py::arg("compression_mode"), py::arg("level"),
           py::arg("dictionary"), py::arg("raw_literals") = false,
           py::arg("limits_placement"),
           py::arg("max_parallelism"), py::arg("atomic") = true,
           py::arg("durable") = false, py::arg("checksum") = true,
           py::arg("record_checksums") = false);
}

}  // namespace sackli::python
