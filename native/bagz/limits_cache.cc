#include "bagz/limits_cache.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "bagz/format.h"
#include "bagz/thread_pool.h"

namespace sackli {

LimitsCache::LimitsCache(std::shared_ptr<ByteSource> source, uint64_t offset,
                         uint64_t count)
    : source_(std::move(source)),
      offset_(offset),
      count_(count),
      states_((count + kLimitsPerPage - 1) / kLimitsPerPage, PageState::kMissing),
      pages_(states_.size()) {}

uint64_t LimitsCache::LimitsInPage(uint64_t page) const {
  return std::min(kLimitsPerPage, count_ - page * kLimitsPerPage);
}

void LimitsCache::Read(uint64_t first, uint64_t count, uint64_t* out) const {
  if (count == 0) return;
  const uint64_t first_page = first / kLimitsPerPage;
  const uint64_t last_page = (first + count - 1) / kLimitsPerPage;
  std::vector<uint64_t> pages;
  for (uint64_t p = first_page; p <= last_page; ++p) pages.push_back(p);
  MakePresent(pages, 1);
  // Present pages never change: copy without the lock.
  uint64_t at = first;
  const uint64_t end = first + count;
  while (at < end) {
    const uint64_t page = at / kLimitsPerPage;
    const uint64_t in_page = at - page * kLimitsPerPage;
    const uint64_t n = std::min(end - at, kLimitsPerPage - in_page);
    std::memcpy(out, pages_[page].get() + in_page, n * sizeof(uint64_t));
    out += n;
    at += n;
  }
}

void LimitsCache::Prefetch(const uint64_t* sorted, size_t n,
                           size_t parallelism) const {
  std::vector<uint64_t> pages;
  for (size_t k = 0; k < n; ++k) {
    const uint64_t page = sorted[k] / kLimitsPerPage;
    if (pages.empty() || pages.back() != page) pages.push_back(page);
  }
  // Nearly sorted already (a caller's neighbours may repeat a page).
  std::sort(pages.begin(), pages.end());
  pages.erase(std::unique(pages.begin(), pages.end()), pages.end());
  MakePresent(pages, parallelism);
}

uint64_t LimitsCache::pages_present() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<uint64_t>(
      std::count(states_.begin(), states_.end(), PageState::kPresent));
}

void LimitsCache::MakePresent(const std::vector<uint64_t>& pages,
                              size_t parallelism) const {
  while (true) {
    std::vector<uint64_t> mine;  // missing: this thread fetches them
    bool others = false;         // being fetched by other threads
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (const uint64_t p : pages) {
        if (states_[p] == PageState::kMissing) {
          states_[p] = PageState::kFetching;
          mine.push_back(p);
        } else if (states_[p] == PageState::kFetching) {
          others = true;
        }
      }
    }
    if (!mine.empty()) Fetch(mine, parallelism);
    if (!others) return;
    std::unique_lock<std::mutex> lock(mutex_);
    fetched_.wait(lock, [&] {
      return std::none_of(pages.begin(), pages.end(), [&](uint64_t p) {
        return states_[p] == PageState::kFetching;
      });
    });
    const bool all_present =
        std::all_of(pages.begin(), pages.end(), [&](uint64_t p) {
          return states_[p] == PageState::kPresent;
        });
    if (all_present) return;
    // Another thread's fetch failed: those pages are missing again, and
    // this thread claims them on the next turn.
  }
}

void LimitsCache::Fetch(const std::vector<uint64_t>& pages,
                        size_t parallelism) const {
  struct Run {
    uint64_t first, n;
  };
  std::vector<Run> runs;
  for (const uint64_t p : pages) {
    if (!runs.empty() && runs.back().first + runs.back().n == p &&
        runs.back().n < kMaxPagesPerRead) {
      ++runs.back().n;
    } else {
      runs.push_back(Run{p, 1});
    }
  }
  try {
    if (source_->remote()) {
      // One batch: the source's client keeps every run in flight at once.
      std::vector<std::string> bytes(runs.size());
      std::vector<ByteRange> ranges(runs.size());
      for (size_t r = 0; r < runs.size(); ++r) {
        ranges[r] = RunRange(runs[r].first, runs[r].n, bytes[r]);
      }
      source_->ReadMany(ranges.data(), ranges.size());
      for (size_t r = 0; r < runs.size(); ++r) {
        Publish(runs[r].first, runs[r].n, bytes[r]);
      }
    } else {
      ThreadPool::Shared().ParallelFor(runs.size(), parallelism, [&](size_t r) {
        FetchRun(runs[r].first, runs[r].n);
      });
    }
  } catch (...) {
    // Runs that failed or never started are missing again, so that waiting
    // threads stop waiting and the next read tries them again.
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (const uint64_t p : pages) {
        if (states_[p] == PageState::kFetching) states_[p] = PageState::kMissing;
      }
    }
    fetched_.notify_all();
    throw;
  }
}

ByteRange LimitsCache::RunRange(uint64_t first, uint64_t n,
                                std::string& bytes) const {
  const uint64_t first_limit = first * kLimitsPerPage;
  const uint64_t limits =
      std::min(n * kLimitsPerPage, count_ - first_limit);
  bytes.assign(static_cast<size_t>(limits * kLimitBytes), '\0');
  return ByteRange{offset_ + first_limit * kLimitBytes, bytes.size(), bytes.data()};
}

void LimitsCache::FetchRun(uint64_t first, uint64_t n) const {
  std::string bytes;
  const ByteRange range = RunRange(first, n, bytes);
  source_->Read(range.offset, range.length, range.dst);
  Publish(first, n, bytes);
}

void LimitsCache::Publish(uint64_t first, uint64_t n,
                          const std::string& bytes) const {
  std::vector<std::unique_ptr<uint64_t[]>> fetched(n);
  for (uint64_t k = 0; k < n; ++k) {
    const uint64_t in_page = LimitsInPage(first + k);
    fetched[k].reset(new uint64_t[in_page]);
    const char* src = bytes.data() + k * kLimitsPerPage * kLimitBytes;
    for (uint64_t j = 0; j < in_page; ++j) {
      fetched[k][j] = LoadU64(src + j * kLimitBytes);
    }
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (uint64_t k = 0; k < n; ++k) {
      pages_[first + k] = std::move(fetched[k]);
      states_[first + k] = PageState::kPresent;
    }
  }
  fetched_.notify_all();
}

}  // namespace sackli
