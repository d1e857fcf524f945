// The read side of sackli's local cache of remote reads (docs/cache.md): the
// entries `<root>/<2 hex>/<key hex>-<block>` that hold one block of one
// version of a remote object each, found, checked and read here without
// Python. The rest of the cache (misses, the in-flight claims, publishing,
// the budget, LRU eviction and the flock protocol) lives in Python
// (sackli/_storage/_read_cache.py), which writes entries with the headers
// EncodeCacheHeader makes.
//
// An entry (format 3) is a header and then the block's payload:
//
//   magic "sackli\0C" | u32 format (3) | u32 chunk bytes (1024) |
//   u64 payload bytes | 32-byte key | u64 block | u32 chunk count |
//   u32 CRC-32C per chunk of the payload | u64 seal
//
// all little-endian. The key is the SHA-256 digest Python computes of the
// object's scheme, bucket, name, identity, size and block size: public
// facts (what a HEAD of the object shows). The seal is the SipHash-2-4 tag
// of all the header before it under the cache's secret (16 random bytes in
// `<root>/secret`, which Python makes and hands to the constructor): an
// entry written by someone who cannot read the secret never checks, even
// with the right key and good CRCs, so it is a miss, never served. The
// CRCs check the payload against damage; the seal makes them the cache's
// own. (Format 2 had a CRC-32C of the header instead of the seal: its
// entries are misses, replaced when read.)
//
// What a read guarantees: an entry is opened with O_NOFOLLOW (a symbolic
// link is not followed), must be a regular file of exactly the header and
// payload expected, with a header that checks and names the key and block
// asked for; every chunk a range touches is read with pread (never mapped:
// a file truncated under a reader cannot SIGBUS) and checked against its
// CRC-32C before any of it is served. Anything else (damaged, short,
// foreign, of another format) is a miss; the file found is noted
// (TakeDamaged) so that the writer side deletes it, under its lock, if the
// path still names it.
//
// Hits are served from memory: each open entry keeps the chunks it has
// checked (read in aligned runs of kCacheLoadBytes, in anonymous memory of
// its own), so a hit on them is a lookup and a copy, no system call. Those
// bytes stay right whatever happens to the file afterwards: an entry is
// never rewritten in place by sackli (published under a temporary name,
// then renamed) and its key names one version of one object, so a file
// replaced or deleted later holds the same bytes or none. The bytes kept
// are bounded per BlockCache by `memory_bytes` (least recently used
// entries dropped first) as well as the entries by `max_open`.
//
// Each BlockCache keeps up to `max_open` verified entries open (least
// recently used closed first), shared by the threads reading them. Thread-
// safe. After fork() the child starts with none open and no bytes kept (a
// fork handler takes every cache's lock around the fork, so no state is
// left half-changed; an entry a parent's thread was loading may be locked
// by it, so the child never touches the parent's entries).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "bagz/siphash.h"

namespace sackli {

inline constexpr uint32_t kCacheFormat = 3;
// Each CRC covers this much payload: a record reads and checks the chunks
// it spans, at most 2 KiB more than itself (a 1 KiB record: 1-2 KiB). The
// bytes copied, not the calls, are most of what a small hit costs.
inline constexpr size_t kCacheChunkBytes = 1024;
inline constexpr size_t kCacheKeyBytes = 32;
// A read of chunks not yet in memory reads and checks the aligned run of
// this many bytes around them (one pread: a call costs about what 16 KiB of
// copying and checking does), so that neighbouring records read next are
// hits in memory.
inline constexpr size_t kCacheLoadBytes = 16 * 1024;
// The payload bytes a BlockCache keeps in memory by default.
inline constexpr size_t kCacheMemoryBytes = size_t{64} << 20;
// A hit marks its entry used (its mtime: the LRU's recency) at most this
// often per process.
inline constexpr int64_t kCacheTouchNanos = int64_t{60} * 1000 * 1000 * 1000;

using CacheKey = std::array<unsigned char, kCacheKeyBytes>;
// The cache's secret, which seals its entries' headers.
using CacheSecret = SipHashKey;
inline constexpr size_t kCacheSecretBytes = kSipHashKeyBytes;

// The bytes of the header of an entry holding `length` payload bytes.
size_t CacheHeaderBytes(uint64_t length);

// The header of the entry holding `payload[0, length)` as block `block` of
// the object keyed `key`, sealed with `secret`.
std::string EncodeCacheHeader(const CacheSecret& secret, const CacheKey& key,
                              uint64_t block, const char* payload, size_t length);

// A file found where an entry should be that is not a good one (damaged,
// short, foreign, a link): its device and inode, so that only that file is
// deleted (a good entry published meanwhile stays).
struct DamagedEntry {
  CacheKey key;
  uint64_t block;
  uint64_t device;
  uint64_t inode;
};

class BlockCache {
 public:
  // `root`: the folder of the entries' layout (`<cache_dir>/v1`).
  // `secret`: the cache's secret: only entries sealed with it are served.
  // `max_open`: verified entries kept open (at least 1).
  // `touch_nanos`: how often a hit may touch its entry's mtime.
  // `memory_bytes`: checked payload bytes kept in memory, over all entries
  // (the entry being read keeps what it has even when it alone is over).
  BlockCache(std::string root, const CacheSecret& secret, size_t max_open,
             int64_t touch_nanos = kCacheTouchNanos,
             size_t memory_bytes = kCacheMemoryBytes);
  ~BlockCache();
  BlockCache(const BlockCache&) = delete;
  BlockCache& operator=(const BlockCache&) = delete;

