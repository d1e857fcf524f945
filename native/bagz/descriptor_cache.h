// The open file descriptors of files read with pread, kept in one
// process-wide least-recently-used set, so a reader of more files than the
// process may hold open (RLIMIT_NOFILE, often 1024) still reads them all: a
// file whose descriptor was closed is opened again on its next read.
//
// Capacity: a quarter of the soft RLIMIT_NOFILE at first use (at least 16,
// at most 4096), or SACKLI_MAX_OPEN_FILES when set. A descriptor in use by a
// read stays open until that read ends, even if evicted meanwhile, so the
// number open at once is at most the capacity plus the reads in flight.
//
// Thread-safe.
#pragma once

#include <cstddef>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace sackli {

// Owns a file descriptor; closes it when destroyed.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd();
  int get() const { return fd_; }
  // Gives the descriptor up: the caller closes it.
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

class DescriptorCache {
 public:
  explicit DescriptorCache(size_t capacity);
  // The process's cache.
  static DescriptorCache& Shared();

  // Keeps `fd` as the descriptor of `owner` (a file object's address).
  void Put(const void* owner, std::shared_ptr<const Fd> fd);
  // The descriptor of `owner`: the kept one, else reopen() (which throws on
  // failure), kept from now on. An open that fails with EMFILE or ENFILE is
  // retried once after closing every idle descriptor kept.
  std::shared_ptr<const Fd> Get(const void* owner,
                                const std::function<int()>& reopen);
  // Closes `owner`'s descriptor, if kept (its file is going away).
  void Forget(const void* owner);

  size_t capacity() const { return capacity_; }
  size_t size() const;

 private:
  using Entry = std::pair<const void*, std::shared_ptr<const Fd>>;
  // Under mu_: inserts at the front, evicting from the back past capacity.
  // The evicted descriptors go into `closed`, to be closed outside the lock.
  void InsertLocked(const void* owner, std::shared_ptr<const Fd> fd,
                    std::vector<std::shared_ptr<const Fd>>& closed);

  const size_t capacity_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // most recently used first
  std::unordered_map<const void*, std::list<Entry>::iterator> where_;
};

}  // namespace sackli
