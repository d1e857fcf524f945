#include "bagz/thread_pool.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <system_error>
#include <vector>

namespace sackli {
namespace {

// Pool threads decompress, and for remote files run the storage clients'
// Python code. glibc gives a new thread the main thread's stack limit (8 MiB
// unless ulimit -s says otherwise); musl gives 128 KiB and macOS 512 KiB,
// too little for that Python code. Pool threads get at least this.
constexpr size_t kMinStackBytes = size_t{8} << 20;

// Starts a detached thread running run(arg); throws std::system_error as
// std::thread would when the system refuses.
void StartDetached(void* (*run)(void*), void* arg) {
  pthread_attr_t attr;
  int error = ::pthread_attr_init(&attr);
  if (error != 0) {
    throw std::system_error(error, std::generic_category(), "pthread_attr_init");
  }
  size_t stack = 0;
  if (::pthread_attr_getstacksize(&attr, &stack) != 0 || stack < kMinStackBytes) {
    ::pthread_attr_setstacksize(&attr, kMinStackBytes);
  }
  ::pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_t thread;
  error = ::pthread_create(&thread, &attr, run, arg);
  ::pthread_attr_destroy(&attr);
  if (error != 0) {
    throw std::system_error(error, std::generic_category(), "pthread_create");
  }
}

}  // namespace

struct ThreadPool::State {
  std::mutex mutex;
  std::condition_variable wake;
  std::deque<std::function<void()>> queue;
  size_t threads = 0;

  void EnsureThreads(size_t wanted) {
    wanted = std::min(wanted, kMaxThreads);
    std::lock_guard<std::mutex> lock(mutex);
    while (threads < wanted) {
      // Workers never exit: the pool lives until the process does, so a
      // read-ahead task still running at interpreter exit finds it intact.
      StartDetached(
          [](void* state) -> void* {
            static_cast<State*>(state)->WorkerLoop();
            return nullptr;
          },
          this);
      ++threads;
    }
  }

  void WorkerLoop() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mutex);
        wake.wait(lock, [this] { return !queue.empty(); });
        task = std::move(queue.front());
        queue.pop_front();
      }
      task();
    }
  }

  void Push(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      queue.push_back(std::move(task));
    }
    wake.notify_one();
  }
};

namespace {

// Leaked on purpose: destroying it at exit would race with detached workers.
ThreadPool::State* g_state = nullptr;
std::once_flag g_once;

void ResetAfterFork() {
  // The child has only the forking thread; the parent's state (and any lock
  // held in it) is abandoned, and a new pool starts empty.
  g_state = new ThreadPool::State();
}

ThreadPool::State& CurrentState() {
  std::call_once(g_once, [] {
    g_state = new ThreadPool::State();
    ::pthread_atfork(nullptr, nullptr, &ResetAfterFork);
  });
  return *g_state;
}

// Shared by the caller and the helpers of one ParallelFor.
struct ForLoop {
  explicit ForLoop(size_t n, std::function<void(size_t)> fn)
      : n(n), fn(std::move(fn)) {}
  const size_t n;
  const std::function<void(size_t)> fn;
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex mutex;
  std::condition_variable done;
  size_t active_helpers = 0;
  std::exception_ptr error;

  void RunItems() {
    for (;;) {
      if (failed.load(std::memory_order_relaxed)) return;
      const size_t i = next.fetch_add(1, std::memory_order_relaxed);
      if (i >= n) return;
      try {
        fn(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!error) error = std::current_exception();
        failed.store(true, std::memory_order_relaxed);
      }
    }
  }
};

}  // namespace

ThreadPool& ThreadPool::Shared() {
  static ThreadPool* pool = new ThreadPool();
  return *pool;
}

void ThreadPool::ParallelFor(size_t n, size_t parallelism,
                             const std::function<void(size_t)>& fn) {
  if (n == 0) return;
  const size_t helpers = std::min(n, std::max<size_t>(parallelism, 1)) - 1;
  if (helpers == 0) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  State& state = CurrentState();
  state.EnsureThreads(helpers);
  auto loop = std::make_shared<ForLoop>(n, fn);
  for (size_t h = 0; h < helpers; ++h) {
    state.Push([loop] {
      {
        std::lock_guard<std::mutex> lock(loop->mutex);
        ++loop->active_helpers;
      }
      loop->RunItems();
      {
        std::lock_guard<std::mutex> lock(loop->mutex);
        --loop->active_helpers;
      }
      loop->done.notify_all();
    });
  }
  loop->RunItems();
  // Every item has been claimed; wait for helpers still running one. A helper
  // that starts later finds nothing left and only touches `loop`, which it
  // keeps alive itself.
  std::unique_lock<std::mutex> lock(loop->mutex);
  loop->done.wait(lock, [&] { return loop->active_helpers == 0; });
  if (loop->error) std::rethrow_exception(loop->error);
}

void ThreadPool::Submit(std::function<void()> task, size_t parallelism) {
  State& state = CurrentState();
  state.EnsureThreads(std::max<size_t>(parallelism, 1));
  state.Push(std::move(task));
}

size_t ThreadPool::num_threads() const {
  State& state = CurrentState();
  std::lock_guard<std::mutex> lock(state.mutex);
  return state.threads;
}

}  // namespace sackli
