// Encoding Arrow rows (row_layout.h) from a record batch given through the
// Arrow C data interface.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "arrow/arrow_stream.h"
#include "rows/row_layout.h"

namespace sackli {

// Rows laid out together: row k is data[offsets[k], offsets[k + 1]).
struct EncodedRows {
  std::vector<char> data;
  std::vector<uint64_t> offsets;  // rows + 1 values, offsets[0] = 0
};

// Encodes every row of `batch` (a struct array of `type`'s columns, as a
// record batch exports itself; offsets at any level are honoured), in up
// to `parallelism` parts on the thread pool. Only reads `batch`.
// Throws sackli::Error(kInvalidArgument) for an array whose shape does not
// match `type` (wrong buffer or child counts, missing buffers) or a row
// longer than 4 GiB - 1 bytes (ends are u32). Safe to call from several
// threads at once (the batch is only read; the pool is shared).
EncodedRows EncodeRows(const RowType& type, const ArrowArray& batch, size_t parallelism);

}  // namespace sackli
