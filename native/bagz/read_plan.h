// Reading records: one at a time, or in batches that are planned first and
// then decoded in parallel straight into buffers the caller allocates.
//
// A batch is read in two steps so that the caller (the Python bindings) can
// allocate the output objects between them, holding the GIL only for that:
//   1. ReadPlan(): maps indices to shards, sorts them, fetches the limits of
//      each run of neighbouring records at once (for remote shards read
//      lazily, every missing limits page first, in few parallel requests), reads the bytes of sources
//      that are not memory-mapped (neighbouring records coalesced into one
//      read as bagz/coalescing.h says), and learns each record's decoded
//      size. Local sources read their runs on up to max_parallelism pool
//      threads; a remote source (ByteSource::remote) gets all its runs, and
//      all its missing limits pages, in one ReadMany each, the sources side
//      by side on up to remote_parallelism threads.
//   2. Fill(): copies or decompresses every record into its buffer, on the
//      shared thread pool.
// Any failing record raises (the first one, by position); no record is ever
// returned empty or wrong because a neighbour failed.
//
// Repeated indices: a plan decodes each distinct record once, whatever path
// reads it. It keeps one position per request entry and says which position
// repeats which (FirstPosition): Fill() decodes a record into the buffer of
// its first position and copies it into the buffer of every repeat that has
// its own (packed buffers need one span per position); a caller whose output
// objects may be shared (immutable Python `bytes`) passes nullptr for the
// repeats and shares the first position's object instead.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bagz/bag.h"
#include "bagz/coalescing.h"
#include "bagz/view.h"

namespace sackli {

// One record, located and fetched but not yet decoded.
struct StoredRecord {
  const Shard* shard = nullptr;
  uint64_t local = 0;
  uint64_t begin = 0;             // offset of its stored bytes
  const char* stored = nullptr;   // its stored bytes
  size_t length = 0;              // stored length
  uint64_t decoded_size = 0;
  std::string scratch;            // holds the bytes of unmapped sources
  std::string unsized;            // decoded frame that had no size
  bool decoded_early = false;     // true: `unsized` holds the record
};

// Locates global record g and fetches its stored bytes (I/O only for sources
// that are not memory-mapped), learning its decoded size.
void LocateStored(const Bag& bag, uint64_t g, StoredRecord& record);

// Decodes a located record into dst (record.decoded_size bytes).
void DecodeStored(const StoredRecord& record, char* dst);

// Reads global record g into `out`.
void ReadOneInto(const Bag& bag, uint64_t g, std::string& out);

class ReadPlan {
 public:
  // Step 1 for records `indices[0, n)` (global indices, any order, duplicates
  // allowed). Throws kOutOfRange for an index past the end.
  ReadPlan(std::shared_ptr<const Bag> bag, const uint64_t* indices, size_t n);

  // Positions of the request (n), repeats included.
  size_t size() const { return positions_; }
  // Distinct records, each decoded once.
  size_t num_distinct() const { return entries_.size(); }
  bool has_repeats() const { return !entry_of_.empty(); }
  // The lowest position asking for the same record as position k (k itself
  // when no earlier position does).
  size_t FirstPosition(size_t k) const {
    return entry_of_.empty() ? k : first_position_[entry_of_[k]];
  }
  uint64_t decoded_size(size_t k) const {
    return entries_[EntryOf(k)].decoded_size;
  }
  // Decoded bytes of every position (repeats counted each time).
  uint64_t total_decoded_bytes() const { return total_decoded_bytes_; }

  // Step 2: decodes the record of position k into dst[k], which holds
  // decoded_size(k) bytes. For a repeat (FirstPosition(k) != k) dst[k] may be
  // nullptr or dst[FirstPosition(k)] (nothing written) or a buffer of its own
  // (the record is copied there); first positions need a buffer.
  void Fill(char* const* dst) const;

  // Decodes the record of position k into dst (decoded_size(k) bytes).
  void DecodeOne(size_t k, char* dst) const { DecodeEntry(EntryOf(k), dst); }

 private:
  struct Entry {
    uint32_t shard;
    uint64_t local;
    uint64_t begin;  // stored bytes within the records section
    uint64_t end;
    const char* stored = nullptr;  // the stored bytes, in a mapping or buffer
    uint64_t decoded_size = 0;
    int64_t unsized = -1;  // index into unsized_ for frames without a size
  };
  void PrefetchStored(size_t i) const;
  size_t EntryOf(size_t k) const { return entry_of_.empty() ? k : entry_of_[k]; }
  size_t PositionOfEntry(size_t e) const {
    return first_position_.empty() ? e : first_position_[e];
  }
  void DecodeEntry(size_t e, char* dst) const;
  void CopyRepeats(char* const* dst) const;
  void SumDecodedSizes();
  void LocateAndSort(const uint64_t* indices, size_t n,
                     std::vector<uint32_t>& order);
  void DropRepeats(const std::vector<uint32_t>& first_of,
                   std::vector<uint32_t>& order);
  // Fetches the limits pages of lazily read remote shards that the spans
  // need, in few parallel requests, before ResolveSpans reads them.
  void PrefetchLimits(const std::vector<uint32_t>& order);
  void ResolveSpans(const std::vector<uint32_t>& order);
  void FetchStoredBytes(const std::vector<uint32_t>& order);
  // One read of stored bytes: records order[first .. last] of one shard.
  struct ByteRun {
    uint32_t shard;
    CoalescedRun bytes;
    size_t first, last;  // positions in `order`
  };
  // Appends to `reads` the runs [first, end) of one remote shard, joined
  // across gaps within the batch's waste budget (coalescing.h: BridgeGaps).
  void AppendBridged(const std::vector<ByteRun>& runs, size_t first, size_t end,
                     std::vector<ByteRun>& reads) const;
  void ResolveDecodedSizes();

