// Limits of remote shards read lazily (limits_cache.h, shard.h): a page is
// fetched once, neighbouring missing pages in one read, concurrent readers
// share fetches, a failed fetch is retried, corrupt limits still raise, and
// kInMemory still loads everything at open.
#include "bagz/limits_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <thread>

#include "bagz/errors.h"
#include "bagz/format.h"
#include "bagz/read_plan.h"
#include "bagz/tests/test_bags.h"

namespace sackli {
namespace {

constexpr uint64_t kPage = LimitsCache::kLimitsPerPage;

// An object "behind a network", held in memory: counts reads and the bytes
// they return, and can be told to fail its next reads.
class CountingRemoteSource : public ByteSource {
 public:
  CountingRemoteSource(std::string path, std::string bytes)
      : path_(std::move(path)), bytes_(std::move(bytes)) {}

  uint64_t size() const override { return bytes_.size(); }
  const std::string& path() const override { return path_; }
  bool remote() const override { return true; }
  void Read(uint64_t offset, size_t length, char* dst) const override {
    if (offset > bytes_.size() || length > bytes_.size() - offset) {
      ThrowCorruption(path_, offset, "read past the end");
    }
    if (failures_left_.fetch_sub(1) > 0) {
      throw Error(ErrorKind::kIo, path_ + ": injected failure", path_, 5);
    }
    reads_.fetch_add(1);
    bytes_read_.fetch_add(length);
    std::lock_guard<std::mutex> lock(mutex_);
    log_.emplace_back(offset, length);
    std::copy(bytes_.begin() + offset, bytes_.begin() + offset + length, dst);
  }

  uint64_t reads() const { return reads_.load(); }
  uint64_t bytes_read() const { return bytes_read_.load(); }
  std::vector<std::pair<uint64_t, size_t>> log() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return log_;
  }
  void Reset() {
    reads_ = 0;
    bytes_read_ = 0;
    std::lock_guard<std::mutex> lock(mutex_);
    log_.clear();
  }
  void FailNext(int64_t n) { failures_left_ = n; }

