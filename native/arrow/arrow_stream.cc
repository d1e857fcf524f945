#include "arrow/arrow_stream.h"

#include <algorithm>
#include <cerrno>
#include <new>
#include <string>
#include <utility>

#include "bagz/errors.h"
#include "bagz/read_plan.h"

namespace sackli {
namespace {

// --- Schema: struct<record: large_binary not null> ---------------------------

// The child's strings are static and it owns nothing, so a child moved out
// of its parent releases by marking itself released.
void ReleaseFieldSchema(ArrowSchema* schema) { schema->release = nullptr; }

struct SchemaPrivate {
  ArrowSchema field;
  ArrowSchema* children[1];
};

void ReleaseBatchSchema(ArrowSchema* schema) {
  auto* owned = static_cast<SchemaPrivate*>(schema->private_data);
  if (owned->field.release != nullptr) owned->field.release(&owned->field);
  delete owned;
  schema->release = nullptr;
}

void FillSchema(ArrowSchema* out) {
  auto* owned = new SchemaPrivate();
  owned->field = ArrowSchema{"Z", kRecordFieldName, nullptr, /*flags=*/0, 0,
                             nullptr, nullptr, &ReleaseFieldSchema, nullptr};
  owned->children[0] = &owned->field;
  *out = ArrowSchema{"+s", "", nullptr, 0, 1, owned->children, nullptr,
                     &ReleaseBatchSchema, owned};
}

// --- Arrays: one struct array per batch, with one large_binary child ---------

// An empty batch still points its data buffer somewhere: consumers may
// reject a null data buffer.
const char kNoData[1] = {0};

struct FieldArrayPrivate {
  std::shared_ptr<const void> owner;  // keeps the data alive
  std::vector<int64_t> offsets;
  const void* buffers[3];
};

void ReleaseFieldArray(ArrowArray* array) {
  delete static_cast<FieldArrayPrivate*>(array->private_data);
  array->release = nullptr;
}

struct BatchArrayPrivate {
  ArrowArray field;
  ArrowArray* children[1];
  const void* buffers[1] = {nullptr};  // no validity bitmap: nothing is null
};

void ReleaseBatchArray(ArrowArray* array) {
  auto* owned = static_cast<BatchArrayPrivate*>(array->private_data);
  // The consumer may have moved the child out (and released it itself).
  if (owned->field.release != nullptr) owned->field.release(&owned->field);
  delete owned;
  array->release = nullptr;
}

void FillArray(RecordBatchData batch, ArrowArray* out) {
  if (batch.offsets.empty()) batch.offsets.push_back(0);
  const int64_t length = static_cast<int64_t>(batch.offsets.size()) - 1;
  auto field = std::make_unique<FieldArrayPrivate>();
  field->owner = std::move(batch.owner);
  field->offsets = std::move(batch.offsets);
  field->buffers[0] = nullptr;
  field->buffers[1] = field->offsets.data();
  field->buffers[2] = batch.data != nullptr ? batch.data : kNoData;
  auto owned = std::make_unique<BatchArrayPrivate>();
  owned->field = ArrowArray{length, 0, 0, 3, 0, field->buffers, nullptr, nullptr,
                            &ReleaseFieldArray, field.get()};
  owned->children[0] = &owned->field;
  field.release();
  *out = ArrowArray{length, 0, 0, 1, 1, owned->buffers, owned->children,
                    nullptr, &ReleaseBatchArray, owned.get()};
  owned.release();
}

// --- The stream ----------------------------------------------------------------

struct StreamPrivate {
  std::unique_ptr<RecordBatchSource> source;
  std::string last_error;
  int failed = 0;  // the errno every call returns once the source failed
};

StreamPrivate& PrivateOf(ArrowArrayStream* stream) {
  return *static_cast<StreamPrivate*>(stream->private_data);
}

// Records the exception being handled as the stream's error; its errno.
int Fail(StreamPrivate& stream) {
  try {
    throw;
  } catch (const Error& e) {
    // OS errors leave the file to the path field: the message names it.
    const std::string what = e.what();
    stream.last_error = e.path().empty() || what.find(e.path()) != std::string::npos
                            ? what
                            : e.path() + ": " + what;
    // Bad data and bad requests are EINVAL, which pyarrow raises as
    // ArrowInvalid, a ValueError as sackli.CorruptionError is; only the
    // I/O kinds are EIO (an OSError).
    stream.failed = e.kind() == ErrorKind::kIo || e.kind() == ErrorKind::kNotFound
                        ? EIO
                        : EINVAL;
  } catch (const std::bad_alloc&) {
    stream.last_error = "out of memory reading records";
    stream.failed = ENOMEM;
  } catch (const std::exception& e) {
    stream.last_error = e.what();
    stream.failed = EIO;
  } catch (...) {
    stream.last_error = "unknown error reading records";
    stream.failed = EIO;
  }
  return stream.failed;
}

int GetSchema(ArrowArrayStream* stream, ArrowSchema* out) {
  try {
    FillSchema(out);
    return 0;
  } catch (const std::bad_alloc&) {
    PrivateOf(stream).last_error = "out of memory exporting the schema";
    return ENOMEM;
  }
}

int GetNext(ArrowArrayStream* stream, ArrowArray* out) {
  StreamPrivate& owned = PrivateOf(stream);
  if (owned.failed != 0) return owned.failed;
  try {
    RecordBatchData batch;
    if (!owned.source->Next(batch)) {
      out->release = nullptr;  // the end of the stream
      return 0;
    }
    FillArray(std::move(batch), out);
    return 0;
  } catch (...) {
    return Fail(owned);
  }
}

const char* GetLastError(ArrowArrayStream* stream) {
  const StreamPrivate& owned = PrivateOf(stream);
  return owned.last_error.empty() ? nullptr : owned.last_error.c_str();
}

void ReleaseStream(ArrowArrayStream* stream) {
  delete static_cast<StreamPrivate*>(stream->private_data);
  stream->release = nullptr;
}

// --- Batches of a bag ------------------------------------------------------------

// A batch holds at most this many records, however small they are.
constexpr uint64_t kMaxBatchRecords = uint64_t{1} << 20;

class BagSource : public RecordBatchSource {
 public:
  BagSource(std::shared_ptr<const Bag> bag, View view, uint64_t batch_bytes)
      : bag_(std::move(bag)), view_(view) {
    const uint64_t records = std::max<uint64_t>(bag_->size(), 1);
    const uint64_t average = std::max<uint64_t>(bag_->records_bytes() / records, 1);
    per_batch_ = std::clamp<uint64_t>(batch_bytes / average, 1, kMaxBatchRecords);
  }

