// The read plan: batches of records in any order, with duplicates, from
// mapped and unmapped, raw and compressed shards; coalesced reads; corrupt
// limits and bad indices.
#include "bagz/read_plan.h"

#include <gtest/gtest.h>

#include <atomic>
#include <algorithm>
#include <numeric>
#include <mutex>
#include <random>
#include <utility>

#include "bagz/coalescing.h"
#include "bagz/errors.h"
#include "bagz/stable_order.h"
#include "bagz/tests/test_bags.h"

namespace sackli {
namespace {

using testing::OpenBag;
using testing::OpenOptions;
using testing::TempDir;

// Reads `indices` with one plan and returns the records in request order.
std::vector<std::string> ReadWithPlan(const std::shared_ptr<const Bag>& bag,
                                      const std::vector<uint64_t>& indices) {
  ReadPlan plan(bag, indices.data(), indices.size());
  std::vector<std::string> out(plan.size());
  std::vector<char*> dst(plan.size());
  for (size_t i = 0; i < plan.size(); ++i) {
    out[i].resize(plan.decoded_size(i));
    dst[i] = out[i].data();
  }
  plan.Fill(dst.data());
  return out;
}

std::vector<std::string> Pick(const std::vector<std::string>& records,
                              const std::vector<uint64_t>& indices) {
  std::vector<std::string> picked;
  for (uint64_t i : indices) picked.push_back(records[i]);
  return picked;
}

using testing::SourceCase;

class ReadPlanTest : public ::testing::TestWithParam<SourceCase> {};

TEST_P(ReadPlanTest, ReturnsRecordsInRequestOrderWithDuplicates) {
  TempDir dir;
  const std::vector<std::string> records = testing::MakeRecords(200);
  const auto bag = testing::OpenTwoShards(dir, GetParam(), records, 120);
  ASSERT_EQ(bag->size(), 200u);

  const std::vector<uint64_t> indices = {199, 0, 5, 5, 121, 119, 120, 3, 199, 0, 7};
  ReadPlan plan(bag, indices.data(), indices.size());
  ASSERT_EQ(plan.size(), indices.size());
  uint64_t total = 0;
  for (size_t i = 0; i < indices.size(); ++i) {
    EXPECT_EQ(plan.decoded_size(i), records[indices[i]].size()) << "position " << i;
    total += records[indices[i]].size();
  }
  EXPECT_EQ(plan.total_decoded_bytes(), total);
  EXPECT_EQ(ReadWithPlan(bag, indices), Pick(records, indices));

  // Every record, in order and reversed, large enough to run in parallel.
  std::vector<uint64_t> all(200);
  std::iota(all.begin(), all.end(), 0);
  EXPECT_EQ(ReadWithPlan(bag, all), records);
  std::vector<uint64_t> reversed(all.rbegin(), all.rend());
  EXPECT_EQ(ReadWithPlan(bag, reversed), Pick(records, reversed));
  EXPECT_EQ(testing::ReadAll(*bag), records);
}

TEST_P(ReadPlanTest, InterleavedShardsMapRoundRobin) {
  TempDir dir;
  const std::vector<std::string> records = testing::MakeRecords(11);
  std::vector<std::string> shards[3];
  for (size_t g = 0; g < records.size(); ++g) shards[g % 3].push_back(records[g]);
  std::vector<std::string> paths;
  for (int s = 0; s < 3; ++s) {
    paths.push_back(dir.File("s" + std::to_string(s) + GetParam().suffix));
    testing::WriteTailBag(paths.back(), shards[s]);
  }
  OpenOptions options;
  options.cache = GetParam().cache;
  options.layout = ShardingLayout::kInterleaved;
  const auto bag = OpenBag(paths, options);
  const std::vector<uint64_t> indices = {10, 0, 4, 4, 9, 1};
  EXPECT_EQ(ReadWithPlan(bag, indices), Pick(records, indices));
}

TEST_P(ReadPlanTest, IndexPastTheEndIsOutOfRange) {
  TempDir dir;
  const std::string path = dir.File(std::string("x") + GetParam().suffix);
  testing::WriteTailBag(path, testing::MakeRecords(10));
  OpenOptions options;
  options.cache = GetParam().cache;
  const auto bag = OpenBag({path}, options);
  const std::vector<uint64_t> indices = {0, 10};
  try {
    ReadPlan plan(bag, indices.data(), indices.size());
    FAIL() << "no error for index 10 of 10";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kOutOfRange);
    EXPECT_NE(std::string(e.what()).find("10"), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Sources, ReadPlanTest, ::testing::ValuesIn(testing::kSourceCases),
                         testing::SourceCaseName);

// A local file read with pread that counts its reads.
class CountingSource : public ByteSource {
 public:
  CountingSource(std::shared_ptr<ByteSource> inner, std::atomic<int>* reads)
      : inner_(std::move(inner)), reads_(reads) {}
  uint64_t size() const override { return inner_->size(); }
  const std::string& path() const override { return inner_->path(); }
  void Read(uint64_t offset, size_t length, char* dst) const override {
    ++*reads_;
    inner_->Read(offset, length, dst);
  }

 private:
  std::shared_ptr<ByteSource> inner_;
  std::atomic<int>* reads_;
};

TEST(ReadPlanCoalescing, NeighboursOfAnUnmappedSourceShareOneRead) {
  TempDir dir;
  const std::string path = dir.File("x.bag");
  // 100 small records, then one 200 KiB record, then 10 more small ones: a
  // gap far larger than any coalescing distance.
  std::vector<std::string> records = testing::MakeRecords(100, 50);
  records.push_back(std::string(200 * 1024, 'g'));
  for (const std::string& r : testing::MakeRecords(10, 50)) records.push_back(r);
  testing::WriteTailBag(path, records);

  std::atomic<int> reads{0};
  const SourceOpener local = LocalOpener(AccessPattern::kSystem, CachePolicy::kDropAfterRead);
  SourceOpener counting{
      [&](const std::string& p) {
        return std::make_shared<CountingSource>(local.open(p), &reads);
      },
      local.exists};
  OpenOptions options;
  options.storage = LimitsStorage::kInMemory;  // no limit reads during the plan
  const auto bag = OpenBag({path}, options, &counting);

  std::vector<uint64_t> neighbours(100);
  std::iota(neighbours.rbegin(), neighbours.rend(), 0);  // any order
  reads = 0;
  EXPECT_EQ(ReadWithPlan(bag, neighbours), Pick(records, neighbours));
  EXPECT_EQ(reads.load(), 1);

  const std::vector<uint64_t> apart = {105, 2, 3, 101, 2};
  reads = 0;
  EXPECT_EQ(ReadWithPlan(bag, apart), Pick(records, apart));
  EXPECT_EQ(reads.load(), 2);
}

// A local file that says it is remote and records every ReadMany call (the
// ranges of each), as the bindings' Python-backed sources are read.
class RemoteLikeSource : public ByteSource {
 public:
  struct Calls {
    std::mutex mutex;
    std::vector<std::vector<std::pair<uint64_t, size_t>>> batches;
    std::atomic<int> single_reads{0};
  };
  RemoteLikeSource(std::shared_ptr<ByteSource> inner, Calls* calls)
      : inner_(std::move(inner)), calls_(calls) {}
  uint64_t size() const override { return inner_->size(); }
  const std::string& path() const override { return inner_->path(); }
  bool remote() const override { return true; }
  void Read(uint64_t offset, size_t length, char* dst) const override {
    ++calls_->single_reads;
    inner_->Read(offset, length, dst);
  }
  void ReadMany(const ByteRange* ranges, size_t n) const override {
    std::vector<std::pair<uint64_t, size_t>> batch;
    for (size_t i = 0; i < n; ++i) {
      batch.emplace_back(ranges[i].offset, ranges[i].length);
      inner_->Read(ranges[i].offset, ranges[i].length, ranges[i].dst);
    }
    std::lock_guard<std::mutex> lock(calls_->mutex);
    calls_->batches.push_back(std::move(batch));
  }

 private:
  std::shared_ptr<ByteSource> inner_;
  Calls* calls_;
};

SourceOpener RemoteLikeOpener(RemoteLikeSource::Calls* calls) {
  const SourceOpener local = LocalOpener(AccessPattern::kSystem, CachePolicy::kDropAfterRead);
  return SourceOpener{
      [local, calls](const std::string& p) {
        return std::make_shared<RemoteLikeSource>(local.open(p), calls);
      },
      local.exists};
}

TEST(CoalescingRule, RemoteRunsGrowOnlyByTouchingRecords) {
  const CoalescingRule local{false};
  const CoalescingRule remote{true};
  // 4K records 8K apart share a local read only.
  CoalescedRun a{0, 4096, 4096};
  EXPECT_TRUE(Coalesce(local, a, 12 * 1024, 16 * 1024));
  EXPECT_EQ(a.end, 16u * 1024);
  CoalescedRun b{0, 4096, 4096};
  EXPECT_FALSE(Coalesce(remote, b, 12 * 1024, 16 * 1024));
  EXPECT_EQ(b.end, 4096u);
  // Touching records waste nothing, up to the run's cap.
  CoalescedRun scan{0, 1024, 1024};
  uint64_t at = 1024;
  while (Coalesce(remote, scan, at, at + 1024)) at += 1024;
  EXPECT_EQ(scan.end, CoalescingRule::kMaxRunBytes);
  EXPECT_EQ(scan.asked, CoalescingRule::kMaxRunBytes);
  // Never past the gap, never backwards.
  CoalescedRun c{0, 1 << 20, 1 << 20};
  EXPECT_FALSE(Coalesce(local, c, (1 << 20) + CoalescingRule::kMaxGapBytes + 1, (2 << 20)));
  CoalescedRun d{100, 200, 100};
  EXPECT_FALSE(Coalesce(local, d, 50, 300));
}

TEST(CoalescingRule, BridgeGapsSpendsHalfTheAskedBytesOnTheSmallestGaps) {
  const auto k = [](uint64_t kib) { return kib * 1024; };
  // The header's example: 12K asked, a budget of 6K: the 1K gap only.
  EXPECT_EQ(BridgeGaps({{0, k(4), k(4)}, {k(5), k(9), k(4)}, {k(20), k(24), k(4)}}),
            (std::vector<size_t>{0, 2}));
  // Smallest first: 2K, then 3K of a 6.5K budget; the 4K gap no longer fits.
  EXPECT_EQ(BridgeGaps({{0, k(4), k(4)}, {k(8), k(12), k(4)}, {k(14), k(18), k(4)},
                        {k(21), k(22), k(1)}}),
            (std::vector<size_t>{0, 1}));
  // Never backwards (corrupt limits), never over the gap or run caps.
  EXPECT_EQ(BridgeGaps({{k(8), k(12), k(4)}, {0, k(4), k(4)}}),
            (std::vector<size_t>{0, 1}));
  const uint64_t big = CoalescingRule::kMaxRunBytes / 2;
  EXPECT_EQ(BridgeGaps({{0, big, big}, {big + 1, 2 * big + 1, big}}),
            (std::vector<size_t>{0, 1}));
  EXPECT_EQ(BridgeGaps({{0, k(1000), k(1000)},
                        {k(1000) + CoalescingRule::kMaxGapBytes + 1, k(2100), k(1000)}}),
            (std::vector<size_t>{0, 1}));
  EXPECT_TRUE(BridgeGaps({}).empty());
  // Random batches: within 1.5x, whatever the gaps.
  std::mt19937 rng(3);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<CoalescedRun> runs;
    uint64_t at = 0;
    for (int i = 0; i < 50; ++i) {
      at += rng() % k(40);
      const uint64_t length = 1 + rng() % k(16);
      runs.push_back({at, at + length, length});
      at += length;
    }
    const std::vector<size_t> starts = BridgeGaps(runs);
    uint64_t asked = 0, fetched = 0;
    for (size_t s = 0; s < starts.size(); ++s) {
      const size_t end = s + 1 < starts.size() ? starts[s + 1] : runs.size();
      fetched += runs[end - 1].end - runs[starts[s]].begin;
      EXPECT_LE(runs[end - 1].end - runs[starts[s]].begin, CoalescingRule::kMaxRunBytes);
    }
    for (const CoalescedRun& r : runs) asked += r.asked;
    EXPECT_LE(fetched, asked + asked / 2);
  }
}

TEST(ReadPlanRemote, OneReadManyPerSourceFetchingAtMostOneAndAHalfTimesTheRecords) {
  TempDir dir;
  // Records of 1-16 KiB, two shards.
  std::mt19937 rng(7);
  std::vector<std::string> records;
  for (int i = 0; i < 600; ++i) {
    records.push_back(std::to_string(i) + std::string(1024 + rng() % (15 * 1024), 'r'));
  }
  std::vector<std::string> paths = {dir.File("a.bag"), dir.File("b.bag")};
  testing::WriteTailBag(paths[0], {records.begin(), records.begin() + 300});
  testing::WriteTailBag(paths[1], {records.begin() + 300, records.end()});
  RemoteLikeSource::Calls calls;
  const SourceOpener opener = RemoteLikeOpener(&calls);
  const auto bag = OpenBag(paths, OpenOptions{}, &opener);  // ON_DISK: limits lazily

  std::vector<uint64_t> all(records.size());
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), rng);
  for (size_t first = 0; first < all.size(); first += 100) {
    const std::vector<uint64_t> batch(all.begin() + first, all.begin() + first + 100);
    calls.batches.clear();
    calls.single_reads = 0;
    EXPECT_EQ(ReadWithPlan(bag, batch), Pick(records, batch));
    EXPECT_EQ(calls.single_reads.load(), 0);
    uint64_t asked = 0, fetched = 0;
    for (uint64_t g : batch) asked += records[g].size();
    size_t record_batches = 0;
    for (const auto& ranges : calls.batches) {
      // The first batch of a shard also fetches its (one) limits page.
      if (ranges.size() == 1 && ranges[0].second <= 300 * 8) continue;
      ++record_batches;
      for (const auto& [offset, length] : ranges) fetched += length;
    }
    EXPECT_EQ(record_batches, 2u) << "one ReadMany per shard";
    EXPECT_LE(fetched, asked + asked / 2) << "batch at " << first;
    EXPECT_GE(fetched, asked);
  }
}

