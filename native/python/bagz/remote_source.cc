#include "python/bagz/remote_source.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bagz/block_cache.h"
#include "bagz/errors.h"
#include "python/gil.h"

namespace py = pybind11;

namespace sackli::python {
namespace {

// The read cache of one remote object as its byte source uses it: cached
// blocks are read by the engine (bagz/block_cache.h) without Python; the
// missing ones come from the handle's `fetch_blocks(blocks)`, one call per
// batch, which fetches, publishes and returns them (sackli/_storage: the
// claims, the budget, the lock).
class CachedBlocks {
 public:
  // From `handle.cache_blocks()`: (BlockCache, key, block bytes), or None
  // (no cache: `cache()` is null).
  explicit CachedBlocks(const py::object& handle) {
    if (!py::hasattr(handle, "cache_blocks")) return;
    py::object info = handle.attr("cache_blocks")();
    if (info.is_none()) return;
    py::tuple parts = info.cast<py::tuple>();
    cache_ = parts[0].cast<std::shared_ptr<BlockCache>>();
    const std::string key = parts[1].cast<py::bytes>();
    block_bytes_ = parts[2].cast<uint64_t>();
    if (key.size() != kCacheKeyBytes || block_bytes_ == 0) {
      throw Error(ErrorKind::kInvalidArgument, "cache_blocks(): a key of " +
                  std::to_string(key.size()) + " bytes, blocks of " +
                  std::to_string(block_bytes_));
    }
    std::memcpy(key_.data(), key.data(), key_.size());
  }
  const BlockCache* cache() const { return cache_.get(); }

  // Every nonempty range of `ranges` (within an object of `size` bytes):
  // the blocks cached, read here; the others fetched through `handle`.
  void Read(const py::object& handle, const std::string& path, uint64_t size,
            const ByteRange* ranges, size_t n) const {
    std::vector<Miss> misses;
    for (size_t i = 0; i < n; ++i) {
      const ByteRange& r = ranges[i];
      if (r.length == 0) continue;
      const uint64_t end = r.offset + r.length;
      for (uint64_t block = r.offset / block_bytes_; block <= (end - 1) / block_bytes_;
           ++block) {
        const uint64_t base = block * block_bytes_;
        const uint64_t length = std::min(block_bytes_, size - base);
        const Miss part{block, std::max(r.offset, base) - base,
                        std::min(end, base + length) - base,
                        r.dst + (std::max(r.offset, base) - r.offset)};
        if (!cache_->Read(key_, block, length, part.lo, part.hi, part.dst)) {
          misses.push_back(part);
        }
      }
    }
    if (!misses.empty()) Fetch(handle, path, size, misses);
  }

 private:
  // Bytes [lo, hi) of block `block`, wanted at `dst`.
  struct Miss {
    uint64_t block;
    uint64_t lo;
    uint64_t hi;
    char* dst;
  };

  void Fetch(const py::object& handle, const std::string& path, uint64_t size,
             std::vector<Miss>& misses) const {
    std::sort(misses.begin(), misses.end(),
              [](const Miss& a, const Miss& b) { return a.block < b.block; });
    AcquireGil gil;  // before any Python object is made
    py::list blocks;
    for (size_t i = 0; i < misses.size(); ++i) {
      if (i == 0 || misses[i].block != misses[i - 1].block) {
        blocks.append(misses[i].block);
      }
    }
    py::list got = handle.attr("fetch_blocks")(blocks);
    if (got.size() != blocks.size()) {
      throw Error(ErrorKind::kIo,
                  path + ": asked for " + std::to_string(blocks.size()) +
                      " blocks, got " + std::to_string(got.size()),
                  path, EIO);
    }
    size_t k = 0;
    py::buffer_info info;
    for (size_t i = 0; i < misses.size(); ++i) {
      const Miss& miss = misses[i];
      if (i == 0 || miss.block != misses[i - 1].block) {
        info = py::buffer(got[k++]).request();
        const uint64_t length = std::min(block_bytes_, size - miss.block * block_bytes_);
        const uint64_t found = static_cast<uint64_t>(info.size * info.itemsize);
        if (found != length) {
          throw Error(ErrorKind::kIo,
                      path + ": asked for block " + std::to_string(miss.block) + " (" +
                          std::to_string(length) + " bytes), got " + std::to_string(found),
                      path, EIO);
        }
      }
      std::memcpy(miss.dst, static_cast<const char*>(info.ptr) + miss.lo, miss.hi - miss.lo);
    }
  }