  bool Next(RecordBatchData& batch) override {
    if (next_ >= view_.length) return false;
    const uint64_t first = next_;
    const uint64_t count = BatchLength(first);
    next_ += count;
    if (Mappable(first, count)) {
      std::vector<uint64_t> offsets;
      const char* data = nullptr;
      if (MappedRun(*bag_, view_.Global(first), count, &data, offsets)) {
        batch.owner = bag_;  // the mapping lives as long as the bag
        batch.data = data;
        batch.offsets.assign(offsets.begin(), offsets.end());
        return true;
      }
    }
    std::shared_ptr<PendingRead> pending =
        ahead_ && ahead_first_ == first ? std::move(ahead_) : StartRead(first, count);
    ahead_.reset();
    // The next batch is read while the consumer works on this one.
    if (next_ < view_.length) {
      const uint64_t next_count = BatchLength(next_);
      if (!Mappable(next_, next_count)) {
        ahead_ = StartRead(next_, next_count);
        ahead_first_ = next_;
      }
    }
    while (!pending->WaitFor(1000)) {
    }
    const DecodedRecords& records = pending->Result();  // throws its error
    batch.data = records.data.data();
    batch.offsets.assign(records.offsets.begin(), records.offsets.end());
    batch.owner = std::move(pending);  // owns `records`
    return true;
  }

 private:
  // How many records the batch at view index `first` holds: the same answer
  // for the same `first`, so a read ahead is found again.
  uint64_t BatchLength(uint64_t first) const {
    uint64_t count = std::min(per_batch_, view_.length - first);
    if (view_.step == 1 && bag_->options().layout == ShardingLayout::kConcatenated) {
      // Stop at the end of the shard, so mapped runs stay whole.
      const Bag::Location head = bag_->Locate(view_.Global(first));
      count = std::min(count, bag_->shard(head.shard).num_records() - head.local);
    }
    return count;
  }

  // Whether MappedRun can lend the batch: neighbours in one mapped shard that
  // stores records raw (decided without reading any limits).
  bool Mappable(uint64_t first, uint64_t count) const {
    if (view_.step != 1) return false;
    const Bag::Location head = bag_->Locate(view_.Global(first));
    const Bag::Location tail = bag_->Locate(view_.Global(first + count - 1));
    const Shard& shard = bag_->shard(head.shard);
    return head.shard == tail.shard && tail.local - head.local == count - 1 &&
           shard.records().mapped() != nullptr && !shard.codec().compressed();
  }

  std::shared_ptr<PendingRead> StartRead(uint64_t first, uint64_t count) const {
    std::vector<uint64_t> indices(static_cast<size_t>(count));
    for (uint64_t k = 0; k < count; ++k) indices[k] = view_.Global(first + k);
    return PendingRead::Start(bag_, std::move(indices));
  }

  const std::shared_ptr<const Bag> bag_;
  const View view_;
  uint64_t per_batch_ = 1;
  uint64_t next_ = 0;  // view index of the next batch
  std::shared_ptr<PendingRead> ahead_;
  uint64_t ahead_first_ = 0;
};

}  // namespace

void ExportRecordStream(std::unique_ptr<RecordBatchSource> source,
                        ArrowArrayStream* out) {
  auto* owned = new StreamPrivate();
  owned->source = std::move(source);
  *out = ArrowArrayStream{&GetSchema, &GetNext, &GetLastError, &ReleaseStream, owned};
}

std::unique_ptr<RecordBatchSource> BagBatchSource(std::shared_ptr<const Bag> bag,
                                                  View view, uint64_t batch_bytes) {
  return std::make_unique<BagSource>(std::move(bag), view, batch_bytes);
}

}  // namespace sackli