// A TAIL bag whose limits are `limits` over `payload` (not checked).
void WriteRawTail(const std::string& path, const std::string& payload,
                  const std::vector<uint64_t>& limits) {
  std::string bytes = payload;
  for (uint64_t limit : limits) bytes += testing::U64(limit);
  testing::WriteFile(path, bytes);
}

void ExpectCorruption(const std::shared_ptr<const Bag>& bag,
                      std::vector<uint64_t> indices, const std::string& path) {
  try {
    ReadWithPlan(bag, indices);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kCorruption) << e.what();
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

// Over the records "aaaa" "bbbb" "cc" with `limits` (the middle one bad),
// reading each of `bad` raises, mapped or not, and record 0 stays readable.
void ExpectBadLimitRaises(const std::vector<uint64_t>& limits,
                          const std::vector<std::vector<uint64_t>>& bad) {
  TempDir dir;
  const std::string path = dir.File("x.bag");
  WriteRawTail(path, "aaaabbbbcc", limits);
  for (CachePolicy cache : {CachePolicy::kSystem, CachePolicy::kDropAfterRead}) {
    OpenOptions options;
    options.cache = cache;
    const auto bag = OpenBag({path}, options);
    for (const std::vector<uint64_t>& indices : bad) ExpectCorruption(bag, indices, path);
    EXPECT_EQ(ReadWithPlan(bag, {0}), std::vector<std::string>{"aaaa"});
  }
}

TEST(ReadPlanCorruption, DecreasingLimitRaises) {
  ExpectBadLimitRaises({4, 2, 10}, {{1}, {0, 1, 2}});
}

TEST(ReadPlanCorruption, LimitPastTheRecordsRaises) {
  // Record 2 starts at the bad limit.
  ExpectBadLimitRaises({4, 1000, 10}, {{1}, {2}, {2, 0}});
}

TEST(ReadPlanCorruption, BadFrameRaisesWithItsOffset) {
  TempDir dir;
  const std::string path = dir.File("x.bagz");
  WriteRawTail(path, "not a zstd frame", {16});
  const auto bag = OpenBag({path});
  ExpectCorruption(bag, {0}, path);
}

TEST(ReadBatch, ChunksCallAllocateAndCheckpoint) {
  TempDir dir;
  const std::string path = dir.File("x.bag");
  const std::vector<std::string> records = testing::MakeRecords(300, 20);
  testing::WriteTailBag(path, records);
  const auto bag = OpenBag({path});
  ASSERT_EQ(RecordsPerChunk(*bag), 65536u);  // tiny records: the largest chunk

  std::vector<uint64_t> indices;
  for (int round = 0; round < 300; ++round) {
    for (uint64_t i = 0; i < 300; ++i) indices.push_back((i * 7 + round) % 300);
  }
  std::vector<std::string> out(indices.size());
  std::vector<size_t> firsts;
  int checkpoints = 0;
  ReadBatch(
      bag, indices.data(), indices.size(),
      [&](size_t first, const ReadPlan& plan, char** dst) {
        firsts.push_back(first);
        for (size_t k = 0; k < plan.size(); ++k) {
          out[first + k].resize(plan.decoded_size(k));
          dst[k] = out[first + k].data();
        }
      },
      [&] { ++checkpoints; });
  EXPECT_EQ(out, Pick(records, indices));
  EXPECT_EQ(firsts, (std::vector<size_t>{0, 65536}));
  EXPECT_EQ(checkpoints, 1);  // between the chunks only

  // A checkpoint that throws stops the batch.
  EXPECT_THROW(ReadBatch(
                   bag, indices.data(), indices.size(),
                   [&](size_t first, const ReadPlan& plan, char** dst) {
                     for (size_t k = 0; k < plan.size(); ++k) {
                       out[first + k].resize(plan.decoded_size(k));
                       dst[k] = out[first + k].data();
                     }
                   },
                   [] { throw std::runtime_error("interrupted"); }),
               std::runtime_error);
}

TEST(PendingRead, DecodesAfterThePrefixOnThePool) {
  TempDir dir;
  const std::string path = dir.File("x.bagz");
  const std::vector<std::string> records = testing::MakeRecords(50);
  testing::WriteTailBag(path, records);
  const auto bag = OpenBag({path});
  const std::vector<uint64_t> indices = {4, 40, 4, 0};
  auto pending = PendingRead::Start(bag, indices, "PREFIX");
  ASSERT_TRUE(pending->WaitFor(60000));
  const DecodedRecords& result = pending->Result();
  ASSERT_EQ(result.offsets.size(), indices.size() + 1);
  EXPECT_EQ(result.data.substr(0, 6), "PREFIX");
  EXPECT_EQ(result.offsets[0], 6u);
  for (size_t k = 0; k < indices.size(); ++k) {
    EXPECT_EQ(result.data.substr(result.offsets[k], result.offsets[k + 1] - result.offsets[k]),
              records[indices[k]]);
  }
  EXPECT_EQ(result.offsets.back(), result.data.size());

  // A failing read reports its error through Result().
  auto failing = PendingRead::Start(bag, {0, 50});
  ASSERT_TRUE(failing->WaitFor(60000));
  try {
    failing->Result();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kOutOfRange);
  }
}

