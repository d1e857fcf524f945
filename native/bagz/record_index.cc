#include "bagz/record_index.h"

#include <algorithm>
#include <cstring>

#include "bagz/fault_guard.h"
#include "bagz/prefetch.h"
#include "bagz/read_plan.h"
#include "bagz/thread_pool.h"

namespace sackli {
namespace {

constexpr uint64_t kArenaBlockBytes = 4 << 20;
// Records are hashed in parallel in blocks of this many.
constexpr uint64_t kHashBlockRecords = 8192;
// Adding record k prefetches the slot of record k + kPrefetchSlotsAhead: the
// table is far larger than the cache, so each add is otherwise a miss.
constexpr size_t kPrefetchSlotsAhead = 16;
constexpr size_t kMinSlots = 1024;

// Slots for `n` distinct records: a power of two at least 2n, so that the
// table stays at most half full.
size_t SlotsFor(uint64_t n) {
  size_t slots = kMinSlots;
  while (slots < 2 * n) slots *= 2;
  return slots;
}

// Folds the 128-bit product of a and b into 64 bits.
inline uint64_t MultiplyFold(uint64_t a, uint64_t b) {
  const unsigned __int128 product = static_cast<unsigned __int128>(a) * b;
  return static_cast<uint64_t>(product) ^ static_cast<uint64_t>(product >> 64);
}

inline uint64_t Load64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

}  // namespace

// 16 bytes per multiply: fast on long records, well mixed enough for a hash
// table whose hits are confirmed byte by byte anyway.
uint64_t HashRecord(std::string_view record) {
  constexpr uint64_t k0 = 0x9E3779B97F4A7C15ull;
  constexpr uint64_t k1 = 0xC2B2AE3D27D4EB4Full;
  constexpr uint64_t k2 = 0x165667B19E3779F9ull;
  const char* p = record.data();
  size_t n = record.size();
  uint64_t h = MultiplyFold(n ^ k0, k1);
  // Independent multiply chains over 64-byte strides: the multiplies
  // overlap instead of waiting on each other.
  if (n >= 64) {
    uint64_t g = h ^ k2, e = h ^ k1, f = h ^ k0;
    for (; n >= 64; p += 64, n -= 64) {
      h = MultiplyFold(Load64(p) ^ k1 ^ h, Load64(p + 8) ^ k2);
      g = MultiplyFold(Load64(p + 16) ^ k2 ^ g, Load64(p + 24) ^ k1);
      e = MultiplyFold(Load64(p + 32) ^ k0 ^ e, Load64(p + 40) ^ k2);
      f = MultiplyFold(Load64(p + 48) ^ k1 ^ f, Load64(p + 56) ^ k0);
    }
    h = MultiplyFold(h ^ e, g ^ f ^ k1);
  }
  for (; n >= 16; p += 16, n -= 16) {
    h = MultiplyFold(Load64(p) ^ k1 ^ h, Load64(p + 8) ^ k2);
  }
  uint64_t a = 0, b = 0;
  if (n > 8) {
    a = Load64(p);
    std::memcpy(&b, p + 8, n - 8);
  } else if (n > 0) {
    std::memcpy(&a, p, n);
  }
  h = MultiplyFold(a ^ k1 ^ h, b ^ k2 ^ n);
  return MultiplyFold(h, k0);
}

RecordIndex::RecordIndex(std::shared_ptr<const Bag> bag, const View& view,
                         bool keep_all, uint64_t max_memory_bytes,
                         const std::function<void()>& checkpoint,
                         uint64_t hash_mask)
    : bag_(std::move(bag)),
      view_(view),
      keep_all_(keep_all),
      max_memory_bytes_(max_memory_bytes),
      hash_mask_(hash_mask),
      in_place_(bag_->all_mapped() && !bag_->any_compressed()) {
  // Sized once for a view of distinct records, the common case: growing
  // from small rehashed every slot about twice more, each move a cache miss
  // and the new tables' pages faulted in while the old ones were live (half
  // the time of an index over 1M small records). A view with many repeats
  // gets a table larger than it needs (at most 2x the records' 2x).
  slots_.resize(SlotsFor(view_.length));
  if (keep_all_) {
    next_same_.assign(view_.length, kNone);
    last_same_.assign(view_.length, kNone);
  }
  // Uncompressed records of mapped files are hashed and compared where they
  // lie; everything else is decoded first.
  if (in_place_) {
    BuildInPlace(checkpoint);
  } else {
    BuildDecoded(checkpoint);
  }
  last_same_ = {};  // only needed while building
}

void RecordIndex::BuildInPlace(const std::function<void()>& checkpoint) {
  // Where each record lies and its hash, in parallel blocks; then one thread
  // adds them in view order (the first index of a record must win).
  const uint64_t n = view_.length;
  const uint64_t chunk = 16 * kHashBlockRecords;
  std::vector<const char*> data;
  std::vector<uint64_t> sizes, hashes;
  std::vector<uint32_t> shards;
  for (uint64_t first = 0; first < n; first += chunk) {
    const size_t count = static_cast<size_t>(std::min(chunk, n - first));
    data.resize(count);
    sizes.resize(count);
    hashes.resize(count);
    shards.resize(count);
    const size_t blocks = (count + kHashBlockRecords - 1) / kHashBlockRecords;
    ThreadPool::Shared().ParallelFor(
        blocks, bag_->options().max_parallelism, [&](size_t b) {
          const size_t begin_k = b * kHashBlockRecords;
          const size_t end_k = std::min<size_t>(count, begin_k + kHashBlockRecords);
          // A block of neighbours in one shard (a step-1 view of a
          // concatenated bag, nearly always): its limits validated in one
          // pass, its records hashed inside one fault scope.
          const char* run = nullptr;
          std::vector<uint64_t> offsets;
          if (view_.step == 1 &&
              MappedRun(*bag_, view_.Global(first + begin_k), end_k - begin_k,
                        &run, offsets)) {
            const uint32_t shard = bag_->Locate(view_.Global(first + begin_k)).shard;
            Guarded(bag_->shard(shard).records(), [&] {
              for (size_t k = begin_k; k < end_k; ++k) {
                const uint64_t at = offsets[k - begin_k];
                shards[k] = shard;
                data[k] = run + at;
                sizes[k] = offsets[k - begin_k + 1] - at;
                hashes[k] = HashRecord({data[k], static_cast<size_t>(sizes[k])}) &
                            hash_mask_;
              }
            });
            return;
          }
          for (size_t k = begin_k; k < end_k; ++k) {
            const Bag::Location loc = bag_->Locate(view_.Global(first + k));
            const Shard& shard = bag_->shard(loc.shard);
            uint64_t begin, stop;
            shard.Span(loc.local, &begin, &stop);
            shards[k] = loc.shard;
            data[k] = shard.records().mapped() + begin;
            sizes[k] = stop - begin;
            hashes[k] = Guarded(shard.records(), [&] {
              shard.CheckStored(loc.local, begin, data[k], static_cast<size_t>(sizes[k]));
              return HashRecord({data[k], static_cast<size_t>(sizes[k])});
            }) & hash_mask_;
          }
        });
    // Runs of one shard share a fault scope (Add reads the record when its
    // hash matches another's).
    for (size_t k = 0; k < count;) {
      size_t end = k + 1;
      while (end < count && shards[end] == shards[k]) ++end;
      Guarded(bag_->shard(shards[k]).records(), [&] {
        for (; k < end; ++k) {
          if (k + kPrefetchSlotsAhead < count) PrefetchSlot(hashes[k + kPrefetchSlotsAhead]);
          Add(first + k, hashes[k], {data[k], static_cast<size_t>(sizes[k])},
              data[k]);
        }
      });
    }
    if (checkpoint && first + count < n) checkpoint();
  }
}

void RecordIndex::BuildDecoded(const std::function<void()>& checkpoint) {
  // Records are decoded a chunk at a time (in parallel), hashed in parallel,
  // then added in view order by one thread.
  std::vector<uint64_t> hashes;
  VisitChunks(
      bag_, view_, 0, view_.length,
      [&](uint64_t first, size_t count, const char* const* data,
          const uint64_t* sizes) {
        hashes.resize(count);
        const size_t blocks = (count + kHashBlockRecords - 1) / kHashBlockRecords;
        ThreadPool::Shared().ParallelFor(
            blocks, bag_->options().max_parallelism, [&](size_t b) {
              const size_t end = std::min<size_t>(count, (b + 1) * kHashBlockRecords);
              for (size_t k = b * kHashBlockRecords; k < end; ++k) {
                hashes[k] = HashRecord({data[k], static_cast<size_t>(sizes[k])}) &
                            hash_mask_;
              }
            });
        for (size_t k = 0; k < count; ++k) {
          if (k + kPrefetchSlotsAhead < count) PrefetchSlot(hashes[k + kPrefetchSlotsAhead]);
          Add(first + k, hashes[k], {data[k], static_cast<size_t>(sizes[k])}, nullptr);
        }
        return true;
      },
      checkpoint);
}

void RecordIndex::PrefetchSlot(uint64_t hash) const {
  const Slot& slot = slots_[static_cast<size_t>(hash) & (slots_.size() - 1)];
  PrefetchBytes(reinterpret_cast<const char*>(&slot), sizeof(slot));
}

void RecordIndex::Add(uint64_t j, uint64_t hash, std::string_view record,
                      const char* data) {
  // The record's slot, or the empty slot where it goes.
  const size_t mask = slots_.size() - 1;
  size_t at = static_cast<size_t>(hash) & mask;
  for (; slots_[at].first != kNone; at = (at + 1) & mask) {
    const Slot& slot = slots_[at];
    if (slot.hash == hash && Equals(slot, record)) {
      if (keep_all_) {
        next_same_[last_same_[slot.first]] = j;
        last_same_[slot.first] = j;
      }
      return;
    }
  }
  slots_[at] = Slot{hash, j, data != nullptr ? data : Keep(record), record.size()};
  if (keep_all_) last_same_[j] = j;
  if (2 * ++num_unique_ > slots_.size()) Grow();
}

const char* RecordIndex::Keep(std::string_view record) {
  if (record.empty()) return "";
  if (arena_bytes_ + record.size() > max_memory_bytes_) {
    all_in_memory_ = false;
    return nullptr;  // confirmed against the bag instead
  }
  if (record.size() > arena_left_) {
    const size_t block = std::max<size_t>(kArenaBlockBytes, record.size());
    arena_blocks_.emplace_back(new char[block]);
    arena_next_ = arena_blocks_.back().get();
    arena_left_ = block;
  }
  char* kept = arena_next_;
  std::memcpy(kept, record.data(), record.size());
  arena_next_ += record.size();
  arena_left_ -= record.size();
  arena_bytes_ += record.size();
  return kept;
}

void RecordIndex::Grow() {
  std::vector<Slot> old(slots_.size() * 2);
  old.swap(slots_);
  const size_t mask = slots_.size() - 1;
  for (const Slot& slot : old) {
    if (slot.first == kNone) continue;
    size_t at = static_cast<size_t>(slot.hash) & mask;
    while (slots_[at].first != kNone) at = (at + 1) & mask;
    slots_[at] = slot;
  }
}

bool RecordIndex::Equals(const Slot& slot, std::string_view record) const {
  if (slot.size != record.size()) return false;
  if (slot.data != nullptr && in_place_ && !record.empty()) {
    // The slot's bytes lie in a mapped file, which may have shrunk.
    const Bag::Location loc = bag_->Locate(view_.Global(slot.first));
    return Guarded(bag_->shard(loc.shard).records(), [&] {
      return std::memcmp(slot.data, record.data(), record.size()) == 0;
    });
  }
  if (slot.data != nullptr) {
    // All of the kept record's cache lines requested at once: it is a
    // miss, and memcmp alone would wait for them a few at a time (a 1 KiB
    // lookup in a .bagz index: 0.88-0.91x -> 1.07x bagz).
    PrefetchBytes(slot.data, record.size());
    return std::memcmp(slot.data, record.data(), record.size()) == 0;
  }
  std::string stored;
  ReadOneInto(*bag_, view_.Global(slot.first), stored);
  return stored == record;
}

const RecordIndex::Slot* RecordIndex::Find(uint64_t hash,
                                           std::string_view record) const {
  const size_t mask = slots_.size() - 1;
  for (size_t at = static_cast<size_t>(hash) & mask; slots_[at].first != kNone;
       at = (at + 1) & mask) {
    const Slot& slot = slots_[at];
    if (slot.hash == hash && Equals(slot, record)) return &slot;
  }
  return nullptr;
}

std::optional<uint64_t> RecordIndex::First(std::string_view record) const {
  // The looked-up bytes are hashed, then compared: requested at once, they
  // arrive together rather than as the hash walks them.
  PrefetchBytes(record.data(), record.size());
  const Slot* slot = Find(HashRecord(record) & hash_mask_, record);
  if (slot == nullptr) return std::nullopt;
  return slot->first;
}

std::vector<uint64_t> RecordIndex::All(std::string_view record) const {
  std::vector<uint64_t> out;
  PrefetchBytes(record.data(), record.size());  // as in First
  const Slot* slot = Find(HashRecord(record) & hash_mask_, record);
  if (slot == nullptr) return out;
  for (uint64_t j = slot->first; j != kNone; j = next_same_[j]) {
    out.push_back(j);
  }
  return out;
}

}  // namespace sackli
