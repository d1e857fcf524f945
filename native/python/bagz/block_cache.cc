// `_engine.BlockCache`: the engine's reader of read-cache entries
// (bagz/block_cache.h) for sackli/_storage/_read_cache.py, which keeps one
// per cache folder and hands it to the remote byte sources
// (remote_source.cc), so Python callers and the engine share one hit path.
#include "bagz/block_cache.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <array>
#include <cstring>
#include <memory>
#include <string>

#include "bagz/errors.h"
#include "python/gil.h"
#include "python/register.h"

namespace py = pybind11;

namespace sackli::python {
namespace {

// `bytes` of exactly N bytes as an array (a key, a secret).
template <size_t N>
std::array<unsigned char, N> FixedBytes(const py::bytes& bytes, const char* what) {
  const std::string text = bytes;
  if (text.size() != N) {
    ThrowInvalidArgument(std::string("a cache ") + what + " is " + std::to_string(N) +
                         " bytes, not " + std::to_string(text.size()));
  }
  std::array<unsigned char, N> out;
  std::memcpy(out.data(), text.data(), N);
  return out;
}

CacheKey KeyFrom(const py::bytes& key) { return FixedBytes<kCacheKeyBytes>(key, "key"); }

CacheSecret SecretFrom(const py::bytes& secret) {
  return FixedBytes<kCacheSecretBytes>(secret, "secret");
}

}  // namespace

void RegisterBlockCache(py::module_& m) {
  py::class_<BlockCache, std::shared_ptr<BlockCache>> cls(m, "BlockCache");
  cls.doc() =
      "The read side of the read cache's entries (bagz/block_cache.h): "
      "BlockCache(root, secret, max_open, touch_seconds=60, memory_bytes=MEMORY_BYTES): "
      "serves the entries under `root` sealed with `secret` (SECRET_BYTES bytes), "
      "keeping up to `memory_bytes` of their checked payloads in memory.";
  cls.def(py::init([](const std::string& root, const py::bytes& secret, size_t max_open,
                      double touch_seconds, size_t memory_bytes) {
            return std::make_shared<BlockCache>(root, SecretFrom(secret), max_open,
                                                static_cast<int64_t>(touch_seconds * 1e9),
                                                memory_bytes);
          }),
          py::arg("root"), py::arg("secret"), py::arg("max_open"),
          py::arg("touch_seconds") = 60.0, py::arg("memory_bytes") = kCacheMemoryBytes);
  cls.attr("FORMAT") = kCacheFormat;
  cls.attr("SECRET_BYTES") = kCacheSecretBytes;
  cls.attr("CHUNK_BYTES") = kCacheChunkBytes;
  cls.attr("LOAD_BYTES") = kCacheLoadBytes;
  cls.attr("MEMORY_BYTES") = kCacheMemoryBytes;
  cls.def_static("header_bytes", &CacheHeaderBytes, py::arg("length"));
  cls.def(
      "encode_header",
      [](const BlockCache& cache, const py::bytes& key, uint64_t block,
         const py::buffer& payload) {
        const CacheKey k = KeyFrom(key);
        const py::buffer_info info = payload.request();
        const size_t n = static_cast<size_t>(info.size * info.itemsize);
        std::string head;
        {
          ReleaseGil release;
          head = cache.EncodeHeader(k, block, static_cast<const char*>(info.ptr), n);
        }
        return py::bytes(head);
      },
      py::arg("key"), py::arg("block"), py::arg("payload"),
      "The header of the entry holding `payload` as block `block` of `key`, "
      "sealed with this cache's secret.");
  // Bytes [lo, hi) of a cached block, every chunk checked; None on a miss.
  cls.def(
      "read",
      [](BlockCache& cache, const py::bytes& key, uint64_t block, uint64_t length,
         uint64_t lo, uint64_t hi) -> py::object {
        const CacheKey k = KeyFrom(key);
        if (lo > hi || hi > length) {
          ThrowInvalidArgument("cache read of [" + std::to_string(lo) + ", " +
                               std::to_string(hi) + ") of a block of " +
                               std::to_string(length) + " bytes");
        }
        py::bytes out(nullptr, hi - lo);
        bool hit;
        {
          ReleaseGil release;
          hit = cache.Read(k, block, length, lo, hi, PyBytes_AS_STRING(out.ptr()));
        }
        if (!hit) return py::none();
        return std::move(out);
      },
      py::arg("key"), py::arg("block"), py::arg("length"), py::arg("lo"), py::arg("hi"));
  cls.def(
      "take_damaged",
      [](BlockCache& cache) {
        py::list out;
        for (const DamagedEntry& found : cache.TakeDamaged()) {
          out.append(py::make_tuple(
              py::bytes(reinterpret_cast<const char*>(found.key.data()), found.key.size()),
              found.block, found.device, found.inode));
        }
        return out;
      },
      "[(key, block, device, inode)] of the damaged entries reads found "
      "since the last call: for the writer side to delete.");
  cls.def("forget", &BlockCache::Forget, "Closes every open entry.");
  cls.def("entry_path", [](const BlockCache& cache, const py::bytes& key, uint64_t block) {
    return cache.EntryPath(KeyFrom(key), block);
  });
  cls.def_property_readonly("root", &BlockCache::root);
  cls.def_property_readonly("open_entries", &BlockCache::open_entries);
  cls.def_property_readonly("memory_bytes", &BlockCache::memory_bytes,
                            "The checked payload bytes kept in memory.");
  cls.def_property_readonly("max_memory_bytes", &BlockCache::max_memory_bytes);
}

}  // namespace sackli::python