TEST(MappedRun, ZeroCopyOnlyForRawMappedNeighboursOfOneShard) {
  TempDir dir;
  const std::vector<std::string> records = testing::MakeRecords(20);
  const std::string a = dir.File("a.bag");
  const std::string b = dir.File("b.bag");
  testing::WriteTailBag(a, {records.begin(), records.begin() + 10});
  testing::WriteTailBag(b, {records.begin() + 10, records.end()});
  const auto bag = OpenBag({a, b});

  const char* data = nullptr;
  std::vector<uint64_t> offsets;
  ASSERT_TRUE(MappedRun(*bag, 12, 5, &data, offsets));
  ASSERT_EQ(offsets.size(), 6u);
  EXPECT_EQ(offsets[0], 0u);
  for (size_t k = 0; k < 5; ++k) {
    EXPECT_EQ(std::string(data + offsets[k], offsets[k + 1] - offsets[k]), records[12 + k]);
  }
  EXPECT_FALSE(MappedRun(*bag, 8, 4, &data, offsets));   // spans two shards
  EXPECT_FALSE(MappedRun(*bag, 18, 5, &data, offsets));  // past the end
  EXPECT_FALSE(MappedRun(*bag, 0, 0, &data, offsets));

  OpenOptions unmapped;
  unmapped.cache = CachePolicy::kDropAfterRead;
  EXPECT_FALSE(MappedRun(*OpenBag({a}, unmapped), 0, 3, &data, offsets));
  const std::string z = dir.File("z.bagz");
  testing::WriteTailBag(z, records);
  EXPECT_FALSE(MappedRun(*OpenBag({z}), 0, 3, &data, offsets));
}

