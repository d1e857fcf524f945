#include "bagz/block_cache.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "bagz/crc32c.h"
#include "bagz/errors.h"

#ifndef O_CLOEXEC
#define O_CLOEXEC 0
#endif

namespace sackli {
namespace {

constexpr char kMagic[8] = {'s', 'a', 'c', 'k', 'l', 'i', '\0', 'C'};
// magic, format, chunk bytes, payload bytes, key, block, chunk count.
constexpr size_t kFixedHeaderBytes = 8 + 4 + 4 + 8 + kCacheKeyBytes + 8 + 4;
constexpr size_t kSealBytes = 8;
// Ranges whose chunks span at most this much are read in one pread into a
// per-thread buffer (one call: a call costs about what 4-8 KiB of copying
// does); longer ones read their whole chunks straight into the destination
// and only the partial chunks at their ends into the buffer.
constexpr size_t kScratchBytes = 64 * 1024;
constexpr size_t kMaxDamaged = 1024;

uint64_t Chunks(uint64_t length) {
  return (length + kCacheChunkBytes - 1) / kCacheChunkBytes;
}

void Put32(std::string& out, uint32_t value) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(value >> (8 * i)));
}

void Put64(std::string& out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(value >> (8 * i)));
}

uint32_t Get32(const char* p) {
  uint32_t value = 0;
  for (int i = 3; i >= 0; --i) value = (value << 8) | static_cast<unsigned char>(p[i]);
  return value;
}

uint64_t Get64(const char* p) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | static_cast<unsigned char>(p[i]);
  return value;
}

// Reads exactly n bytes at offset; false on an error or an end of file (the
// entry is shorter than its header says, or unreadable: a miss either way).
bool PreadAll(int fd, char* dst, size_t n, uint64_t offset) {
  while (n > 0) {
    const ssize_t got = ::pread(fd, dst, n, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    dst += got;
    offset += static_cast<uint64_t>(got);
    n -= static_cast<size_t>(got);
  }
  return true;
}

int64_t NowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Marks an entry used now. A read-only cache still serves: errors ignored.
void Touch(int fd) { (void)::futimens(fd, nullptr); }

char* Scratch() {
  thread_local std::unique_ptr<char[]> scratch(new char[kScratchBytes]);
  return scratch.get();
}

// Every live BlockCache, for the fork handlers: leaked on purpose (caches
// may outlive static destruction in detached threads).
std::mutex& RegistryMutex() {
  static std::mutex* mu = new std::mutex();
  return *mu;
}
std::vector<BlockCache*>& Registry() {
  static std::vector<BlockCache*>* caches = new std::vector<BlockCache*>();
  return *caches;
}

// Around fork(): the forking thread takes every cache's lock, so the child
// inherits no state half-changed by a thread it does not have; the child
// then forgets the open entries (the threads that shared them are gone).
void BeforeFork() {
  RegistryMutex().lock();
  for (BlockCache* cache : Registry()) cache->LockForFork();
}
void AfterForkInParent() {
  for (BlockCache* cache : Registry()) cache->UnlockAfterFork(false);
  RegistryMutex().unlock();
}
void AfterForkInChild() {
  for (BlockCache* cache : Registry()) cache->UnlockAfterFork(true);
  RegistryMutex().unlock();
}

void Register(BlockCache* cache) {
  static std::once_flag once;
  std::call_once(once, [] {
    ::pthread_atfork(&BeforeFork, &AfterForkInParent, &AfterForkInChild);
  });
  std::lock_guard<std::mutex> lock(RegistryMutex());
  Registry().push_back(cache);
}

void Unregister(BlockCache* cache) {
  std::lock_guard<std::mutex> lock(RegistryMutex());
  auto& caches = Registry();
  caches.erase(std::remove(caches.begin(), caches.end(), cache), caches.end());
}

}  // namespace

size_t CacheHeaderBytes(uint64_t length) {
  return kFixedHeaderBytes + 4 * Chunks(length) + kSealBytes;
}