  // Copies payload bytes [lo, hi) of block `block` of the object keyed
  // `key`, whose payload is `length` bytes, into `dst` and returns true,
  // every chunk they touch checked; false on a miss (then `dst` holds
  // unspecified bytes). Throws kInvalidArgument unless lo <= hi <= length.
  bool Read(const CacheKey& key, uint64_t block, uint64_t length, uint64_t lo,
            uint64_t hi, char* dst);

  // The damaged entries reads found since the last call (at most 1,024 are
  // kept; more are found again by later reads).
  std::vector<DamagedEntry> TakeDamaged();

  // Closes every open entry (a reader still using one closes it when done).
  void Forget();

  // The header of the entry of `payload[0, length)` as block `block` of
  // `key`, sealed with this cache's secret.
  std::string EncodeHeader(const CacheKey& key, uint64_t block, const char* payload,
                           size_t length) const {
    return EncodeCacheHeader(secret_, key, block, payload, length);
  }

  // Where block `block` of `key` is kept.
  std::string EntryPath(const CacheKey& key, uint64_t block) const;
  const std::string& root() const { return root_; }
  size_t max_open() const { return max_open_; }
  size_t open_entries() const;
  // The checked payload bytes kept in memory by the open entries.
  size_t memory_bytes() const;
  size_t max_memory_bytes() const { return max_memory_; }

  // For the fork handlers (block_cache.cc).
  void LockForFork();
  void UnlockAfterFork(bool child);

 private:
  struct Entry;
  struct Slot {
    CacheKey key;
    uint64_t block;
    bool operator==(const Slot& other) const {
      return block == other.block && key == other.key;
    }
  };
  struct SlotHash {
    size_t operator()(const Slot& slot) const;
  };
  using Lru = std::list<std::pair<Slot, std::shared_ptr<Entry>>>;
  // Removes `it` from the open set (under mu_), its last reference moved to
  // `closing` (freed outside the lock); returns the next.
  Lru::iterator Unlist(Lru::iterator it, std::vector<std::shared_ptr<Entry>>& closing);

  std::shared_ptr<Entry> Acquire(const Slot& slot, uint64_t length);
  std::shared_ptr<Entry> Open(const Slot& slot, uint64_t length);
  // Reads and checks the chunks around [first, last] not yet in memory
  // (adding the bytes loaded to `added`); false unless [first, last] all
  // are then. Under entry.load_mu.
  bool Load(Entry& entry, uint64_t first, uint64_t last, size_t* added);
  // Counts `added` bytes loaded into `entry`; drops the least recently used
  // entries while over the memory bound.
  void Account(const std::shared_ptr<Entry>& entry, size_t added);
  void MaybeTouch(Entry& entry) const;
  void NoteDamaged(const Slot& slot, uint64_t device, uint64_t inode);
  void Discard(const Slot& slot, const std::shared_ptr<Entry>& entry);

  const std::string root_;
  const CacheSecret secret_;
  const size_t max_open_;
  const int64_t touch_nanos_;
  const size_t max_memory_;
  mutable std::mutex mu_;
  Lru lru_;  // most recently used first
  std::unordered_map<Slot, Lru::iterator, SlotHash> open_;
  std::vector<DamagedEntry> damaged_;
  size_t memory_ = 0;  // the `kept` bytes of the entries in `open_`
};

}  // namespace sackli
