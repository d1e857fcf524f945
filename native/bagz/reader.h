// The engine's reader: an opened bag seen through a view. A Reader is an
// immutable value (a shared `const Bag` and a View): copying, slicing and
// sharing it between threads is cheap and safe, and every read below may run
// concurrently with any other on the same or another Reader.
//
// Reads take an allocator: the caller (the Python bindings) allocates the
// output objects, and the engine decodes straight into them.
//
// Indices: `index` arguments are Python-style view indices (negative counts
// from the end); batch reads take *global* indices, as GlobalIndex() and
// RangeGlobals() produce them. Each read plans first (see read_plan.h): a
// request that repeats an index decodes that record once, and says which
// position repeats which.
//
// Failures (engine `Error` kinds, see errors.h):
//   kOutOfRange       an index or range outside the view, with the numbers:
//                     "index 12 out of range for a reader of 10 records",
//                     "range [5, 12) out of range for a reader of 10 records"
//   kInvalidArgument  a view that does not fit the bag (Reader(bag, view))
//   kCorruption       a bad record or limit, naming the file and byte offset
//   kIo, kNotFound    the byte source failed
// The first failing record of a batch, by position, raises; no record is
// ever returned empty or wrong because a neighbour failed.
//
// Example: a bag of 10 records, `Reader r(bag)`; r.Slice(8, -2, 5) holds
// global records 8, 6, 4, 2, 0; its GlobalIndex(-1) is 0; its
// RangeGlobals(1, 2) is {6, 4}; its RangeGlobals(4, 2) throws "range [4, 6)
// out of range for a reader of 5 records".
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "bagz/bag.h"
#include "bagz/read_plan.h"
#include "bagz/view.h"

namespace sackli {

class Reader {
 public:
  // Every record of `bag`.
  explicit Reader(std::shared_ptr<const Bag> bag);
  // `view` over `bag`; kInvalidArgument when the view reaches past the bag
  // (a view saved from a bag that has since changed).
  Reader(std::shared_ptr<const Bag> bag, const View& view);

  const std::shared_ptr<const Bag>& bag() const { return bag_; }
  const View& view() const { return view_; }
  uint64_t size() const { return view_.length; }

  // The reader of view indices start, start + step, ... (`length` of them),
  // as Python's slice.indices() computes them.
  Reader Slice(int64_t start, int64_t step, uint64_t length) const;

  // The global index of view index `index` (negative from the end).
  uint64_t GlobalIndex(int64_t index) const;
  // The global indices of view indices [start, start + count).
  std::vector<uint64_t> RangeGlobals(int64_t start, int64_t count) const;
  // Every global index of the view, in view order.
  std::vector<uint64_t> AllGlobals() const;

  // --- One record: Locate (I/O only for sources that are not memory-mapped,
  // see LocateNeedsIo) then DecodeStored (read_plan.h) into a buffer of
  // record.decoded_size bytes. Get does both.
  bool LocateNeedsIo() const { return !bag_->all_mapped(); }
  void Locate(int64_t index, StoredRecord& record) const;
  // The record at `index`, decoded into allocate(decoded size).
  void Get(int64_t index,
           const std::function<char*(uint64_t size)>& allocate) const;

  // --- Batches of records, each position decoded into a caller's buffer.
  // allocate(positions, plan, dst): for k < plan.size() with
  // plan.FirstPosition(k) == k, point dst[k] at plan.decoded_size(k) bytes
  // for output position positions[k]; a repeat's dst[k] may stay nullptr
  // (its output is the first position's) or get a buffer (the record is
  // copied into it). The call returns, for each position, the first position
  // holding the same record (empty when no index repeats): the caller shares
  // or copies that position's output. A record is decoded once however often
  // the request repeats it, also across the several plans of a large request;
  // `checkpoint()` runs between plans and may throw to stop.
  using PlacedAllocateFn = std::function<void(
      const size_t* positions, const ReadPlan& plan, char** dst)>;
  std::vector<size_t> ReadGlobals(const std::vector<uint64_t>& globals,
                                  const PlacedAllocateFn& allocate,
                                  const std::function<void()>& checkpoint) const;

  // Starts reading `globals` on the thread pool into one buffer, after
  // `prefix` (see PendingRead). Repeats are copied: each position has a span.
  std::shared_ptr<PendingRead> StartRead(std::vector<uint64_t> globals,
                                         std::string prefix = {}) const;

  // View records [start, start + count) as they lie in a memory mapping,
  // without a copy (see MappedRun in read_plan.h): nullopt unless the view
  // steps by 1, the range is non-empty and inside the view, and MappedRun
  // can serve it. The data lives as long as the bag.
  struct Run {
    const char* data;
    std::vector<uint64_t> offsets;  // record k is data[offsets[k], offsets[k + 1])
  };
  std::optional<Run> MappedRun(uint64_t start, uint64_t count) const;

  // The first view index in [start, stop) whose record equals `value`, or -1;
  // start and stop are clamped as Python's list.index does (negative from
  // the end; no stop: the end of the view).
  int64_t Find(std::string_view value, int64_t start, std::optional<int64_t> stop,
               const std::function<void()>& checkpoint) const;
  // How many records of the view equal `value`.
  int64_t Count(std::string_view value,
                const std::function<void()>& checkpoint) const;

  // Stored (compressed) bytes per record over the whole bag; 0 when empty.
  double ApproximateBytesPerRecord() const;

 private:
  int64_t Scan(std::string_view value, uint64_t from, uint64_t to,
               bool count_all, const std::function<void()>& checkpoint) const;

  std::shared_ptr<const Bag> bag_;
  View view_;
};

// Records read ahead for an iterator, started now and taken later.
// Memory-mapped bags need no I/O to plan: the plan is made at Start, which
// calls allocate(plan, dst) on the calling thread (dst[k] for every position k
// with plan.FirstPosition(k) == k; repeats may stay nullptr and share) and
// decodes into those buffers on the pool. Other bags plan and decode into
// one buffer on the pool (buffered()); the caller copies records out.
// The owner of the allocated buffers must wait for WaitFor() to return true
// before freeing them.
class ReadAhead {
 public:
  using AllocateFn = std::function<void(const ReadPlan& plan, char** dst)>;
  static ReadAhead Start(const Reader& reader, std::vector<uint64_t> globals,
                         const AllocateFn& allocate);

  // Waits up to `milliseconds`; true when finished (at once if planning
  // failed).
  bool WaitFor(int64_t milliseconds);
  // After WaitFor() returned true: throws what planning or reading threw.
  void RethrowIfFailed() const;
  // Unmapped bags, after RethrowIfFailed(): the decoded records. nullptr for
  // mapped bags, whose records are in the allocated buffers.
  const DecodedRecords* buffered() const;

 private:
  std::shared_ptr<PendingRead> read_;     // unmapped bags
  std::shared_ptr<BackgroundTask> fill_;  // mapped bags
  std::exception_ptr error_;              // planning failed
};

// Offsets of records [first, first + count) of one shard in its records
// section: count + 1 values, the begin of record `first`, then each record's
// end (validated). kOutOfRange for a shard or records outside the bag.
std::vector<uint64_t> ShardRecordOffsets(const Bag& bag, size_t shard,
                                         uint64_t first, uint64_t count);

}  // namespace sackli