std::string EncodeCacheHeader(const CacheSecret& secret, const CacheKey& key,
                              uint64_t block, const char* payload, size_t length) {
  std::string head;
  head.reserve(CacheHeaderBytes(length));
  head.append(kMagic, sizeof(kMagic));
  Put32(head, kCacheFormat);
  Put32(head, static_cast<uint32_t>(kCacheChunkBytes));
  Put64(head, length);
  head.append(reinterpret_cast<const char*>(key.data()), key.size());
  Put64(head, block);
  Put32(head, static_cast<uint32_t>(Chunks(length)));
  for (size_t at = 0; at < length; at += kCacheChunkBytes) {
    Put32(head, Crc32c(payload + at, std::min(kCacheChunkBytes, length - at)));
  }
  Put64(head, SipHash24(secret, head.data(), head.size()));
  return head;
}

struct BlockCache::Entry {
  Entry(int fd, uint64_t device, uint64_t inode, uint64_t length,
        std::vector<uint32_t> crcs)
      : fd(fd), device(device), inode(inode), length(length),
        crcs(std::move(crcs)), touched(NowNanos()) {}
  ~Entry() { ::close(fd); }

  const int fd;
  const uint64_t device;
  const uint64_t inode;
  const uint64_t length;
  const std::vector<uint32_t> crcs;
  std::atomic<int64_t> touched;
};

size_t BlockCache::SlotHash::operator()(const Slot& slot) const {
  uint64_t bits;
  std::memcpy(&bits, slot.key.data(), sizeof(bits));  // a SHA-256: uniform
  return static_cast<size_t>(bits ^ (slot.block * 0x9E3779B97F4A7C15ull));
}

BlockCache::BlockCache(std::string root, const CacheSecret& secret, size_t max_open,
                       int64_t touch_nanos)
    : root_(std::move(root)),
      secret_(secret),
      max_open_(std::max<size_t>(max_open, 1)),
      touch_nanos_(touch_nanos) {
  Register(this);
}

BlockCache::~BlockCache() { Unregister(this); }

std::string BlockCache::EntryPath(const CacheKey& key, uint64_t block) const {
  static const char kHex[] = "0123456789abcdef";
  std::string name;
  name.reserve(2 * kCacheKeyBytes);
  for (unsigned char byte : key) {
    name.push_back(kHex[byte >> 4]);
    name.push_back(kHex[byte & 15]);
  }
  return root_ + "/" + name.substr(0, 2) + "/" + name + "-" + std::to_string(block);
}

size_t BlockCache::open_entries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return open_.size();
}

bool BlockCache::Read(const CacheKey& key, uint64_t block, uint64_t length,
                      uint64_t lo, uint64_t hi, char* dst) {
  if (lo > hi || hi > length) {
    ThrowInvalidArgument("cache read of [" + std::to_string(lo) + ", " +
                         std::to_string(hi) + ") of a block of " +
                         std::to_string(length) + " bytes");
  }
  if (lo == hi) return true;
  const Slot slot{key, block};
  std::shared_ptr<Entry> entry = Acquire(slot, length);
  if (entry == nullptr) return false;
  if (!ReadChecked(*entry, lo, hi, dst)) {
    Discard(slot, entry);
    NoteDamaged(slot, entry->device, entry->inode);
    return false;
  }
  MaybeTouch(*entry);
  return true;
}

