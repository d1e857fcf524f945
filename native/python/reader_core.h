// `_engine.ReaderCore` (the engine's Reader, see reader.h) and what it
// returns: `Bag`, `PendingRecords` (iterators' read-ahead, as lists of
// `bytes`) and `PendingBatch` (packed reads for sackli.arrow / beam), plus
// `open_reader`. Every batch read releases the GIL and notices Ctrl-C.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>

#include "reader.h"

namespace sackli::python {

// The record at view index `index` as a new `bytes`. Mapped records are
// located without releasing the GIL; large ones are decoded without it.
pybind11::bytes ReadRecord(const Reader& reader, int64_t index);

}  // namespace sackli::python
