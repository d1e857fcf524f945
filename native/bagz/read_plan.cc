#include "bagz/read_plan.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <mutex>
#include <new>
#include <numeric>
#include <utility>

#include "bagz/coalescing.h"
#include "bagz/errors.h"
#include "bagz/fault_guard.h"
#include "bagz/prefetch.h"
#include "bagz/stable_order.h"
#include "bagz/thread_pool.h"

namespace sackli {
namespace {

// Records decoded this far ahead have the first bytes of their stored form
// fetched (see PrefetchStored).
constexpr size_t kPrefetchAheadEntries = 2;
// Checked records are read whole, and early (by their check): further ahead.
constexpr size_t kPrefetchAheadChecked = 6;
constexpr uint64_t kPrefetchHeadBytes = 512;
constexpr uint64_t kPrefetchCheckedBytes = 4096;

// Below these amounts of work a batch runs on the calling thread alone: waking
// helpers would cost more than it saves.
constexpr uint64_t kParallelCopyBytes = 1024 * 1024;
constexpr uint64_t kParallelDecodeBytes = 64 * 1024;
constexpr size_t kParallelPlanRecords = 4096;
// A scan's records are decoded in blocks of up to this many (see DecodeChunks).
constexpr size_t kDecodeBlockRecords = 64;

// Splits [0, n) into at most `parts` contiguous blocks and runs fn on each.
void ForBlocks(size_t n, size_t parts, size_t parallelism,
               const std::function<void(size_t begin, size_t end)>& fn) {
  parts = std::max<size_t>(1, std::min(parts, n));
  if (n == 0) return;
  ThreadPool::Shared().ParallelFor(parts, parallelism, [&](size_t p) {
    fn(n * p / parts, n * (p + 1) / parts);
  });
}

// The decoded size of a compressed record from its frame header, within the
// shard's max_record_bytes, or Codec::kUnknownSize.
uint64_t DecodedSizeOf(const Shard& shard, uint64_t local, uint64_t begin,
                       const char* stored, uint64_t length) {
  uint64_t size;
  try {
    size = shard.codec().DecodedSize(stored, length);
  } catch (const CodecError& e) {
    shard.ThrowBadRecord(local, begin, e.what());
  }
  if (size != Codec::kUnknownSize) shard.CheckDecodedSize(local, begin, size);
  return size;
}

}  // namespace


// Every pointer to stored bytes is made here or in FetchStoredBytes, from an
// extent that Shard::Limits validated (begin <= end <= end of the records
// section, which lies inside the file): mapped bytes are never read past the
// file, buffered ones never past their buffer. Reads of mapped bytes run in a
// FaultScope, so a file that shrinks meanwhile raises instead of crashing.
void LocateStored(const Bag& bag, uint64_t g, StoredRecord& record) {
  const Bag::Location loc = bag.Locate(g);
  const Shard& shard = bag.shard(loc.shard);
  uint64_t end;
  shard.Span(loc.local, &record.begin, &end);
  record.shard = &shard;
  record.local = loc.local;
  record.length = static_cast<size_t>(end - record.begin);
  const bool compressed = shard.codec().compressed();
  // A raw record is as long as it is stored: refused before it is read.
  if (!compressed) shard.CheckDecodedSize(loc.local, record.begin, record.length);
  const ByteSource& source = shard.records();
  if (const char* base = source.mapped()) {
    record.stored = base + record.begin;
    if (const RecordChecksums* checks = shard.checksums()) {
      // Loaded while the caller allocates the record's buffer.
      PrefetchBytes(record.stored, static_cast<size_t>(
                                       std::min<uint64_t>(record.length, kPrefetchCheckedBytes)));
      checks->Prefetch(loc.local);
    }
  } else {
    record.scratch.resize(record.length);
    source.Read(record.begin, record.length, record.scratch.data());
    record.stored = record.scratch.data();
  }
  if (!compressed) {
    record.decoded_size = record.length;  // nothing to read to know it
    return;
  }
  Guarded(source, [&] {
    record.decoded_size = DecodedSizeOf(shard, loc.local, record.begin,
                                        record.stored, record.length);
    if (record.decoded_size != Codec::kUnknownSize) return;
    record.unsized = shard.DecodeUnsized(loc.local, record.begin,
                                         record.stored, record.length);
    record.decoded_size = record.unsized.size();
    record.decoded_early = true;
  });
}

void DecodeStored(const StoredRecord& record, char* dst) {
  if (record.decoded_early) {
    std::copy(record.unsized.begin(), record.unsized.end(), dst);
    return;
  }
  const Shard& shard = *record.shard;
  Guarded(shard.records(), [&] {
    if (!shard.codec().compressed()) {
      shard.CopyChecked(record.local, record.begin, record.stored, record.length, dst);
      return;
    }
    try {
      shard.codec().Decode(record.stored, record.length, dst,
                           static_cast<size_t>(record.decoded_size));
    } catch (const CodecError& e) {
      shard.ThrowBadRecord(record.local, record.begin, e.what());
    }
  });
}

void ReadOneInto(const Bag& bag, uint64_t g, std::string& out) {
  StoredRecord record;
  LocateStored(bag, g, record);
  try {
    out.resize(static_cast<size_t>(record.decoded_size));
  } catch (const std::bad_alloc&) {
    record.shard->ThrowOutOfMemory(
        record.local, record.begin,
        "allocating " + std::to_string(record.decoded_size) + " bytes");
  }
  DecodeStored(record, out.data());
}

ReadPlan::ReadPlan(std::shared_ptr<const Bag> bag, const uint64_t* indices,
                   size_t n)
    : bag_(std::move(bag)) {
  std::vector<uint32_t> order;
  LocateAndSort(indices, n, order);
  PrefetchLimits(order);
  ResolveSpans(order);
  FetchStoredBytes(order);
  ResolveDecodedSizes();
}

void ReadPlan::LocateAndSort(const uint64_t* indices, size_t n,
                             std::vector<uint32_t>& order) {
  positions_ = n;
  entries_.resize(n);
  bool sorted = true;
  bool repeats = false;
  for (size_t i = 0; i < n; ++i) {
    const Bag::Location loc = bag_->Locate(indices[i]);
    entries_[i].shard = loc.shard;
    entries_[i].local = loc.local;
    if (i > 0 && sorted) {
      const Entry& p = entries_[i - 1];
      sorted = p.shard < loc.shard ||
               (p.shard == loc.shard && p.local <= loc.local);
      repeats = repeats || (p.shard == loc.shard && p.local == loc.local);
    }
  }
  if (sorted) {
    order.resize(n);
    std::iota(order.begin(), order.end(), 0);
  } else {
    // By (shard, local), ties by position: the first of a group of repeats
    // has the lowest. Keys pack the shard above the bits of the largest local.
    uint64_t largest_local = 0;
    uint32_t largest_shard = 0;
    for (const Entry& e : entries_) {
      largest_local = std::max(largest_local, e.local);
      largest_shard = std::max(largest_shard, e.shard);
    }
    int local_bits = 0;
    while (local_bits < 64 && (largest_local >> local_bits) != 0) ++local_bits;
    int shard_bits = 0;
    while (shard_bits < 32 && (largest_shard >> shard_bits) != 0) ++shard_bits;
    if (local_bits + shard_bits <= 64) {
      std::vector<uint64_t> keys(n);
      for (size_t i = 0; i < n; ++i) {
        const uint64_t shard = entries_[i].shard;
        keys[i] = (local_bits == 64 ? 0 : shard << local_bits) | entries_[i].local;
      }
      StableOrder(keys, order);
    } else {  // more bits than a key holds: compare the entries
      order.resize(n);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [this](uint32_t a, uint32_t b) {
        const Entry& x = entries_[a];
        const Entry& y = entries_[b];
        return x.shard != y.shard ? x.shard < y.shard : x.local < y.local;
      });
    }
    repeats = true;  // not known yet: looked for below
  }
  if (!repeats) return;
  // Repeats are neighbours in `order`.
  std::vector<uint32_t> first_of(n);
  bool found = false;
  for (size_t k = 0; k < n; ++k) {
    const uint32_t p = order[k];
    first_of[p] = p;
    if (k == 0) continue;
    const Entry& prev = entries_[order[k - 1]];
    if (prev.shard == entries_[p].shard && prev.local == entries_[p].local) {
      first_of[p] = first_of[order[k - 1]];
      found = true;
    }
  }
  if (found) DropRepeats(first_of, order);
}