TEST(VisitRecords, VisitsTheViewInOrderAndStops) {
  TempDir dir;
  const std::string path = dir.File("x.bagz");
  const std::vector<std::string> records = testing::MakeRecords(100);
  testing::WriteTailBag(path, records);
  const auto bag = OpenBag({path});
  const View view{99, -2, 50};  // 99, 97, ..., 1

  std::vector<uint64_t> visited;
  VisitRecords(
      bag, view, 0, view.length, [](uint64_t size) { return size > 0; },
      [&](uint64_t j, const char* data, uint64_t size) {
        EXPECT_EQ(std::string(data, size), records[view.Global(j)]);
        visited.push_back(j);
        return true;
      },
      nullptr);
  std::vector<uint64_t> expected;
  for (uint64_t j = 0; j < view.length; ++j) {
    if (!records[view.Global(j)].empty()) expected.push_back(j);
  }
  EXPECT_EQ(visited, expected);

  visited.clear();
  VisitRecords(
      bag, view, 10, 40, [](uint64_t) { return true; },
      [&](uint64_t j, const char*, uint64_t) {
        visited.push_back(j);
        return visited.size() < 3;
      },
      nullptr);
  EXPECT_EQ(visited, (std::vector<uint64_t>{10, 11, 12}));
}

TEST(VisitChunks, HandsOverEveryRecordOfTheViewInOrderAndStops) {
  TempDir dir;
  const std::string path = dir.File("x.bagz");
  const std::vector<std::string> records = testing::MakeRecords(100);
  testing::WriteTailBag(path, records);
  const auto bag = OpenBag({path});
  const View view{99, -2, 50};  // 99, 97, ..., 1

  std::vector<uint64_t> visited;
  size_t calls = 0;
  VisitChunks(
      bag, view, 5, 45,
      [&](uint64_t first, size_t count, const char* const* data, const uint64_t* sizes) {
        ++calls;
        for (size_t k = 0; k < count; ++k) {
          EXPECT_EQ(std::string(data[k], sizes[k]), records[view.Global(first + k)]);
          visited.push_back(first + k);
        }
        return false;  // stops after this chunk
      },
      nullptr);
  EXPECT_EQ(calls, 1u);
  std::vector<uint64_t> expected(40);
  std::iota(expected.begin(), expected.end(), 5);
  EXPECT_EQ(visited, expected);  // the records fit one chunk
}

}  // namespace
}  // namespace sackli

namespace sackli {
namespace {

TEST(StableOrderTest, MatchesAStableComparisonSort) {
  std::mt19937_64 random(7);
  for (size_t n : {0, 1, 2, 100, 511, 512, 513, 5000, 70000}) {
    for (uint64_t range : {uint64_t{3}, uint64_t{1000}, uint64_t{1} << 40, ~uint64_t{0}}) {
      std::vector<uint64_t> keys(n);
      for (uint64_t& key : keys) key = range == ~uint64_t{0} ? random() : random() % range;
      std::vector<uint32_t> expected(n);
      std::iota(expected.begin(), expected.end(), 0);
      std::stable_sort(expected.begin(), expected.end(),
                       [&](uint32_t a, uint32_t b) { return keys[a] < keys[b]; });
      std::vector<uint32_t> order;
      StableOrder(keys, order);
      ASSERT_EQ(order, expected) << n << " keys below " << range;
    }
  }
}

}  // namespace
}  // namespace sackli
