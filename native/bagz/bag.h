// An opened bag: its shards, the sharding layout that maps global indices to
// (shard, local index), and the options every read uses. Immutable once
// opened and shared (std::shared_ptr<const Bag>) by every reader view, thread
// and read-ahead task.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bagz/byte_source.h"
#include "bagz/codec.h"
#include "bagz/shard.h"

namespace sackli {

// kLast: the last value, as in shard.h.
enum class ShardingLayout { kConcatenated = 0, kInterleaved = 1, kLast = kInterleaved };

struct BagOptions {
  ShardingLayout layout = ShardingLayout::kConcatenated;
  ShardOptions shard;
  size_t max_parallelism = 1;  // threads a batch read may use, caller included
  // Requests a batch keeps in flight to remote sources (ByteSource::remote):
  // sized for an object store's latency, not for this machine's cores.
  size_t remote_parallelism = 1;
};

struct ShardPath {
  std::string path;
  Codec codec;
};

class Bag {
 public:
  // Opens all shards in parallel: on max_parallelism threads, or on
  // remote_parallelism when the opener may open remote sources
  // (SourceOpener::may_open_remote). The first failing shard, in spec order,
  // raises. INTERLEAVED requires shard sizes that are non-increasing and
  // within 1 of shard 0.
  static std::shared_ptr<const Bag> Open(const std::vector<ShardPath>& shards,
                                         const BagOptions& options,
                                         const SourceOpener& opener);

  uint64_t size() const { return size_; }
  size_t num_shards() const { return shards_.size(); }
  const Shard& shard(size_t i) const { return *shards_[i]; }
  const BagOptions& options() const { return options_; }
  // Bytes of all records sections together (stored, i.e. compressed, size).
  uint64_t records_bytes() const { return records_bytes_; }
  // True when every shard is memory-mapped: locating a record needs no I/O.
  bool all_mapped() const { return all_mapped_; }
  // True when some shard's records are compressed.
  bool any_compressed() const { return any_compressed_; }
  // True when some shard has a CRC-32C sidecar (record_checksums.h).
  bool any_checked() const { return any_checked_; }

  struct Location {
    uint32_t shard;
    uint64_t local;
  };
  // Where global record g (< size()) lives.
  Location Locate(uint64_t g) const;

 private:
  Bag() = default;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::vector<uint64_t> starts_;  // CONCATENATED: global index of each shard's 0
  BagOptions options_;
  uint64_t size_ = 0;
  uint64_t records_bytes_ = 0;
  bool all_mapped_ = true;
  bool any_compressed_ = false;
  bool any_checked_ = false;
};

}  // namespace sackli
