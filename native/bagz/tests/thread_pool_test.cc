// The shared thread pool and background tasks: results, errors, nesting, and
// a working pool in the child of fork().
#include "bagz/thread_pool.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "bagz/read_plan.h"

namespace sackli {
namespace {

TEST(ThreadPool, ParallelForRunsEveryItemOnce) {
  for (size_t parallelism : {1, 2, 8}) {
    std::vector<std::atomic<int>> runs(1000);
    std::vector<uint64_t> squares(1000);
    ThreadPool::Shared().ParallelFor(1000, parallelism, [&](size_t i) {
      ++runs[i];
      squares[i] = uint64_t{i} * i;
    });
    for (size_t i = 0; i < 1000; ++i) {
      ASSERT_EQ(runs[i].load(), 1) << "item " << i;
      ASSERT_EQ(squares[i], uint64_t{i} * i);
    }
  }
  ThreadPool::Shared().ParallelFor(0, 4, [](size_t) { FAIL() << "ran an item of 0"; });
}

TEST(ThreadPool, UsesSeveralThreads) {
  // Items that wait for each other can only finish on 4 threads at once.
  std::mutex mutex;
  std::condition_variable all_in;
  int arrived = 0;
  ThreadPool::Shared().ParallelFor(4, 4, [&](size_t) {
    std::unique_lock<std::mutex> lock(mutex);
    ++arrived;
    all_in.notify_all();
    ASSERT_TRUE(all_in.wait_for(lock, std::chrono::seconds(30), [&] { return arrived == 4; }));
  });
  EXPECT_GE(ThreadPool::Shared().num_threads(), 3u);
  EXPECT_LE(ThreadPool::Shared().num_threads(), ThreadPool::kMaxThreads);
}

TEST(ThreadPool, FirstExceptionPropagatesAndStopsTheRest) {
  for (size_t parallelism : {1, 4}) {
    std::atomic<size_t> started{0};
    try {
      ThreadPool::Shared().ParallelFor(100000, parallelism, [&](size_t i) {
        ++started;
        if (i == 37) throw std::runtime_error("item 37 failed");
      });
      FAIL() << "no exception";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "item 37 failed");
    }
    EXPECT_LT(started.load(), 100000u);
  }
}

TEST(ThreadPool, NestedParallelForCompletes) {
  std::vector<std::vector<int>> cells(16, std::vector<int>(64, 0));
  ThreadPool::Shared().ParallelFor(16, 4, [&](size_t row) {
    ThreadPool::Shared().ParallelFor(64, 4, [&](size_t col) {
      cells[row][col] = static_cast<int>(row * 64 + col);
    });
  });
  for (size_t row = 0; row < 16; ++row) {
    for (size_t col = 0; col < 64; ++col) ASSERT_EQ(cells[row][col], row * 64 + col);
  }
}

TEST(ThreadPool, ChildOfForkGetsAWorkingPool) {
  // The parent's workers exist (and may be busy) when it forks.
  ThreadPool::Shared().ParallelFor(8, 4, [](size_t) {});
  std::atomic<bool> stop{false};
  auto busy = BackgroundTask::Start(
      [&] {
        while (!stop) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      },
      1);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::alarm(60);  // a hang is a failure, not a stuck test run
    std::atomic<uint64_t> sum{0};
    ThreadPool::Shared().ParallelFor(1000, 4, [&](size_t i) { sum += i; });
    auto task = BackgroundTask::Start([&] { sum += 1; }, 2);
    const bool finished = task->WaitFor(30000);
    ::_exit(finished && sum == 499500 + 1 && ThreadPool::Shared().num_threads() >= 1 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  stop = true;
  ASSERT_TRUE(busy->WaitFor(30000));
  ASSERT_TRUE(WIFEXITED(status)) << "child died with signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(BackgroundTask, WaitForTimesOutThenFinishes) {
  std::mutex mutex;
  std::condition_variable released;
  bool go = false;
  auto task = BackgroundTask::Start(
      [&] {
        std::unique_lock<std::mutex> lock(mutex);
        released.wait(lock, [&] { return go; });
      },
      1);
  EXPECT_FALSE(task->WaitFor(20));
  {
    std::lock_guard<std::mutex> lock(mutex);
    go = true;
  }
  released.notify_all();
  ASSERT_TRUE(task->WaitFor(30000));
  EXPECT_NO_THROW(task->RethrowIfFailed());
}

TEST(BackgroundTask, RethrowsTheWorksException) {
  auto task = BackgroundTask::Start([] { throw std::invalid_argument("bad work"); }, 1);
  ASSERT_TRUE(task->WaitFor(30000));
  EXPECT_THROW(task->RethrowIfFailed(), std::invalid_argument);
}

TEST(BackgroundTask, WorkMayRunParallelFor) {
  std::atomic<int> items{0};
  auto task = BackgroundTask::Start(
      [&] { ThreadPool::Shared().ParallelFor(100, 4, [&](size_t) { ++items; }); }, 4);
  ASSERT_TRUE(task->WaitFor(30000));
  task->RethrowIfFailed();
  EXPECT_EQ(items.load(), 100);
}

}  // namespace
}  // namespace sackli