void ReadPlan::DropRepeats(const std::vector<uint32_t>& first_of,
                           std::vector<uint32_t>& order) {
  const size_t n = entries_.size();
  std::vector<Entry> distinct;
  entry_of_.resize(n);
  for (size_t p = 0; p < n; ++p) {
    if (first_of[p] == p) {
      entry_of_[p] = static_cast<uint32_t>(distinct.size());
      first_position_.push_back(static_cast<uint32_t>(p));
      distinct.push_back(entries_[p]);
    } else {
      entry_of_[p] = entry_of_[first_of[p]];  // first_of[p] < p: assigned
    }
  }
  // `order` over the distinct entries, still sorted.
  size_t kept = 0;
  for (const uint32_t p : order) {
    if (first_of[p] == p) order[kept++] = entry_of_[p];
  }
  order.resize(kept);
  entries_ = std::move(distinct);
}

void ReadPlan::PrefetchLimits(const std::vector<uint32_t>& order) {
  // `order` is sorted by shard, then local index: one call per shard. Only
  // remote shards fetch limits lazily, so shards go side by side, sized for
  // the store (each call hands its pages to its source in one batch).
  struct ShardLocals {
    uint32_t shard;
    std::vector<uint64_t> locals;
  };
  std::vector<ShardLocals> wanted;
  for (size_t k = 0; k < order.size();) {
    const uint32_t s = entries_[order[k]].shard;
    const bool lazily = bag_->shard(s).limits_fetched_lazily();
    if (lazily) wanted.push_back(ShardLocals{s, {}});
    for (; k < order.size() && entries_[order[k]].shard == s; ++k) {
      if (lazily) wanted.back().locals.push_back(entries_[order[k]].local);
    }
  }
  ThreadPool::Shared().ParallelFor(
      wanted.size(), bag_->options().remote_parallelism, [&](size_t i) {
        const ShardLocals& w = wanted[i];
        bag_->shard(w.shard).PrefetchLimits(w.locals.data(), w.locals.size(),
                                            bag_->options().max_parallelism);
      });
}

