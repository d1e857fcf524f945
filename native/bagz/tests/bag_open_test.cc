// Bag::Open: how many shards open at once, for local and remote openers.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "bagz/bag.h"
#include "bagz/tests/test_bags.h"

namespace sackli {
namespace {

using testing::TempDir;

// Counts the opens running at once. With `gather` > 0 each open waits
// until that many run together (or, as a guard against a hang, a few
// seconds pass): the count then shows how many the caller runs at once.
class ConcurrentOpens {
 public:
  explicit ConcurrentOpens(size_t gather) : gather_(gather) {}

  SourceOpener Wrap(const SourceOpener& inner, bool remote) {
    return SourceOpener{
        [this, inner](const std::string& path) {
          Enter();
          auto source = inner.open(path);
          Leave();
          return source;
        },
        inner.exists, remote};
  }

  size_t most() const { return most_; }

 private:
  void Enter() {
    std::unique_lock<std::mutex> lock(mutex_);
    ++running_;
    most_ = std::max(most_, running_);
    if (gather_ > 0) {
      changed_.notify_all();
      changed_.wait_for(lock, std::chrono::seconds(5),
                        [this] { return running_ >= gather_ || released_; });
      released_ = true;  // this round is complete: later opens need not wait
    } else {
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  void Leave() {
    std::lock_guard<std::mutex> lock(mutex_);
    --running_;
  }

  const size_t gather_;
  std::mutex mutex_;
  std::condition_variable changed_;
  size_t running_ = 0;
  size_t most_ = 0;
  bool released_ = false;
};

std::vector<ShardPath> WriteShards(const TempDir& dir, size_t n) {
  std::vector<ShardPath> shards;
  for (size_t i = 0; i < n; ++i) {
    const std::string path = dir.File("s" + std::to_string(i) + ".bag");
    testing::WriteTailBag(path, {"record " + std::to_string(i)});
    shards.push_back({path, Codec::None()});
  }
  return shards;
}

TEST(BagOpen, AnOpenerOfRemoteSourcesOpensRemoteParallelismShardsAtOnce) {
  TempDir dir;
  const std::vector<ShardPath> shards = WriteShards(dir, 16);
  ConcurrentOpens opens(/*gather=*/8);
  BagOptions options;
  options.max_parallelism = 2;
  options.remote_parallelism = 8;
  const SourceOpener local = LocalOpener(AccessPattern::kSystem, CachePolicy::kSystem);
  const auto bag = Bag::Open(shards, options, opens.Wrap(local, /*remote=*/true));
  EXPECT_EQ(bag->size(), 16u);
  EXPECT_EQ(opens.most(), 8u);
}

TEST(BagOpen, ALocalOpenerStaysOnMaxParallelismThreads) {
  TempDir dir;
  const std::vector<ShardPath> shards = WriteShards(dir, 16);
  ConcurrentOpens opens(/*gather=*/0);
  BagOptions options;
  options.max_parallelism = 2;
  options.remote_parallelism = 8;
  const SourceOpener local = LocalOpener(AccessPattern::kSystem, CachePolicy::kSystem);
  const auto bag = Bag::Open(shards, options, opens.Wrap(local, /*remote=*/false));
  EXPECT_EQ(bag->size(), 16u);
  EXPECT_LE(opens.most(), 2u);
}

}  // namespace
}  // namespace sackli
