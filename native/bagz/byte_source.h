// A read-only sequence of bytes with a known size: a local file (mapped or
// read with pread) or, through the bindings, a remote object. Everything above
// this interface is storage-agnostic.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace sackli {

class MappingFaults;

// One range of a batch read (ByteSource::ReadMany): `length` bytes at
// `offset`, into `dst`.
struct ByteRange {
  uint64_t offset;
  size_t length;
  char* dst;
};

class ByteSource {
 public:
  virtual ~ByteSource() = default;

  virtual uint64_t size() const = 0;
  // The path or URL this source reads, for error messages.
  virtual const std::string& path() const = 0;
  // The whole content when it is addressable in memory (mmap), else nullptr.
  // Read it only inside a FaultScope (fault_guard.h): the file may shrink.
  virtual const char* mapped() const { return nullptr; }
  // The fault state of the mapping, or nullptr for unmapped sources.
  virtual MappingFaults* faults() const { return nullptr; }
  // True for objects behind a network: every Read is a request, so shards
  // keep the limits they read from such a source (a page of them at a time
  // with LimitsStorage::kOnDisk, all at open with kInMemory; see shard.h).
  virtual bool remote() const { return false; }
  // How far apart two records of a batch may lie and still be read with one
  // Read of an unmapped source (the bytes between come along): worth it
  // where each read is a request. A source that serves ranges from a local
  // read cache (fetching the blocks it lacks in runs itself) says 0.
  virtual uint64_t coalesce_gap_bytes() const { return 64 * 1024; }
  // Reads exactly `length` bytes at `offset` into `dst`. Thread-safe.
  // Throws sackli::Error (kCorruption for a read past the end).
  virtual void Read(uint64_t offset, size_t length, char* dst) const = 0;
  // Reads every range of a batch. Remote sources fetch them concurrently in
  // one call (one hand-off to the client, not one per range); the default
  // reads them one by one. Thread-safe; throws as Read does.
  virtual void ReadMany(const ByteRange* ranges, size_t n) const {
    for (size_t i = 0; i < n; ++i) {
      Read(ranges[i].offset, ranges[i].length, ranges[i].dst);
    }
  }
};

// Opens a source by path; the reader uses this seam so that back-ends other
// than local files can share one reader engine.
struct SourceOpener {
  std::function<std::shared_ptr<ByteSource>(const std::string& path)> open;
  std::function<bool(const std::string& path)> exists;
  // Whether `open` may return remote sources (ByteSource::remote): each
  // open is then a few round trips to a store, so Bag::Open runs up to
  // BagOptions::remote_parallelism of them at once instead of one per core.
  bool may_open_remote = false;
};

}  // namespace sackli