void ReadPlan::ResolveSpans(const std::vector<uint32_t>& order) {
  // Runs of neighbouring (or repeated) records of one shard share one read of
  // their limits.
  std::vector<size_t> run_starts;
  for (size_t k = 0; k < order.size(); ++k) {
    if (k == 0) {
      run_starts.push_back(0);
      continue;
    }
    const Entry& p = entries_[order[k - 1]];
    const Entry& e = entries_[order[k]];
    if (e.shard != p.shard || e.local > p.local + 1) run_starts.push_back(k);
  }
  run_starts.push_back(order.size());
  const size_t runs = run_starts.size() - 1;
  const size_t parallelism =
      order.size() >= kParallelPlanRecords ? bag_->options().max_parallelism : 1;
  ForBlocks(runs, parallelism * 4, parallelism, [&](size_t r0, size_t r1) {
    std::vector<uint64_t> ends;
    for (size_t r = r0; r < r1; ++r) {
      const Entry& head = entries_[order[run_starts[r]]];
      const Entry& tail = entries_[order[run_starts[r + 1] - 1]];
      const uint64_t first = head.local;
      const uint64_t count = tail.local - first + 1;
      ends.resize(count);
      uint64_t begin;
      bag_->shard(head.shard).Limits(first, count, &begin, ends.data());
      for (size_t k = run_starts[r]; k < run_starts[r + 1]; ++k) {
        Entry& e = entries_[order[k]];
        const uint64_t at = e.local - first;
        e.begin = at == 0 ? begin : ends[at - 1];
        e.end = ends[at];
      }
    }
  });
}

