// The limits of a remote file, fetched on first use a page at a time and kept
// for the life of the shard: a reader of a few records (a Beam range, a random
// lookup) downloads the pages around them, not the whole limits section.
//
// Contract:
// - Values are returned as stored (not validated: Shard::Limits validates
//   every span it hands out, so corrupt limits raise there, naming the file
//   and the offset).
// - Each page is fetched once, by one thread; other threads needing it wait
//   for that fetch instead of issuing their own. Runs of neighbouring missing
//   pages are fetched in one ranged read each; a remote source gets all the
//   runs of one fetch in one ReadMany (its client overlaps them).
// - A failed fetch throws the source's error to the thread that issued it;
//   its pages stay missing, so the next read (or a waiting thread) tries
//   again.
// - Thread-safe: every method may be called concurrently (the Shard owning
//   the cache is shared const across the pool's threads). A thread may wait
//   for another's fetch, so no caller may hold a lock that the source's
//   Read takes: the bindings release the GIL before engine reads, as remote
//   sources take it.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bagz/byte_source.h"

namespace sackli {

class LimitsCache {
 public:
  // 4096 limits (32 KiB) per page. One object-store request costs tens of
  // milliseconds before its first byte, so 32 KiB arrive in about the same
  // time as 8 bytes; and a reader of a range of records pays at most one
  // partly used page at each end of the range.
  static constexpr uint64_t kLimitsPerPage = 4096;
  // A run of missing pages is split into reads of at most this many pages
  // (8 MiB), which a prefetch issues in parallel.
  static constexpr uint64_t kMaxPagesPerRead = 256;

  // The `count` limits stored at `offset` of `source`.
  LimitsCache(std::shared_ptr<ByteSource> source, uint64_t offset,
              uint64_t count);
  LimitsCache(const LimitsCache&) = delete;
  LimitsCache& operator=(const LimitsCache&) = delete;

  uint64_t size() const { return count_; }

  // Limits [first, first + count) into `out`, fetching the pages missing
  // (in the calling thread). The range must lie inside [0, size()).
  void Read(uint64_t first, uint64_t count, uint64_t* out) const;

  // Makes present the pages holding limits `sorted[0, n)` (best ascending;
  // any order and repeats work), fetching the missing ones with at most one read per
  // run of neighbouring pages: for a remote source in one ReadMany, for
  // others on up to `parallelism` pool threads.
  void Prefetch(const uint64_t* sorted, size_t n, size_t parallelism) const;

  // Pages fetched so far (for tests and statistics).
  uint64_t pages_present() const;

 private:
  enum class PageState : uint8_t { kMissing, kFetching, kPresent };

  // Makes `pages` (ascending, distinct) present.
  void MakePresent(const std::vector<uint64_t>& pages, size_t parallelism) const;
  // Fetches `pages` (ascending, distinct, all claimed by this thread).
  void Fetch(const std::vector<uint64_t>& pages, size_t parallelism) const;
  // Fetches pages [first, first + n) in one read and publishes them.
  void FetchRun(uint64_t first, uint64_t n) const;
  // The read of pages [first, first + n), into `bytes` (sized here).
  ByteRange RunRange(uint64_t first, uint64_t n, std::string& bytes) const;
  // Makes pages [first, first + n) present, from their stored `bytes`.
  void Publish(uint64_t first, uint64_t n, const std::string& bytes) const;
  uint64_t LimitsInPage(uint64_t page) const;

  const std::shared_ptr<ByteSource> source_;
  const uint64_t offset_;
  const uint64_t count_;
  mutable std::mutex mutex_;
  mutable std::condition_variable fetched_;
  // Both guarded by mutex_; a page's buffer, once kPresent, never changes,
  // so it is read without the lock after the state was seen under it.
  mutable std::vector<PageState> states_;
  mutable std::vector<std::unique_ptr<uint64_t[]>> pages_;
};

}  // namespace sackli
