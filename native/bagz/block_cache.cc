#include "bagz/block_cache.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
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
constexpr size_t kLoadChunks = kCacheLoadBytes / kCacheChunkBytes;
static_assert(kCacheLoadBytes % kCacheChunkBytes == 0, "loads are whole chunks");
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

// Anonymous memory for `n` payload bytes (pages are committed as chunks are
// loaded into them, and returned by munmap), or null.
char* MapPayload(size_t n) {
  void* p = ::mmap(nullptr, std::max<size_t>(n, 1), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : static_cast<char*>(p);
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

// An open entry: its descriptor, the CRCs of its header, and the chunks of
// its payload read and checked so far (`payload`, a bit each in `loaded`).
// A chunk's bytes are written once, under `load_mu`, before its bit is set
// (release); a reader that sees the bit (acquire) copies them without a
// lock. Chunks that failed their check stay unset and are never served.
struct BlockCache::Entry {
  Entry(int fd, uint64_t device, uint64_t inode, uint64_t length,
        std::vector<uint32_t> crcs, char* payload)
      : fd(fd), device(device), inode(inode), length(length),
        crcs(std::move(crcs)), payload(payload),
        loaded(new std::atomic<uint64_t>[Words()]()), touched(NowNanos()) {}
  ~Entry() {
    ::munmap(payload, std::max<uint64_t>(length, 1));
    ::close(fd);
  }
  size_t Words() const { return (crcs.size() + 63) / 64; }
  uint64_t ChunkEnd(uint64_t chunk) const {
    return std::min(length, (chunk + 1) * kCacheChunkBytes);
  }
  bool Loaded(uint64_t chunk, std::memory_order order) const {
    return (loaded[chunk / 64].load(order) >> (chunk % 64)) & 1;
  }
  // Whether chunks [first, last] are all in memory.
  bool AllLoaded(uint64_t first, uint64_t last) const {
    for (uint64_t word = first / 64; word <= last / 64; ++word) {
      const uint64_t lo = word == first / 64 ? first % 64 : 0;
      const uint64_t hi = word == last / 64 ? last % 64 : 63;
      const uint64_t mask = (~uint64_t{0} >> (63 - hi)) & (~uint64_t{0} << lo);
      if ((loaded[word].load(std::memory_order_acquire) & mask) != mask) return false;
    }
    return true;
  }

  const int fd;
  const uint64_t device;
  const uint64_t inode;
  const uint64_t length;
  const std::vector<uint32_t> crcs;
  char* const payload;
  const std::unique_ptr<std::atomic<uint64_t>[]> loaded;
  std::mutex load_mu;  // held by the one thread loading chunks
  std::atomic<int64_t> touched;
  // Under the BlockCache's mu_: whether `open_` holds it, and the bytes of
  // its loaded chunks counted in `memory_`.
  bool listed = true;
  size_t counted = 0;
};

size_t BlockCache::SlotHash::operator()(const Slot& slot) const {
  uint64_t bits;
  std::memcpy(&bits, slot.key.data(), sizeof(bits));  // a SHA-256: uniform
  return static_cast<size_t>(bits ^ (slot.block * 0x9E3779B97F4A7C15ull));
}

BlockCache::BlockCache(std::string root, const CacheSecret& secret, size_t max_open,
                       int64_t touch_nanos, size_t memory_bytes)
    : root_(std::move(root)),
      secret_(secret),
      max_open_(std::max<size_t>(max_open, 1)),
      touch_nanos_(touch_nanos),
      max_memory_(memory_bytes) {
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

size_t BlockCache::memory_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return memory_;
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
  const uint64_t first = lo / kCacheChunkBytes;
  const uint64_t last = (hi - 1) / kCacheChunkBytes;
  if (!entry->AllLoaded(first, last)) {
    size_t added = 0;
    bool good;
    {
      std::lock_guard<std::mutex> loading(entry->load_mu);
      good = Load(*entry, first, last, &added);
    }
    Account(entry, added);
    if (!good) {
      Discard(slot, entry);
      NoteDamaged(slot, entry->device, entry->inode);
      return false;
    }
  }
  std::memcpy(dst, entry->payload + lo, hi - lo);
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
  while (open_.size() > max_open_) Unlist(std::prev(lru_.end()), closing);
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
  char* payload = MapPayload(length);
  if (payload == nullptr) {  // out of memory: a miss, the entry is good
    ::close(fd);
    return nullptr;
  }
  Touch(fd);
  return std::make_shared<Entry>(fd, device, inode, length, std::move(crcs), payload);
}

bool BlockCache::Load(Entry& entry, uint64_t first, uint64_t last, size_t* added) {
  // The aligned run of kLoadChunks chunks around [first, last]; within it,
  // each stretch of chunks not yet loaded is one pread straight into the
  // payload (the loaded ones are being read by other threads: never
  // rewritten), then checked chunk by chunk.
  const uint64_t chunks = entry.crcs.size();
  const uint64_t from = first / kLoadChunks * kLoadChunks;
  const uint64_t to = std::min(chunks, (last / kLoadChunks + 1) * kLoadChunks);
  const uint64_t base = CacheHeaderBytes(entry.length);
  uint64_t chunk = from;
  while (chunk < to) {
    if (entry.Loaded(chunk, std::memory_order_relaxed)) {
      ++chunk;
      continue;
    }
    uint64_t end = chunk + 1;
    while (end < to && !entry.Loaded(end, std::memory_order_relaxed)) ++end;
    const uint64_t start = chunk * kCacheChunkBytes;
    char* out = entry.payload + start;
    if (PreadAll(entry.fd, out, entry.ChunkEnd(end - 1) - start, base + start)) {
      for (uint64_t c = chunk; c < end; ++c) {
        const uint64_t at = c * kCacheChunkBytes;
        if (Crc32c(entry.payload + at, entry.ChunkEnd(c) - at) != entry.crcs[c]) continue;
        entry.loaded[c / 64].fetch_or(uint64_t{1} << (c % 64), std::memory_order_release);
        *added += entry.ChunkEnd(c) - at;
      }
    }
    chunk = end;
  }
  // Chunks outside [first, last] that failed stay unloaded: a read of them
  // finds the damage again.
  return entry.AllLoaded(first, last);
}

void BlockCache::Account(const std::shared_ptr<Entry>& entry, size_t added) {
  if (added == 0) return;
  std::vector<std::shared_ptr<Entry>> closing;  // freed outside the lock
  std::lock_guard<std::mutex> lock(mu_);
  // An entry dropped meanwhile is freed when its readers are done.
  if (!entry->listed) return;
  entry->counted += added;
  memory_ += added;
  // The least recently used go first; the entry just read stays.
  auto it = lru_.end();
  while (memory_ > max_memory_ && it != lru_.begin()) {
    --it;
    if (it->second == entry) continue;
    it = Unlist(it, closing);
  }
}

BlockCache::Lru::iterator BlockCache::Unlist(
    Lru::iterator it, std::vector<std::shared_ptr<Entry>>& closing) {
  it->second->listed = false;
  memory_ -= it->second->counted;
  it->second->counted = 0;
  open_.erase(it->first);
  closing.push_back(std::move(it->second));
  return lru_.erase(it);
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
  std::vector<std::shared_ptr<Entry>> closing;  // closed outside the lock
  std::lock_guard<std::mutex> lock(mu_);
  auto found = open_.find(slot);
  if (found != open_.end() && found->second->second == entry) {
    Unlist(found->second, closing);
  }
}

std::vector<DamagedEntry> BlockCache::TakeDamaged() {
  std::vector<DamagedEntry> taken;
  std::lock_guard<std::mutex> lock(mu_);
  taken.swap(damaged_);
  return taken;
}

void BlockCache::Forget() {
  std::vector<std::shared_ptr<Entry>> closing;  // closed outside the lock
  std::lock_guard<std::mutex> lock(mu_);
  while (!lru_.empty()) Unlist(lru_.begin(), closing);
}

void BlockCache::LockForFork() { mu_.lock(); }

void BlockCache::UnlockAfterFork(bool child) {
  if (child) {
    // The entries the parent's other threads were reading are never
    // released here (those threads are gone): their descriptors stay open
    // in the child. The open set starts empty.
    // Nor are their entries' bytes kept: one may be half loaded, its
    // load_mu held by a thread the child does not have.
    open_.clear();
    lru_.clear();
    damaged_.clear();
    memory_ = 0;
  }
  mu_.unlock();
}

}  // namespace sackli
