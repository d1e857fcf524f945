// A reverse index of a reader view: record bytes -> the view indices holding
// them. An open-addressing table holds the distinct records by 64-bit hash;
// a hash match is always confirmed by comparing bytes, so a
// collision never gives a wrong answer. Records of uncompressed memory-mapped
// files are compared in place; other records (decoded from zstd, or fetched
// from remote storage) are kept in memory up to a budget, beyond which a
// lookup reads its candidate back from the bag to compare.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bagz/bag.h"
#include "bagz/view.h"

namespace sackli {

class RecordIndex {
 public:
  // Reads the whole view once. With `keep_all`, every index of every record
  // is kept (MultiIndex); otherwise only the first (Index). Up to
  // `max_memory_bytes` of decoded records are kept for confirming lookups.
  // `hash_mask` is ANDed into every hash: tests pass 0 to make every record
  // collide with every other.
  RecordIndex(std::shared_ptr<const Bag> bag, const View& view, bool keep_all,
              uint64_t max_memory_bytes,
              const std::function<void()>& checkpoint,
              uint64_t hash_mask = ~uint64_t{0});

  // Number of distinct records.
  size_t num_unique() const { return num_unique_; }
  bool keep_all() const { return keep_all_; }
  // Whether every lookup is answered without reading the bag.
  bool confirms_in_memory() const { return all_in_memory_; }
  // Bytes of decoded records kept in memory.
  uint64_t memory_bytes() const { return arena_bytes_; }

  // The first view index holding `record`.
  std::optional<uint64_t> First(std::string_view record) const;

  // All view indices holding `record`, ascending; empty when absent.
  // Requires keep_all.
  std::vector<uint64_t> All(std::string_view record) const;

 private:
  static constexpr uint64_t kNone = ~uint64_t{0};
  // A distinct record, all a lookup needs in one place (one cache miss:
  // aligned, a slot never straddles two cache lines).
  struct alignas(32) Slot {
    uint64_t hash = 0;
    uint64_t first = kNone;      // first view index holding it; kNone: empty
    const char* data = nullptr;  // its bytes, or null: read them from the bag
    uint64_t size = 0;
  };

  void BuildInPlace(const std::function<void()>& checkpoint);
  void BuildDecoded(const std::function<void()>& checkpoint);
  // Records view index j as holding `record` (with this hash), found where
  // `data` points for as long as the index lives (null: keep a copy if the
  // budget allows).
  void Add(uint64_t j, uint64_t hash, std::string_view record, const char* data);
  // The slot of the record equal to `record`, or nullptr.
  const Slot* Find(uint64_t hash, std::string_view record) const;
  bool Equals(const Slot& slot, std::string_view record) const;
  // Starts loading the slot where a record of this hash would go.
  void PrefetchSlot(uint64_t hash) const;
  void Grow();
  const char* Keep(std::string_view record);

  std::shared_ptr<const Bag> bag_;
  View view_;
  bool keep_all_;
  uint64_t max_memory_bytes_;
  uint64_t hash_mask_;
  // Records of uncompressed mapped files are hashed and compared where they
  // lie (slots point into the mappings); others are decoded first.
  bool in_place_;
  bool all_in_memory_ = true;

  std::vector<Slot> slots_;  // size a power of two, at most half full
  size_t num_unique_ = 0;
  std::vector<uint64_t> next_same_;  // keep_all: next index with same record
  std::vector<uint64_t> last_same_;  // keep_all, while building: by first index

  // Decoded records kept for confirming lookups: blocks that never move.
  std::vector<std::unique_ptr<char[]>> arena_blocks_;
  size_t arena_left_ = 0;
  char* arena_next_ = nullptr;
  uint64_t arena_bytes_ = 0;
};

// The 64-bit hash the index uses.
uint64_t HashRecord(std::string_view record);

}  // namespace sackli
