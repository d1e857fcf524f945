// Records as an Arrow C stream (the Arrow C data and C stream interfaces), so
// that any Arrow consumer (pyarrow, Polars, DuckDB, nanoarrow) reads a bag
// without pyarrow on our side. The stream's schema is a struct of one
// non-nullable `large_binary` field named `record`; each record batch is a
// struct array of one child whose buffers are [no validity, n + 1 int64
// offsets, data]: the layout the engine's packed buffers already have, so a
// batch is lent to the consumer without a copy.
//
// The ABI structs below are written from the Arrow specification
// (https://arrow.apache.org/docs/format/CDataInterface.html and
// CStreamInterface.html) and guarded by its standard macros, so a header of
// Arrow or nanoarrow included first provides the same definitions.
//
// Wiring into Python (a few lines in the bindings): allocate an
// ArrowArrayStream, ExportRecordStream(BagBatchSource(bag, view), stream)
// with the GIL released, and return PyCapsule_New(stream,
// "arrow_array_stream", destructor) whose destructor calls stream->release
// when it is non-null and frees the struct.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "bagz/bag.h"
#include "bagz/view.h"

extern "C" {

#ifndef ARROW_C_DATA_INTERFACE
#define ARROW_C_DATA_INTERFACE

#define ARROW_FLAG_DICTIONARY_ORDERED 1
#define ARROW_FLAG_NULLABLE 2
#define ARROW_FLAG_MAP_KEYS_SORTED 4

struct ArrowSchema {
  const char* format;
  const char* name;
  const char* metadata;
  int64_t flags;
  int64_t n_children;
  struct ArrowSchema** children;
  struct ArrowSchema* dictionary;
  void (*release)(struct ArrowSchema*);
  void* private_data;
};

struct ArrowArray {
  int64_t length;
  int64_t null_count;
  int64_t offset;
  int64_t n_buffers;
  int64_t n_children;
  const void** buffers;
  struct ArrowArray** children;
  struct ArrowArray* dictionary;
  void (*release)(struct ArrowArray*);
  void* private_data;
};

#endif  // ARROW_C_DATA_INTERFACE

#ifndef ARROW_C_STREAM_INTERFACE
#define ARROW_C_STREAM_INTERFACE

struct ArrowArrayStream {
  int (*get_schema)(struct ArrowArrayStream*, struct ArrowSchema* out);
  int (*get_next)(struct ArrowArrayStream*, struct ArrowArray* out);
  const char* (*get_last_error)(struct ArrowArrayStream*);
  void (*release)(struct ArrowArrayStream*);
  void* private_data;
};

#endif  // ARROW_C_STREAM_INTERFACE

}  // extern "C"

namespace sackli {

// The one field of every record batch.
inline constexpr char kRecordFieldName[] = "record";

// One batch of records: record k is data[offsets[k], offsets[k + 1]).
// `offsets` holds n + 1 non-decreasing values and may start above 0. `owner`
// keeps `data` alive for as long as the consumer holds the batch (which may
// be after the stream is released).
struct RecordBatchData {
  std::shared_ptr<const void> owner;
  const char* data = nullptr;
  std::vector<int64_t> offsets;
};

// Where the batches of a stream come from. Called by one consumer thread at
// a time (the Arrow stream contract); need not be thread-safe.
class RecordBatchSource {
 public:
  virtual ~RecordBatchSource() = default;
  // Fills `batch` with the next batch and returns true, or returns false at
  // the end. Throws sackli::Error (or any std::exception) on failure.
  virtual bool Next(RecordBatchData& batch) = 0;
};

// Makes `out` a stream of the batches of `source`, which it then owns. The
// consumer must call out->release. get_next returns 0 with a released
// (release == nullptr) array at the end; a source that throws makes
// get_next return EINVAL (kCorruption, kInvalidArgument, kOutOfRange,
// kClosed), ENOMEM (std::bad_alloc) or EIO (kIo, kNotFound and any other
// exception), with the error's message from get_last_error; the stream then
// stays failed. Throws only std::bad_alloc.
void ExportRecordStream(std::unique_ptr<RecordBatchSource> source,
                        ArrowArrayStream* out);

// About this many stored bytes of records per batch of BagBatchSource, as
// sackli.arrow.read_batches does by default.
inline constexpr uint64_t kDefaultArrowBatchBytes = uint64_t{16} << 20;

// The records of `view` of `bag`, in view order, in batches of about
// `batch_bytes` stored bytes that never span two shards of a CONCATENATED
// bag. Records that lie together uncompressed in a mapped shard are lent from
// the mapping (the batch's owner keeps the bag open); the others are read and
// decoded on the thread pool, one batch ahead of the consumer.
std::unique_ptr<RecordBatchSource> BagBatchSource(
    std::shared_ptr<const Bag> bag, View view,
    uint64_t batch_bytes = kDefaultArrowBatchBytes);

}  // namespace sackli
