// The process-wide worker pool that runs batch reads, decompression and
// compression. Threads are created lazily, up to the largest parallelism any
// caller asked for, and reused across calls; none is created per call.
// After fork() the child starts with a fresh, empty pool (the parent's
// threads do not exist there).
#pragma once

#include <cstddef>
#include <functional>

namespace sackli {

class ThreadPool {
 public:
  // The pool of this process.
  static ThreadPool& Shared();

  // Runs fn(0) ... fn(n - 1) on at most `parallelism` threads, the calling
  // thread included, and returns when all have run. The first exception
  // thrown stops the remaining calls from starting and is rethrown here.
  // Safe to call from inside a pool task (the caller always makes progress).
  void ParallelFor(size_t n, size_t parallelism,
                   const std::function<void(size_t)>& fn);

  // Runs `task` on a pool thread, without waiting. `task` must not throw.
  // A task that itself calls ParallelFor with `parallelism` gets enough
  // threads for its helpers to run beside it (it occupies one itself).
  void Submit(std::function<void()> task, size_t parallelism = 1);

  // Threads currently in the pool.
  size_t num_threads() const;

  // The most threads the pool will ever hold.
  static constexpr size_t kMaxThreads = 256;

  struct State;  // the implementation, replaced wholesale after fork()

 private:
  ThreadPool() = default;
};

}  // namespace sackli