void ReadPlan::AppendBridged(const std::vector<ByteRun>& runs, size_t first,
                             size_t end, std::vector<ByteRun>& reads) const {
  std::vector<CoalescedRun> bytes;
  bytes.reserve(end - first);
  for (size_t k = first; k < end; ++k) bytes.push_back(runs[k].bytes);
  const std::vector<size_t> starts = BridgeGaps(
      bytes, bag_->shard(runs[first].shard).records().coalesce_gap_bytes());
  for (size_t s = 0; s < starts.size(); ++s) {
    const size_t a = first + starts[s];
    const size_t b = s + 1 < starts.size() ? first + starts[s + 1] : end;
    ByteRun read = runs[a];
    for (size_t k = a + 1; k < b; ++k) {
      read.bytes.end = std::max(read.bytes.end, runs[k].bytes.end);
      read.bytes.asked += runs[k].bytes.asked;
      read.last = runs[k].last;
    }
    reads.push_back(read);
  }
}

void ReadPlan::FetchStoredBytes(const std::vector<uint32_t>& order) {
  std::vector<ByteRun> runs;
  bool any_remote = false;
  CoalescingRule rule;
  for (size_t k = 0; k < order.size(); ++k) {
    Entry& e = entries_[order[k]];
    const ByteSource& source = bag_->shard(e.shard).records();
    if (const char* base = source.mapped()) {
      e.stored = base + e.begin;
      continue;
    }
    // Records in index order start at non-decreasing offsets in a valid
    // bag, but each extent is validated alone: a record that starts before
    // the run (its neighbour's limit is corrupt) starts a run of its own.
    if (!runs.empty() && runs.back().shard == e.shard &&
        Coalesce(rule, runs.back().bytes, e.begin, e.end)) {
      runs.back().last = k;
      continue;
    }
    if (runs.empty() || runs.back().shard != e.shard) {
      rule = CoalescingRule::For(source);
      any_remote = any_remote || source.remote();
    }
    runs.push_back(ByteRun{e.shard, CoalescedRun{e.begin, e.end, e.end - e.begin}, k, k});
  }
  if (runs.empty()) return;
  const auto place = [&](size_t r) {
    const ByteRun& run = runs[r];
    for (size_t k = run.first; k <= run.last; ++k) {
      Entry& e = entries_[order[k]];
      if (e.begin < run.bytes.begin || e.end > run.bytes.end) {
        throw std::logic_error("sackli: a record outside its coalesced read");
      }
      e.stored = buffers_[r].data() + (e.begin - run.bytes.begin);
    }
  };
  const auto read_one = [&](size_t r) {
    const ByteRun& run = runs[r];
    std::string& buffer = buffers_[r];
    buffer.resize(static_cast<size_t>(run.bytes.end - run.bytes.begin));
    bag_->shard(run.shard).records().Read(run.bytes.begin, buffer.size(),
                                           buffer.data());
    place(r);
  };
  if (!any_remote) {
    buffers_.resize(runs.size());
    ThreadPool::Shared().ParallelFor(runs.size(), bag_->options().max_parallelism,
                                     read_one);
    return;
  }
  // Runs come grouped by shard. A remote shard's runs are joined across
  // gaps within the batch's waste budget (AppendBridged) and read with one
  // ReadMany (its client keeps them in flight at once), the sources side by
  // side; local runs on pool threads as above.
  std::vector<ByteRun> reads;
  std::vector<size_t> local;
  std::vector<std::pair<size_t, size_t>> remote;  // [first, end) of `reads`
  for (size_t r = 0; r < runs.size();) {
    size_t end = r + 1;
    while (end < runs.size() && runs[end].shard == runs[r].shard) ++end;
    const size_t from = reads.size();
    if (bag_->shard(runs[r].shard).records().remote()) {
      AppendBridged(runs, r, end, reads);
      remote.emplace_back(from, reads.size());
    } else {
      reads.insert(reads.end(), runs.begin() + r, runs.begin() + end);
      for (size_t k = from; k < reads.size(); ++k) local.push_back(k);
    }
    r = end;
  }
  runs = std::move(reads);
  buffers_.resize(runs.size());
  ThreadPool::Shared().ParallelFor(local.size(), bag_->options().max_parallelism,
                                   [&](size_t i) { read_one(local[i]); });
  ThreadPool::Shared().ParallelFor(
      remote.size(), bag_->options().remote_parallelism, [&](size_t g) {
        const auto [first, end] = remote[g];
        std::vector<ByteRange> ranges;
        ranges.reserve(end - first);
        for (size_t r = first; r < end; ++r) {
          const CoalescedRun& bytes = runs[r].bytes;
          buffers_[r].resize(static_cast<size_t>(bytes.end - bytes.begin));
          ranges.push_back(ByteRange{bytes.begin, buffers_[r].size(), buffers_[r].data()});
        }
        bag_->shard(runs[first].shard).records().ReadMany(ranges.data(), ranges.size());
        for (size_t r = first; r < end; ++r) place(r);
      });
}

