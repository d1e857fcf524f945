#include "bagz/descriptor_cache.h"

#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <vector>

#include "bagz/errors.h"

namespace sackli {
namespace {

size_t DefaultCapacity() {
  if (const char* set = std::getenv("SACKLI_MAX_OPEN_FILES")) {
    const long value = std::strtol(set, nullptr, 10);
    if (value > 0) return static_cast<size_t>(value);
  }
  struct rlimit limit;
  rlim_t soft = 1024;
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    soft = limit.rlim_cur;
  }
  // A quarter: the rest stays for Python, sockets and the files this
  // process maps or writes.
  return std::clamp<size_t>(static_cast<size_t>(soft / 4), 16, 4096);
}

}  // namespace

Fd::~Fd() {
  if (fd_ >= 0) ::close(fd_);
}

DescriptorCache::DescriptorCache(size_t capacity)
    : capacity_(std::max<size_t>(capacity, 1)) {}

DescriptorCache& DescriptorCache::Shared() {
  // Never destroyed: files may close during interpreter shutdown.
  static DescriptorCache* cache = [] {
    auto* made = new DescriptorCache(DefaultCapacity());
    // A fork while another thread holds the lock would leave the child's
    // copy locked for ever (a forking loader's workers would hang on their
    // first read): the forking thread holds it across the fork instead.
    // The child keeps the inherited descriptors, which pread shares safely.
    ::pthread_atfork([] { Shared().mu_.lock(); }, [] { Shared().mu_.unlock(); },
                     [] { Shared().mu_.unlock(); });
    return made;
  }();
  return *cache;
}

void DescriptorCache::InsertLocked(const void* owner, std::shared_ptr<const Fd> fd,
                                   std::vector<std::shared_ptr<const Fd>>& closed) {
  lru_.emplace_front(owner, std::move(fd));
  where_[owner] = lru_.begin();
  while (lru_.size() > capacity_) {
    closed.push_back(std::move(lru_.back().second));
    where_.erase(lru_.back().first);
    lru_.pop_back();
  }
}

void DescriptorCache::Put(const void* owner, std::shared_ptr<const Fd> fd) {
  std::vector<std::shared_ptr<const Fd>> closed;
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = where_.find(owner);
  if (it != where_.end()) {
    closed.push_back(std::move(it->second->second));
    lru_.erase(it->second);
    where_.erase(it);
  }
  InsertLocked(owner, std::move(fd), closed);
}

std::shared_ptr<const Fd> DescriptorCache::Get(
    const void* owner, const std::function<int()>& reopen) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = where_.find(owner);
    if (it != where_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      return it->second->second;
    }
  }
  std::shared_ptr<const Fd> fd;
  try {
    fd = std::make_shared<const Fd>(reopen());
  } catch (const Error& e) {
    if (e.errno_value() != EMFILE && e.errno_value() != ENFILE) throw;
    // The process ran out of descriptors: give back the idle ones, once.
    std::list<Entry> idle;
    {
      std::lock_guard<std::mutex> lock(mu_);
      idle.swap(lru_);
      where_.clear();
    }
    idle.clear();
    fd = std::make_shared<const Fd>(reopen());
  }
  std::vector<std::shared_ptr<const Fd>> closed;
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = where_.find(owner);
  if (it != where_.end()) return it->second->second;  // another thread won
  InsertLocked(owner, fd, closed);
  return fd;
}

void DescriptorCache::Forget(const void* owner) {
  std::shared_ptr<const Fd> fd;
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = where_.find(owner);
  if (it == where_.end()) return;
  fd = std::move(it->second->second);
  lru_.erase(it->second);
  where_.erase(it);
}

size_t DescriptorCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lru_.size();
}

}  // namespace sackli
