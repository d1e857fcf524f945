// Decoding Arrow rows (row_layout.h) straight into Arrow arrays exported
// through the Arrow C data interface: buffers allocated here, freed by the
// arrays' release callbacks (the consumer, e.g. pyarrow, calls them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "arrow/arrow_stream.h"
#include "rows/row_layout.h"

namespace sackli {

// Where the rows to decode come from, for error messages.
struct RowSource {
  std::string name;    // the bag (file or spec)
  uint64_t first = 0;  // the position of row 0 among the bag's records
};

// Decodes rows k = 0 .. n - 1, row k being data[offsets[k], offsets[k + 1])
// (`offsets`: n + 1 values), keeping only the top-level columns `columns`
// (indices into type.children, in output order; repeats allowed). The rows
// are cut into up to `parallelism` parts decoded side by side on the
// thread pool; each part becomes one struct array (a record batch of
// those columns), in row order. The caller owns the arrays and must
// release them.
//
// Every offset, length and count in a row is checked against the row's
// size before it is used. A row that is not a row of `type` (bad version
// byte, offsets out of order or beyond the row, counts larger than the
// bytes that hold them) throws sackli::Error(kCorruption) naming
// `source.name` and the record (source.first + k). Offsets outside `data`
// or out of order are corruption too. Throws kInvalidArgument for a
// column index out of range, or when a part's values of a string, binary
// or list column outgrow Arrow's 32-bit offsets (2 GiB): fewer rows then. Safe to call from several threads at once.
std::vector<ArrowArray> DecodeRows(const RowType& type, const char* data, size_t data_size,
                                   const int64_t* offsets, size_t rows,
                                   const std::vector<size_t>& columns, size_t parallelism,
                                   const RowSource& source);

}  // namespace sackli
