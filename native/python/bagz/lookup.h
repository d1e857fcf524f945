// `_engine.RecordIndex` (sackli.Index / MultiIndex subclass it) and the
// lookup every entry point shares.
#pragma once

#include <pybind11/pybind11.h>

#include "bagz/record_index.h"

namespace sackli::python {

// One Index / MultiIndex lookup of `record` (bytes, str as UTF-8, or any
// bytes-like object; TypeError otherwise): the first index (an int), all
// indices (a list), or None when absent. Lookups that must read the bag to
// confirm a hash match release the GIL; in-memory ones are too short to.
pybind11::object IndexLookup(const RecordIndex& index, pybind11::handle record);

}  // namespace sackli::python
