#include "python/bagz/options.h"
#include "python/register.h"

#include <string>

#include "bagz/errors.h"

namespace py = pybind11;

namespace sackli::python {
namespace {

// `value` as enum E whose values are 0 .. count - 1.
template <typename E>
E CheckedEnum(const char* field, int value, int count) {
  if (value < 0 || value >= count) {
    ThrowInvalidArgument(std::string(field) + " must be in [0, " +
                         std::to_string(count) + "), not " +
                         std::to_string(value));
  }
  return static_cast<E>(value);
}

size_t CheckedParallelism(int64_t value) {
  if (value < 1) {
    ThrowInvalidArgument("max_parallelism must be >= 1, not " +
                         std::to_string(value));
  }
  return static_cast<size_t>(value);
}

CompressionChoice MakeChoice(int mode, int level, py::bytes dictionary,
                             bool raw_literals) {
  CompressionChoice choice;
  choice.mode = CheckedEnum<CompressionChoice::Mode>("compression_mode", mode, 3);
  choice.level = level;
  choice.dictionary = std::string(dictionary);
  choice.raw_literals = raw_literals;
  return choice;
}

}  // namespace

void RegisterOptions(py::module_& m) {
  py::class_<ReaderOpenOptions>(m, "ReaderOptions",
                                "How the engine opens a bag (from "
                                "sackli.ReaderOptions; enum fields as ints).")
      .def(py::init([](int compression_mode, int level, py::bytes dictionary,
                       bool raw_literals,
                       int sharding_layout, int limits_placement,
                       int limits_storage, int64_t max_parallelism,
                       int access_pattern, int cache_policy) {
             ReaderOpenOptions o;
             o.compression = MakeChoice(compression_mode, level, dictionary, raw_literals);
             o.bag.layout = CheckedEnum<ShardingLayout>("sharding_layout",
                                                        sharding_layout, 2);
             o.bag.shard.placement = CheckedEnum<LimitsPlacement>(
                 "limits_placement", limits_placement, 2);
             o.bag.shard.storage = CheckedEnum<LimitsStorage>(
                 "limits_storage", limits_storage, 2);
             o.bag.max_parallelism = CheckedParallelism(max_parallelism);
             o.access = CheckedEnum<AccessPattern>("access_pattern",
                                                   access_pattern, 3);
             o.cache = CheckedEnum<CachePolicy>("cache_policy", cache_policy, 3);
             return o;
           }),
           py::kw_only(), py::arg("compression_mode"), py::arg("level"),
           py::arg("dictionary"), py::arg("raw_literals") = false,
           py::arg("sharding_layout"),
           py::arg("limits_placement"), py::arg("limits_storage"),
           py::arg("max_parallelism"), py::arg("access_pattern"),
           py::arg("cache_policy"));

  py::class_<WriterOpenOptions>(m, "WriterOptions",
                                "How the engine writes a bag (from "
                                "sackli.WriterOptions; enum fields as ints).")
      .def(py::init([](int compression_mode, int level, py::bytes dictionary,
                       bool raw_literals,
                       int limits_placement, int64_t max_parallelism,
                       bool atomic, bool durable) {
             WriterOpenOptions o;
             o.atomic = atomic;
             o.durable = durable;
             o.compression = MakeChoice(compression_mode, level, dictionary, raw_literals);
             o.placement = CheckedEnum<LimitsPlacement>("limits_placement",
                                                        limits_placement, 2);
             o.max_parallelism = CheckedParallelism(max_parallelism);
             return o;
           }),
           py::kw_only(), py::arg("compression_mode"), py::arg("level"),
           py::arg("dictionary"), py::arg("raw_literals") = false,
           py::arg("limits_placement"),
           py::arg("max_parallelism"), py::arg("atomic") = true,
           py::arg("durable") = false);
}

}  // namespace sackli::python
