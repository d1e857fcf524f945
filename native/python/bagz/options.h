// The options objects Python hands the engine: `_engine.ReaderOptions` and
// `_engine.WriterOptions`, built once per sackli.ReaderOptions /
// WriterOptions instance (sackli/_options.py caches them) so that opening a
// reader passes one object, not a row of integers. Every enum field is
// range-checked on construction: ValueError (kInvalidArgument) naming the
// field, the value and the valid range.
#pragma once

#include <pybind11/pybind11.h>

#include <cstddef>

#include "bagz/bag.h"
#include "bagz/codec.h"
#include "bagz/local_file.h"
#include "bagz/writer.h"

namespace sackli::python {

struct ReaderOpenOptions {
  BagOptions bag;
  CompressionChoice compression;
  AccessPattern access = AccessPattern::kSystem;
  CachePolicy cache = CachePolicy::kSystem;
};

struct WriterOpenOptions {
  LimitsPlacement placement = LimitsPlacement::kTail;
  CompressionChoice compression;
  size_t max_parallelism = 1;
  bool atomic = true;
  bool durable = false;
};

}  // namespace sackli::python
