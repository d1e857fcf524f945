// `_engine.ReaderCore` (the engine's Reader, see reader.h) and what it
// returns: `Bag`, `PendingRecords` (iterators' read-ahead, as lists of
// `bytes`) and `PendingBatch` (packed reads for sackli.arrow / beam), plus
// `open_reader`. Every batch read releases the GIL and notices Ctrl-C.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <vector>

#include "bagz/reader.h"

namespace sackli::python {

// The record at view index `index` as a new `bytes`. Mapped records are
// located without releasing the GIL; large ones are decoded without it.
pybind11::bytes ReadRecord(const Reader& reader, int64_t index);

// Records read ahead (iterators, dataset batches): the read starts at
// construction and Result() hands the records over as a list of `bytes`.
// Mapped bags decode straight into the `bytes` allocated at the start (one
// copy, and memory the consumer freed from an earlier batch is reused);
// others decode into one buffer, copied into `bytes` at Result(). Construct
// and take the result holding the GIL.
class PendingRecords {
 public:
  PendingRecords(const Reader& reader, std::vector<uint64_t> globals);
  PendingRecords(PendingRecords&& other) noexcept;
  PendingRecords(const PendingRecords&) = delete;
  // The pool writes into the objects until the fill ends: waits for it.
  ~PendingRecords();

  // The records in order (repeats share one `bytes`); once.
  pybind11::list Result();

 private:
  static pybind11::list CopyOut(const DecodedRecords& records);

  ReadAhead ahead_;
  pybind11::list objects_;        // mapped bags: the records, being filled
  std::vector<uint32_t> first_;   // mapped bags: repeats (empty: none)
  bool in_place_ = false;
};

}  // namespace sackli::python