void ReadPlan::ResolveDecodedSizes() {
  const size_t n = entries_.size();
  if (!bag_->any_compressed()) {
    for (Entry& e : entries_) {
      e.decoded_size = e.end - e.begin;
      bag_->shard(e.shard).CheckDecodedSize(e.local, e.begin, e.decoded_size);
    }
    SumDecodedSizes();
    return;
  }
  const size_t parallelism =
      n >= kParallelPlanRecords ? bag_->options().max_parallelism : 1;
  std::mutex unsized_mutex;
  ForBlocks(n, parallelism * 4, parallelism, [&](size_t i0, size_t i1) {
    for (size_t i = i0; i < i1; ++i) {
      Entry& e = entries_[i];
      const Shard& shard = bag_->shard(e.shard);
      const uint64_t length = e.end - e.begin;
      std::string decoded;
      const bool sized = Guarded(shard.records(), [&] {
        e.decoded_size =
            DecodedSizeOf(shard, e.local, e.begin, e.stored, length);
        if (e.decoded_size != Codec::kUnknownSize) return true;
        // Rare: a frame without its size is decoded now to learn it.
        decoded = shard.DecodeUnsized(e.local, e.begin, e.stored, length);
        return false;
      });
      if (sized) continue;
      e.decoded_size = decoded.size();
      std::lock_guard<std::mutex> lock(unsized_mutex);
      e.unsized = static_cast<int64_t>(unsized_.size());
      unsized_.push_back(std::move(decoded));
    }
  });
  SumDecodedSizes();
}

void ReadPlan::SumDecodedSizes() {
  for (const Entry& e : entries_) distinct_decoded_bytes_ += e.decoded_size;
  if (!has_repeats()) {
    total_decoded_bytes_ = distinct_decoded_bytes_;
    return;
  }
  for (size_t k = 0; k < positions_; ++k) total_decoded_bytes_ += decoded_size(k);
}

void ReadPlan::PrefetchStored(size_t i) const {
  const Entry& e = entries_[i];
  // The head of the record: a record read at random is a cache and TLB miss,
  // and the hardware prefetcher follows it once a few lines have missed.
  if (e.stored != nullptr) {
    // A checked record is read whole by its check, before the copy.
    const RecordChecksums* checks = bag_->shard(e.shard).checksums();
    const uint64_t ahead = checks != nullptr ? kPrefetchCheckedBytes : kPrefetchHeadBytes;
    PrefetchBytes(e.stored, static_cast<size_t>(std::min<uint64_t>(e.end - e.begin, ahead)));
    if (checks != nullptr) checks->Prefetch(e.local);
  }
}

void ReadPlan::DecodeEntry(size_t i, char* dst) const {
  const Entry& e = entries_[i];
  if (e.unsized >= 0) {
    const std::string& decoded = unsized_[static_cast<size_t>(e.unsized)];
    std::copy(decoded.begin(), decoded.end(), dst);
    return;
  }
  const Shard& shard = bag_->shard(e.shard);
  Guarded(shard.records(), [&] {
    if (!shard.codec().compressed()) {
      shard.CopyChecked(e.local, e.begin, e.stored, static_cast<size_t>(e.end - e.begin), dst);
      return;
    }
    try {
      shard.codec().Decode(e.stored, static_cast<size_t>(e.end - e.begin), dst,
                           static_cast<size_t>(e.decoded_size));
    } catch (const CodecError& error) {
      shard.ThrowBadRecord(e.local, e.begin, error.what());
    }
  });
}