  std::shared_ptr<const Bag> bag_;
  size_t positions_ = 0;
  std::vector<Entry> entries_;  // distinct records, by first position
  // Only when some index repeats: each position's entry, each entry's first
  // position.
  std::vector<uint32_t> entry_of_;
  std::vector<uint32_t> first_position_;
  uint64_t distinct_decoded_bytes_ = 0;
  std::vector<std::string> buffers_;  // coalesced reads of unmapped sources
  std::vector<std::string> unsized_;  // frames decoded in step 1
  uint64_t total_decoded_bytes_ = 0;
};

// plan.FirstPosition(k) for every position; empty when no index repeats.
std::vector<uint32_t> FirstPositions(const ReadPlan& plan);

// Reads records `indices[0, n)` in chunks of bounded size. For each chunk,
// `allocate(first, plan, dst)` must point dst[k] at plan.decoded_size(k)
// bytes for record first + k; `checkpoint()` runs between chunks (the
// bindings use it to notice Ctrl-C) and may throw to stop.
using AllocateFn =
    std::function<void(size_t first, const ReadPlan& plan, char** dst)>;
void ReadBatch(const std::shared_ptr<const Bag>& bag, const uint64_t* indices,
               size_t n, const AllocateFn& allocate,
               const std::function<void()>& checkpoint);

// How many records of a bag one chunk of a batch holds: about 64 MiB of
// stored bytes, between 64 and 65,536 records.
size_t RecordsPerChunk(const Bag& bag);

// Work running on the shared thread pool, waited for with a timeout (so the
// bindings can notice Ctrl-C while they wait).
class BackgroundTask {
 public:
  // Runs `work` on a pool thread; `work` may itself use ParallelFor with
  // `parallelism` threads. Whatever `work` touches must outlive it: own it in
  // the closure, or wait before releasing it.
  static std::shared_ptr<BackgroundTask> Start(std::function<void()> work,
                                               size_t parallelism);
  // Waits up to `milliseconds`; true when finished.
  bool WaitFor(int64_t milliseconds);
  // After WaitFor() returned true: rethrows the exception `work` ended with.
  void RethrowIfFailed() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

// Records decoded by a background task into one buffer: record k is
// data[offsets[k], offsets[k + 1]). Every position has its own span (a
// repeated record is copied), so offsets never decrease.
struct DecodedRecords {
  std::string data;
  std::vector<uint64_t> offsets;
  // first_position[k]: the position whose record position k repeats (k when
  // none); empty when no index repeats.
  std::vector<uint32_t> first_position;
};

// A batch read running on the thread pool. Dropping it without waiting is
// safe: the task owns everything it touches.
class PendingRead {
 public:
  // The decoded records follow `prefix` in the result's buffer (offsets count
  // from the start of the buffer, so offsets[0] == prefix.size()).
  static std::shared_ptr<PendingRead> Start(std::shared_ptr<const Bag> bag,
                                            std::vector<uint64_t> indices,
                                            std::string prefix = {});
  // Waits up to `milliseconds`; true when finished.
  bool WaitFor(int64_t milliseconds) { return task_->WaitFor(milliseconds); }
  // After WaitFor() returned true: the records, or the task's error thrown.
  const DecodedRecords& Result() const;

 private:
  std::shared_ptr<BackgroundTask> task_;
  std::shared_ptr<DecodedRecords> records_;
};

// Records [first, first + count) (global indices) as they lie in a memory
// mapping, without a copy: possible when they are neighbours in one mapped
// shard that stores records uncompressed. Then record k is
// data[offsets[k], offsets[k + 1]) and the call returns true; otherwise it
// returns false and reads nothing. The data lives as long as the bag.
bool MappedRun(const Bag& bag, uint64_t first, uint64_t count,
               const char** data, std::vector<uint64_t>& offsets);

// Visits view indices [from, to) a chunk at a time: each chunk's records are
// decoded (in parallel) and handed to visit(first, count, data, sizes), view
// index first + k at data[k] (sizes[k] bytes, valid during the call only);
// `visit` returns false to stop.
void VisitChunks(const std::shared_ptr<const Bag>& bag, const View& view,
                 uint64_t from, uint64_t to,
                 const std::function<bool(uint64_t first, size_t count,
                                          const char* const* data,
                                          const uint64_t* sizes)>& visit,
                 const std::function<void()>& checkpoint);

// Visits view indices [from, to) in order, a chunk at a time: records whose
// decoded size passes `want(size)` are decoded (in parallel) and handed to
// `visit(j, data, size)` in order; `visit` returns false to stop.
void VisitRecords(const std::shared_ptr<const Bag>& bag, const View& view,
                  uint64_t from, uint64_t to,
                  const std::function<bool(uint64_t size)>& want,
                  const std::function<bool(uint64_t j, const char* data,
                                           uint64_t size)>& visit,
                  const std::function<void()>& checkpoint);

}  // namespace sackli
