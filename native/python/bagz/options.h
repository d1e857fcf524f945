// The options objects Python hands the engine: `_engine.ReaderBindingOptions`
// and `_engine.WriterBindingOptions`, built once per sackli.ReaderOptions /
// WriterOptions instance (sackli/_options.py caches them) so that opening a
// reader passes one object, not a row of integers.
//
// Where options are validated: once, in Python, when a sackli.ReaderOptions,
// WriterOptions or CompressionZstd is constructed; its messages are the ones
// users see. The zstd level is the one rule Python asks the engine about
// (CheckZstdLevel, codec.h: the range is libzstd's). These bindings only
// convert values already valid into the engine's types: the one thing they
// refuse is an enum field whose int names no value of the engine's enum
// (counted from its definition: 0 .. kLast), so that a direct call of these private entry
// points never leaves an out-of-range enum in the engine.
#pragma once

#include <pybind11/pybind11.h>

#include <cstddef>

#include "bagz/bag.h"
#include "bagz/codec.h"
#include "bagz/local_file.h"
#include "bagz/writer.h"

namespace sackli::python {

// What the engine's open takes (sackli.ReaderOptions, converted).
struct ReaderBindingOptions {
  BagOptions bag;
  CompressionChoice compression;
  AccessPattern access = AccessPattern::kSystem;
  CachePolicy cache = CachePolicy::kSystem;
};

// What a WriterCore is opened with (sackli.WriterOptions, converted); the
// engine's WriterConfig is made from it for the writer's own path.
struct WriterBindingOptions {
  LimitsPlacement placement = LimitsPlacement::kTail;
  CompressionChoice compression;
  size_t max_parallelism = 1;
  bool atomic = true;
  bool durable = false;
  bool record_checksums = false;
};

}  // namespace sackli::python