void ReadPlan::Fill(char* const* dst) const {
  const size_t n = entries_.size();
  const size_t ahead = bag_->any_checked() ? kPrefetchAheadChecked : kPrefetchAheadEntries;
  const uint64_t threshold =
      bag_->any_compressed() ? kParallelDecodeBytes : kParallelCopyBytes;
  const size_t parallelism = distinct_decoded_bytes_ >= threshold && n > 1
                                 ? bag_->options().max_parallelism
                                 : 1;
  if (parallelism == 1) {
    for (size_t i = 0; i < n; ++i) {
      if (i + ahead < n) PrefetchStored(i + ahead);
      DecodeEntry(i, dst[PositionOfEntry(i)]);
    }
    CopyRepeats(dst);
    return;
  }
  // Blocks of about equal decoded bytes, several per thread so that a slow
  // block does not leave the others idle.
  const uint64_t per_block =
      std::max<uint64_t>(1, distinct_decoded_bytes_ / (parallelism * 8));
  std::vector<size_t> block_starts{0};
  uint64_t in_block = 0;
  for (size_t i = 0; i < n; ++i) {
    in_block += entries_[i].decoded_size + 64;
    if (in_block >= per_block && i + 1 < n) {
      block_starts.push_back(i + 1);
      in_block = 0;
    }
  }
  block_starts.push_back(n);
  std::vector<std::exception_ptr> errors(block_starts.size() - 1);
  ThreadPool::Shared().ParallelFor(
      block_starts.size() - 1, parallelism, [&](size_t b) {
        try {
          const size_t end = block_starts[b + 1];
          for (size_t i = block_starts[b]; i < end; ++i) {
            if (i + ahead < end) PrefetchStored(i + ahead);
            DecodeEntry(i, dst[PositionOfEntry(i)]);
          }
        } catch (...) {
          errors[b] = std::current_exception();
        }
      });
  // The first failing record by position raises, whatever thread saw it
  // (entries are in order of their first positions).
  for (const std::exception_ptr& error : errors) {
    if (error) std::rethrow_exception(error);
  }
  CopyRepeats(dst);
}

void ReadPlan::CopyRepeats(char* const* dst) const {
  if (!has_repeats()) return;
  for (size_t k = 0; k < positions_; ++k) {
    const char* first = dst[FirstPosition(k)];
    if (dst[k] == nullptr || dst[k] == first) continue;
    std::memcpy(dst[k], first, static_cast<size_t>(decoded_size(k)));
  }
}

std::vector<uint32_t> FirstPositions(const ReadPlan& plan) {
  std::vector<uint32_t> first;
  if (!plan.has_repeats()) return first;
  first.resize(plan.size());
  for (size_t k = 0; k < plan.size(); ++k) {
    first[k] = static_cast<uint32_t>(plan.FirstPosition(k));
  }
  return first;
}

size_t RecordsPerChunk(const Bag& bag) {
  const uint64_t records = std::max<uint64_t>(bag.size(), 1);
  const uint64_t average = std::max<uint64_t>(bag.records_bytes() / records, 1);
  const uint64_t wanted = (uint64_t{64} << 20) / average;
  return static_cast<size_t>(std::clamp<uint64_t>(wanted, 64, 65536));
}

void ReadBatch(const std::shared_ptr<const Bag>& bag, const uint64_t* indices,
               size_t n, const AllocateFn& allocate,
               const std::function<void()>& checkpoint) {
  const size_t chunk = RecordsPerChunk(*bag);
  std::vector<char*> dst;
  for (size_t first = 0; first < n; first += chunk) {
    const size_t count = std::min(chunk, n - first);
    ReadPlan plan(bag, indices + first, count);
    dst.assign(count, nullptr);
    allocate(first, plan, dst.data());
    plan.Fill(dst.data());
    if (checkpoint && first + count < n) checkpoint();
  }
}

struct BackgroundTask::State {
  std::mutex mutex;
  std::condition_variable done;
  bool finished = false;
  std::exception_ptr error;
};