std::shared_ptr<BlockCache::Entry> BlockCache::Acquire(const Slot& slot,
                                                       uint64_t length) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto found = open_.find(slot);
    if (found != open_.end()) {
      lru_.splice(lru_.begin(), lru_, found->second);
      const std::shared_ptr<Entry>& entry = found->second->second;
      // Another length for the same key and block is asked only of another
      // object's version: not this entry.
      return entry->length == length ? entry : nullptr;
    }
  }
  std::shared_ptr<Entry> opened = Open(slot, length);
  if (opened == nullptr) return nullptr;
  std::vector<std::shared_ptr<Entry>> closing;  // closed outside the lock
  std::lock_guard<std::mutex> lock(mu_);
  auto found = open_.find(slot);
  if (found != open_.end()) {  // another thread opened it meanwhile
    closing.push_back(std::move(opened));
    return found->second->second;
  }
  lru_.emplace_front(slot, opened);
  open_.emplace(slot, lru_.begin());
  while (open_.size() > max_open_) {
    closing.push_back(std::move(lru_.back().second));
    open_.erase(lru_.back().first);
    lru_.pop_back();
  }
  return opened;
}

std::shared_ptr<BlockCache::Entry> BlockCache::Open(const Slot& slot,
                                                    uint64_t length) {
  const std::string path = EntryPath(slot.key, slot.block);
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    // A symbolic link (ELOOP; EMLINK on some BSDs) is foreign: noted for
    // deletion like a damaged entry. Anything else (mostly ENOENT) is absent.
    struct stat link;
    if ((errno == ELOOP || errno == EMLINK) && ::lstat(path.c_str(), &link) == 0) {
      NoteDamaged(slot, static_cast<uint64_t>(link.st_dev),
                  static_cast<uint64_t>(link.st_ino));
    }
    return nullptr;
  }
  struct stat status;
  if (::fstat(fd, &status) != 0) {
    ::close(fd);
    return nullptr;
  }
  const uint64_t device = static_cast<uint64_t>(status.st_dev);
  const uint64_t inode = static_cast<uint64_t>(status.st_ino);
  const size_t head_bytes = CacheHeaderBytes(length);
  std::vector<uint32_t> crcs;
  bool good = S_ISREG(status.st_mode) &&
              static_cast<uint64_t>(status.st_size) == head_bytes + length;
  if (good) {
    std::string head(head_bytes, '\0');
    // The seal first: it checks the header against damage and against
    // entries made without the secret.
    good = PreadAll(fd, head.data(), head_bytes, 0) &&
           Get64(head.data() + head_bytes - kSealBytes) ==
               SipHash24(secret_, head.data(), head_bytes - kSealBytes);
    const char* p = head.data();
    good = good && std::memcmp(p, kMagic, sizeof(kMagic)) == 0 &&
           Get32(p + 8) == kCacheFormat && Get32(p + 12) == kCacheChunkBytes &&
           Get64(p + 16) == length &&
           std::memcmp(p + 24, slot.key.data(), kCacheKeyBytes) == 0 &&
           Get64(p + 24 + kCacheKeyBytes) == slot.block &&
           Get32(p + 32 + kCacheKeyBytes) == Chunks(length);
    if (good) {
      crcs.resize(Chunks(length));
      for (size_t i = 0; i < crcs.size(); ++i) {
        crcs[i] = Get32(p + kFixedHeaderBytes + 4 * i);
      }
    }
  }
  if (!good) {
    ::close(fd);
    NoteDamaged(slot, device, inode);
    return nullptr;
  }
  Touch(fd);
  return std::make_shared<Entry>(fd, device, inode, length, std::move(crcs));
}