  std::shared_ptr<BlockCache> cache_;
  CacheKey key_{};
  uint64_t block_bytes_ = 0;
};

// A remote object read through a Python handle (see MakeOpener).
class PyByteSource : public ByteSource {
 public:
  PyByteSource(py::object handle, std::string path)
      : handle_(std::move(handle)), path_(std::move(path)), cached_(handle_) {
    size_ = handle_.attr("size").cast<uint64_t>();
  }
  ~PyByteSource() override {
    AcquireGil gil;  // the last owner may be a thread without the GIL
    handle_ = py::object();
  }

  uint64_t size() const override { return size_; }
  const std::string& path() const override { return path_; }
  bool remote() const override { return true; }
  // Cached: a gap between records costs reading it from disk, and missing
  // blocks are fetched in runs anyway (`fetch_blocks`).
  uint64_t coalesce_gap_bytes() const override {
    return cached_.cache() != nullptr ? 0 : ByteSource::coalesce_gap_bytes();
  }

  void Read(uint64_t offset, size_t length, char* dst) const override {
    const ByteRange range{offset, length, dst};
    ReadMany(&range, 1);
  }

  // One call into Python for the whole batch: `handle.read_many` fetches the
  // ranges (concurrently, on the store's own connections) and returns one
  // buffer per range.
  void ReadMany(const ByteRange* ranges, size_t n) const override {
    size_t asked = 0;
    for (size_t i = 0; i < n; ++i) {
      const ByteRange& r = ranges[i];
      if (r.offset > size_ || r.length > size_ - r.offset) {
        ThrowCorruption(path_, r.offset,
                        "read of " + std::to_string(r.length) +
                            " bytes past the end of the object (" +
                            std::to_string(size_) + " bytes)");
      }
      if (r.length != 0) ++asked;
    }
    if (asked == 0) return;
    // With a read cache: serve the hits here; pass the misses on.
    if (cached_.cache() != nullptr) {
      cached_.Read(handle_, path_, size_, ranges, n);
      return;
    }
    AcquireGil gil;  // before any Python object is made
    py::list wanted;
    for (size_t i = 0; i < n; ++i) {
      if (ranges[i].length == 0) continue;
      wanted.append(py::make_tuple(ranges[i].offset, ranges[i].length));
    }
    py::list got = handle_.attr("read_many")(wanted);
    if (got.size() != asked) {
      throw Error(ErrorKind::kIo,
                  path_ + ": asked for " + std::to_string(asked) +
                      " ranges, got " + std::to_string(got.size()),
                  path_, EIO);
    }
    size_t k = 0;
    for (size_t i = 0; i < n; ++i) {
      const ByteRange& r = ranges[i];
      if (r.length == 0) continue;
      py::buffer_info info = py::buffer(got[k++]).request();
      const size_t length = static_cast<size_t>(info.size * info.itemsize);
      if (length != r.length) {
        throw Error(ErrorKind::kIo,
                    path_ + ": asked for " + std::to_string(r.length) +
                        " bytes at offset " + std::to_string(r.offset) +
                        ", got " + std::to_string(length),
                    path_, EIO);
      }
      std::memcpy(r.dst, info.ptr, r.length);
    }
  }

 private:
  py::object handle_;
  std::string path_;
  CachedBlocks cached_;
  uint64_t size_ = 0;
};

}  // namespace

SourceOpener MakeOpener(py::object remote, AccessPattern access,
                        CachePolicy cache) {
  SourceOpener local = LocalOpener(access, cache);
  if (remote.is_none()) return local;
  // Dropped by whichever thread ends the last open; it needs the GIL.
  auto callback = std::shared_ptr<py::object>(
      new py::object(std::move(remote)), [](py::object* o) {
        AcquireGil gil;
        delete o;
      });
  return SourceOpener{
      [local, callback](const std::string& path) -> std::shared_ptr<ByteSource> {
        {
          AcquireGil gil;
          py::object handle = (*callback)(path);
          if (!handle.is_none()) {
            return std::make_shared<PyByteSource>(std::move(handle), path);
          }
        }
        return local.open(path);
      },
      [local, callback](const std::string& path) -> bool {
        {
          AcquireGil gil;
          py::object found = callback->attr("exists")(path);
          if (!found.is_none()) return found.cast<bool>();
        }
        return local.exists(path);
      },
      /*may_open_remote=*/true};
}

}  // namespace sackli::python