std::shared_ptr<BackgroundTask> BackgroundTask::Start(std::function<void()> work,
                                                      size_t parallelism) {
  auto task = std::make_shared<BackgroundTask>();
  auto state = std::make_shared<State>();
  task->state_ = state;
  ThreadPool::Shared().Submit(
      [state, work = std::move(work)] {
        std::exception_ptr error;
        try {
          work();
        } catch (...) {
          error = std::current_exception();
        }
        {
          std::lock_guard<std::mutex> lock(state->mutex);
          state->error = error;
          state->finished = true;
        }
        state->done.notify_all();
      },
      parallelism);
  return task;
}

bool BackgroundTask::WaitFor(int64_t milliseconds) {
  std::unique_lock<std::mutex> lock(state_->mutex);
  return state_->done.wait_for(lock, std::chrono::milliseconds(milliseconds),
                               [this] { return state_->finished; });
}

void BackgroundTask::RethrowIfFailed() const {
  if (state_->error) std::rethrow_exception(state_->error);
}

std::shared_ptr<PendingRead> PendingRead::Start(std::shared_ptr<const Bag> bag,
                                                std::vector<uint64_t> indices,
                                                std::string prefix) {
  auto pending = std::make_shared<PendingRead>();
  auto records = std::make_shared<DecodedRecords>();
  pending->records_ = records;
  const size_t parallelism = bag->options().max_parallelism;
  pending->task_ = BackgroundTask::Start(
      [records, bag = std::move(bag), indices = std::move(indices),
       prefix = std::move(prefix)] {
        ReadPlan plan(bag, indices.data(), indices.size());
        records->offsets.resize(plan.size() + 1);
        uint64_t offset = prefix.size();
        for (size_t i = 0; i < plan.size(); ++i) {
          records->offsets[i] = offset;
          offset += plan.decoded_size(i);
        }
        records->offsets[plan.size()] = offset;
        records->data.resize(static_cast<size_t>(offset));
        std::copy(prefix.begin(), prefix.end(), records->data.begin());
        std::vector<char*> dst(plan.size());
        for (size_t i = 0; i < plan.size(); ++i) {
          dst[i] = records->data.data() + records->offsets[i];
        }
        plan.Fill(dst.data());
        records->first_position = FirstPositions(plan);
      },
      parallelism);
  return pending;
}

const DecodedRecords& PendingRead::Result() const {
  task_->RethrowIfFailed();
  return *records_;
}

bool MappedRun(const Bag& bag, uint64_t first, uint64_t count,
               const char** data, std::vector<uint64_t>& offsets) {
  if (count == 0 || first >= bag.size() || count > bag.size() - first) {
    return false;
  }
  const Bag::Location head = bag.Locate(first);
  const Bag::Location tail = bag.Locate(first + count - 1);
  if (head.shard != tail.shard || tail.local - head.local != count - 1) {
    return false;
  }
  const Shard& shard = bag.shard(head.shard);
  const char* mapped = shard.records().mapped();
  if (mapped == nullptr || shard.codec().compressed()) return false;
  uint64_t begin;
  offsets.resize(static_cast<size_t>(count) + 1);
  shard.Limits(head.local, count, &begin, offsets.data() + 1);
  for (size_t k = 1; k <= count; ++k) offsets[k] -= begin;
  offsets[0] = 0;
  *data = mapped + begin;
  // Lent without a copy: a bag with a sidecar has its records checked here.
  shard.CheckRun(head.local, count, begin, *data, offsets.data());
  return true;
}