bool BlockCache::ReadChecked(const Entry& entry, uint64_t lo, uint64_t hi,
                             char* dst) const {
  const uint64_t first = lo / kCacheChunkBytes;
  const uint64_t last = (hi - 1) / kCacheChunkBytes;
  const uint64_t start = first * kCacheChunkBytes;
  const uint64_t end = std::min(entry.length, (last + 1) * kCacheChunkBytes);
  const uint64_t base = CacheHeaderBytes(entry.length);
  auto chunk_end = [&](uint64_t chunk) {
    return std::min(entry.length, (chunk + 1) * kCacheChunkBytes);
  };
  auto check = [&](uint64_t chunk, const char* data) {
    const uint64_t from = chunk * kCacheChunkBytes;
    return Crc32c(data, chunk_end(chunk) - from) == entry.crcs[chunk];
  };
  if (end - start <= kScratchBytes) {
    char* scratch = Scratch();
    if (!PreadAll(entry.fd, scratch, end - start, base + start)) return false;
    for (uint64_t chunk = first; chunk <= last; ++chunk) {
      if (!check(chunk, scratch + (chunk * kCacheChunkBytes - start))) return false;
    }
    std::memcpy(dst, scratch + (lo - start), hi - lo);
    return true;
  }
  // Whole chunks straight into dst; a chunk cut by lo or hi through the
  // scratch buffer (at most one at each end).
  uint64_t inner_first = first;
  uint64_t inner_last = last;  // inclusive; empty when inner_first > inner_last
  char* scratch = Scratch();
  if (lo != start) {
    const uint64_t from = first * kCacheChunkBytes;
    if (!PreadAll(entry.fd, scratch, chunk_end(first) - from, base + from) ||
        !check(first, scratch)) {
      return false;
    }
    std::memcpy(dst, scratch + (lo - from), chunk_end(first) - lo);
    ++inner_first;
  }
  if (hi != chunk_end(last)) {
    const uint64_t from = last * kCacheChunkBytes;
    if (!PreadAll(entry.fd, scratch, chunk_end(last) - from, base + from) ||
        !check(last, scratch)) {
      return false;
    }
    std::memcpy(dst + (from - lo), scratch, hi - from);
    --inner_last;
  }
  if (inner_first <= inner_last) {
    const uint64_t from = inner_first * kCacheChunkBytes;
    const uint64_t to = chunk_end(inner_last);
    char* out = dst + (from - lo);
    if (!PreadAll(entry.fd, out, to - from, base + from)) return false;
    for (uint64_t chunk = inner_first; chunk <= inner_last; ++chunk) {
      if (!check(chunk, out + (chunk - inner_first) * kCacheChunkBytes)) return false;
    }
  }
  return true;
}

void BlockCache::MaybeTouch(Entry& entry) const {
  const int64_t now = NowNanos();
  int64_t last = entry.touched.load(std::memory_order_relaxed);
  if (now - last < touch_nanos_) return;
  // One thread touches; the others see the new time.
  if (entry.touched.compare_exchange_strong(last, now, std::memory_order_relaxed)) {
    Touch(entry.fd);
  }
}

void BlockCache::NoteDamaged(const Slot& slot, uint64_t device, uint64_t inode) {
  std::lock_guard<std::mutex> lock(mu_);
  if (damaged_.size() < kMaxDamaged) {
    damaged_.push_back(DamagedEntry{slot.key, slot.block, device, inode});
  }
}

void BlockCache::Discard(const Slot& slot, const std::shared_ptr<Entry>& entry) {
  std::shared_ptr<Entry> closing;  // closed outside the lock
  std::lock_guard<std::mutex> lock(mu_);
  auto found = open_.find(slot);
  if (found != open_.end() && found->second->second == entry) {
    closing = std::move(found->second->second);
    lru_.erase(found->second);
    open_.erase(found);
  }
}

std::vector<DamagedEntry> BlockCache::TakeDamaged() {
  std::vector<DamagedEntry> taken;
  std::lock_guard<std::mutex> lock(mu_);
  taken.swap(damaged_);
  return taken;
}

void BlockCache::Forget() {
  Lru closing;  // closed outside the lock
  std::lock_guard<std::mutex> lock(mu_);
  open_.clear();
  closing.swap(lru_);
}

void BlockCache::LockForFork() { mu_.lock(); }

void BlockCache::UnlockAfterFork(bool child) {
  if (child) {
    // The entries the parent's other threads were reading are never
    // released here (those threads are gone): their descriptors stay open
    // in the child. The open set starts empty.
    open_.clear();
    lru_.clear();
    damaged_.clear();
  }
  mu_.unlock();
}

}  // namespace sackli