 private:
  std::string path_;
  std::string bytes_;
  mutable std::atomic<uint64_t> reads_{0};
  mutable std::atomic<uint64_t> bytes_read_{0};
  mutable std::atomic<int64_t> failures_left_{0};
  mutable std::mutex mutex_;
  mutable std::vector<std::pair<uint64_t, size_t>> log_;
};

// `n` limits 0, 10, 20, ... as stored bytes after `prefix` bytes of filler.
std::string StoredLimits(uint64_t n, size_t prefix) {
  std::string bytes(prefix, 'x');
  for (uint64_t i = 0; i < n; ++i) bytes += testing::U64(10 * i);
  return bytes;
}

TEST(LimitsCache, FetchesEachPageOnceAndCoalescesNeighbours) {
  const uint64_t n = 5 * kPage + 100;  // a short last page
  auto source = std::make_shared<CountingRemoteSource>("mem://l", StoredLimits(n, 24));
  LimitsCache cache(source, 24, n);
  EXPECT_EQ(source->reads(), 0u);  // nothing fetched when made

  std::vector<uint64_t> out(3);
  cache.Read(kPage + 5, 3, out.data());
  EXPECT_EQ(out, (std::vector<uint64_t>{10 * (kPage + 5), 10 * (kPage + 6), 10 * (kPage + 7)}));
  EXPECT_EQ(source->reads(), 1u);
  EXPECT_EQ(source->bytes_read(), kPage * kLimitBytes);  // one page, not all
  cache.Read(kPage, kPage, std::vector<uint64_t>(kPage).data());
  EXPECT_EQ(source->reads(), 1u);  // cached

  // Pages 0 and 2-5 missing: a read of everything fetches the two runs, one
  // read each (the short last page included).
  source->Reset();
  std::vector<uint64_t> all(n);
  cache.Read(0, n, all.data());
  for (uint64_t i = 0; i < n; ++i) ASSERT_EQ(all[i], 10 * i) << i;
  EXPECT_EQ(source->reads(), 2u);
  EXPECT_EQ(source->bytes_read(), (n - kPage) * kLimitBytes);
  EXPECT_EQ(cache.pages_present(), 6u);
  const auto log = source->log();
  EXPECT_EQ(log[0], (std::pair<uint64_t, size_t>(24, static_cast<size_t>(kPage * kLimitBytes))));
  EXPECT_EQ(log[1].first, 24 + 2 * kPage * kLimitBytes);
}

TEST(LimitsCache, PrefetchCoalescesScatteredLimitsIntoFewReads) {
  const uint64_t n = 40 * kPage;
  auto source = std::make_shared<CountingRemoteSource>("mem://l", StoredLimits(n, 0));
  LimitsCache cache(source, 0, n);
  // Pages 1, 2, 3 (one run), 7 and 30 (alone), in any order, with repeats.
  const std::vector<uint64_t> wanted = {30 * kPage + 9, kPage + 1, 3 * kPage, 2 * kPage + 7,
                                        kPage + 1,      7 * kPage, 3 * kPage + 1};
  cache.Prefetch(wanted.data(), wanted.size(), 4);
  EXPECT_EQ(source->reads(), 3u);
  EXPECT_EQ(cache.pages_present(), 5u);
  uint64_t value;
  for (uint64_t i : wanted) {
    cache.Read(i, 1, &value);
    EXPECT_EQ(value, 10 * i);
  }
  EXPECT_EQ(source->reads(), 3u);
}

TEST(LimitsCache, ConcurrentReadersFetchEachPageOnce) {
  const uint64_t n = 64 * kPage;
  auto source = std::make_shared<CountingRemoteSource>("mem://l", StoredLimits(n, 8));
  LimitsCache cache(source, 8, n);
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::vector<uint64_t> out(kPage + 2);
      for (int round = 0; round < 64; ++round) {
        const uint64_t first = ((round * 7 + t * 13) % 63) * kPage + kPage / 2;
        cache.Read(first, out.size(), out.data());
        for (uint64_t k = 0; k < out.size(); ++k) {
          if (out[k] != 10 * (first + k)) ++wrong;
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(wrong.load(), 0);
  // Every page fetched exactly once, whatever the interleaving.
  EXPECT_EQ(source->bytes_read(), cache.pages_present() * kPage * kLimitBytes);
  EXPECT_LE(source->reads(), cache.pages_present());
}

TEST(LimitsCache, AFailedFetchLeavesThePageMissingForTheNextRead) {
  const uint64_t n = 3 * kPage;
  auto source = std::make_shared<CountingRemoteSource>("mem://l", StoredLimits(n, 0));
  LimitsCache cache(source, 0, n);
  source->FailNext(1);
  uint64_t value = 0;
  EXPECT_THROW(cache.Read(kPage, 1, &value), Error);
  EXPECT_EQ(cache.pages_present(), 0u);
  cache.Read(kPage, 1, &value);
  EXPECT_EQ(value, 10 * kPage);
  EXPECT_EQ(cache.pages_present(), 1u);
  // A prefetch whose reads fail leaves nothing half fetched.
  source->FailNext(100);
  const std::vector<uint64_t> wanted = {0, 2 * kPage};
  EXPECT_THROW(cache.Prefetch(wanted.data(), wanted.size(), 4), Error);
  source->FailNext(0);
  cache.Read(2 * kPage, 1, &value);
  EXPECT_EQ(value, 20 * kPage);
}

// --- Shards over a remote source ---------------------------------------------

// Opens every path of the tests' in-memory objects as a remote source.
struct RemoteObjects {
  std::map<std::string, std::shared_ptr<CountingRemoteSource>> objects;
  SourceOpener opener() {
    return SourceOpener{
        [this](const std::string& path) -> std::shared_ptr<ByteSource> {
          auto found = objects.find(path);
          if (found == objects.end()) throw Error(ErrorKind::kNotFound, path, path, 2);
          return found->second;
        },
        [this](const std::string& path) { return objects.count(path) > 0; }};
  }
};

std::vector<std::string> SmallRecords(size_t n) {
  std::vector<std::string> records;
  for (size_t i = 0; i < n; ++i) records.push_back("r" + std::to_string(i));
  return records;
}

uint64_t LimitsBytes(size_t n) { return n * kLimitBytes; }

TEST(RemoteShard, OnDiskFetchesOnlyThePagesItReads) {
  const std::vector<std::string> records = SmallRecords(10 * kPage);
  RemoteObjects remote;
  auto source = std::make_shared<CountingRemoteSource>("s3://b/x.bag", testing::TailBag(records));
  remote.objects[source->path()] = source;
  testing::OpenOptions options;
  const SourceOpener opener = remote.opener();
  const auto bag = testing::OpenBag({source->path()}, options, &opener);
  EXPECT_EQ(source->reads(), 1u);  // the trailer only
  EXPECT_LE(source->bytes_read(), 8u);

  source->Reset();
  std::string out;
  ReadOneInto(*bag, 5 * kPage + 3, out);
  EXPECT_EQ(out, records[5 * kPage + 3]);
  EXPECT_EQ(source->reads(), 2u);  // its limits page, then its bytes
  EXPECT_LT(source->bytes_read(), LimitsBytes(records.size()) / 5);

  // A batch of scattered records: the limits pages its records need, fetched
  // before their spans are read, in one read per run of neighbouring pages
  // (here two: pages 0-4 and 6-9 around page 5, kept from the read above),
  // not one read per record.
  const uint64_t records_end = source->size() - LimitsBytes(records.size());
  const auto limits_reads = [&] {
    uint64_t reads = 0;
    for (const auto& entry : source->log()) reads += entry.first >= records_end;
    return reads;
  };
  source->Reset();
  std::vector<uint64_t> indices;
  for (uint64_t i = 0; i < records.size(); i += 97) indices.push_back(i);
  ReadPlan plan(bag, indices.data(), indices.size());
  EXPECT_EQ(limits_reads(), 2u);
  source->Reset();
  ReadPlan again(bag, indices.data(), indices.size());
  EXPECT_EQ(limits_reads(), 0u);  // the limits are kept
}

TEST(RemoteShard, InMemoryLoadsAllLimitsAtOpenInOneRead) {
  const std::vector<std::string> records = SmallRecords(3 * kPage + 1);
  RemoteObjects remote;
  auto source = std::make_shared<CountingRemoteSource>("s3://b/x.bag", testing::TailBag(records));
  remote.objects[source->path()] = source;
  testing::OpenOptions options;
  options.storage = LimitsStorage::kInMemory;
  const SourceOpener opener = remote.opener();
  const auto bag = testing::OpenBag({source->path()}, options, &opener);
  // The last 64 KiB of limits with the trailer, then the ones before them:
  // each byte of them once.
  EXPECT_EQ(source->reads(), 2u);
  EXPECT_EQ(source->bytes_read(), LimitsBytes(records.size()));
  source->Reset();
  EXPECT_EQ(testing::ReadAll(*bag), records);
  const uint64_t records_end = source->size() - LimitsBytes(records.size());
  for (const auto& [offset, length] : source->log()) {
    EXPECT_LE(offset + length, records_end) << "a limit read after open";
  }
}

TEST(RemoteShard, InMemoryReadsFewLimitsWithTheTrailer) {
  // Limits of up to 64 KiB come in the read of the trailer: one round trip.
  for (const size_t n : {size_t{1}, size_t{100}, size_t{8191}}) {
    const std::vector<std::string> records = SmallRecords(n);
    RemoteObjects remote;
    auto source =
        std::make_shared<CountingRemoteSource>("s3://b/x.bag", testing::TailBag(records));
    remote.objects[source->path()] = source;
    testing::OpenOptions options;
    options.storage = LimitsStorage::kInMemory;
    const SourceOpener opener = remote.opener();
    const auto bag = testing::OpenBag({source->path()}, options, &opener);
    EXPECT_EQ(source->reads(), 1u) << n;
    EXPECT_LE(source->bytes_read(), 64u * 1024) << n;
    EXPECT_EQ(testing::ReadAll(*bag), records) << n;
  }
  // A damaged limit read that way still raises, naming the file.
  std::string stored = testing::TailBag(SmallRecords(10));
  const uint64_t limits_start = stored.size() - LimitsBytes(10);
  stored[limits_start + 2 * kLimitBytes] = '\x7f';  // limit 2 far past the records
  RemoteObjects remote;
  auto source = std::make_shared<CountingRemoteSource>("s3://b/bad.bag", stored);
  remote.objects[source->path()] = source;
  testing::OpenOptions options;
  options.storage = LimitsStorage::kInMemory;
  const SourceOpener opener = remote.opener();
  try {
    const auto bag = testing::OpenBag({source->path()}, options, &opener);
    testing::ReadAll(*bag);
    ADD_FAILURE() << "a damaged limit was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("s3://b/bad.bag"), std::string::npos) << e.what();
  }
}

TEST(RemoteShard, SeparateLimitsAreFetchedLazilyToo) {
  const std::vector<std::string> records = SmallRecords(2 * kPage + 5);
  RemoteObjects remote;
  std::string payloads;
  for (const auto& r : records) payloads += r;
  auto bag_source = std::make_shared<CountingRemoteSource>("s3://b/y.bag", payloads);
  auto limits = std::make_shared<CountingRemoteSource>("s3://b/limits.y.bag",
                                                       testing::LimitsOf(records));
  remote.objects[bag_source->path()] = bag_source;
  remote.objects[limits->path()] = limits;
  testing::OpenOptions options;
  options.placement = LimitsPlacement::kSeparate;
  const SourceOpener opener = remote.opener();
  const auto bag = testing::OpenBag({bag_source->path()}, options, &opener);
  EXPECT_EQ(limits->reads(), 0u);
  std::string out;
  ReadOneInto(*bag, 2 * kPage + 4, out);
  EXPECT_EQ(out, records.back());
  EXPECT_EQ(limits->reads(), 1u);
  EXPECT_EQ(limits->bytes_read(), 5 * kLimitBytes);  // the short last page
}

TEST(RemoteShard, CorruptLimitsStillRaiseNamingTheFileAndOffset) {
  std::vector<std::string> records = SmallRecords(2 * kPage);
  std::string bytes = testing::TailBag(records);
  uint64_t records_end = 0;
  for (const auto& r : records) records_end += r.size();
  // Limit kPage + 10 smaller than its predecessor.
  const uint64_t bad = kPage + 10;
  const std::string zero = testing::U64(0);
  std::copy(zero.begin(), zero.end(), bytes.begin() + records_end + bad * kLimitBytes);
  RemoteObjects remote;
  auto source = std::make_shared<CountingRemoteSource>("s3://b/bad.bag", bytes);
  remote.objects[source->path()] = source;
  const SourceOpener opener = remote.opener();
  const auto bag = testing::OpenBag({source->path()}, {}, &opener);
  std::string out;
  ReadOneInto(*bag, 3, out);  // another page: fine
  EXPECT_EQ(out, records[3]);
  try {
    ReadOneInto(*bag, bad, out);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kCorruption);
    const std::string what = e.what();
    EXPECT_NE(what.find("s3://b/bad.bag"), std::string::npos) << what;
    EXPECT_NE(what.find(std::to_string(records_end + bad * kLimitBytes)), std::string::npos)
        << what;
  }
  std::vector<uint64_t> indices = {1, bad};
  EXPECT_THROW(ReadPlan(bag, indices.data(), indices.size()), Error);
}

}  // namespace
}  // namespace sackli