namespace {

// What VisitRecords and VisitChunks share: each chunk's wanted records
// (positions `wanted` of the chunk) decoded into `dst`, then on_chunk(first,
// plan, wanted, dst, errors) until it returns false. errors[w] holds what
// decoding wanted[w] threw: on_chunk rethrows it when it reaches w.
void DecodeChunks(
    const std::shared_ptr<const Bag>& bag, const View& view, uint64_t from,
    uint64_t to, const std::function<bool(uint64_t size)>* want,
    const std::function<bool(uint64_t first, const ReadPlan& plan,
                             const std::vector<size_t>& wanted,
                             const std::vector<char*>& dst,
                             const std::vector<std::exception_ptr>& errors)>& on_chunk,
    const std::function<void()>& checkpoint) {
  const size_t chunk = RecordsPerChunk(*bag);
  std::vector<uint64_t> globals;
  std::vector<size_t> wanted;
  std::string arena;
  std::vector<char*> dst;
  for (uint64_t first = from; first < to; first += chunk) {
    const size_t count = static_cast<size_t>(std::min<uint64_t>(chunk, to - first));
    globals.resize(count);
    for (size_t k = 0; k < count; ++k) globals[k] = view.Global(first + k);
    ReadPlan plan(bag, globals.data(), count);
    wanted.clear();
    uint64_t bytes = 0;
    for (size_t k = 0; k < count; ++k) {
      if (want == nullptr || (*want)(plan.decoded_size(k))) {
        wanted.push_back(k);
        bytes += plan.decoded_size(k);
      }
    }
    // Decode only the wanted records, each into its place in the arena.
    arena.resize(static_cast<size_t>(bytes));
    dst.assign(wanted.size(), nullptr);
    uint64_t offset = 0;
    for (size_t w = 0; w < wanted.size(); ++w) {
      dst[w] = arena.data() + offset;
      offset += plan.decoded_size(wanted[w]);
    }
    const size_t parallelism =
        bytes >= kParallelDecodeBytes ? bag->options().max_parallelism : 1;
    std::vector<std::exception_ptr> errors(wanted.size());
    // Blocks of records, not one pool item each: small records decode in
    // less time than the threads take to hand out an item. At least a few
    // blocks per thread, for large records.
    const size_t blocks = std::max(std::min(wanted.size(), 16 * parallelism),
                                   wanted.size() / kDecodeBlockRecords);
    ForBlocks(wanted.size(), blocks, parallelism, [&](size_t begin, size_t end) {
      for (size_t w = begin; w < end; ++w) {
        try {
          plan.DecodeOne(wanted[w], dst[w]);
        } catch (...) {
          errors[w] = std::current_exception();
        }
      }
    });
    if (!on_chunk(first, plan, wanted, dst, errors)) return;
    if (checkpoint && first + count < to) checkpoint();
  }
}

}  // namespace

void VisitChunks(const std::shared_ptr<const Bag>& bag, const View& view,
                 uint64_t from, uint64_t to,
                 const std::function<bool(uint64_t first, size_t count,
                                          const char* const* data,
                                          const uint64_t* sizes)>& visit,
                 const std::function<void()>& checkpoint) {
  std::vector<uint64_t> sizes;
  DecodeChunks(
      bag, view, from, to, nullptr,
      [&](uint64_t first, const ReadPlan& plan, const std::vector<size_t>& wanted,
          const std::vector<char*>& dst, const std::vector<std::exception_ptr>& errors) {
        for (const std::exception_ptr& error : errors) {
          if (error) std::rethrow_exception(error);  // the first, in view order
        }
        sizes.resize(wanted.size());
        for (size_t k = 0; k < wanted.size(); ++k) sizes[k] = plan.decoded_size(k);
        return visit(first, wanted.size(), dst.data(), sizes.data());
      },
      checkpoint);
}

void VisitRecords(const std::shared_ptr<const Bag>& bag, const View& view,
                  uint64_t from, uint64_t to,
                  const std::function<bool(uint64_t size)>& want,
                  const std::function<bool(uint64_t j, const char* data,
                                           uint64_t size)>& visit,
                  const std::function<void()>& checkpoint) {
  DecodeChunks(
      bag, view, from, to, &want,
      [&](uint64_t first, const ReadPlan& plan, const std::vector<size_t>& wanted,
          const std::vector<char*>& dst, const std::vector<std::exception_ptr>& errors) {
        for (size_t w = 0; w < wanted.size(); ++w) {
          if (errors[w]) std::rethrow_exception(errors[w]);
          const size_t k = wanted[w];
          if (!visit(first + k, dst[w], plan.decoded_size(k))) return false;
        }
        return true;
      },
      checkpoint);
}

}  // namespace sackli
