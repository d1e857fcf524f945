#include "python/bagz/remote_source.h"

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

#include "bagz/errors.h"
#include "python/gil.h"

namespace py = pybind11;

namespace sackli::python {
namespace {

// A remote object read through a Python handle (see MakeOpener).
class PyByteSource : public ByteSource {
 public:
  PyByteSource(py::object handle, std::string path)
      : handle_(std::move(handle)), path_(std::move(path)) {
    size_ = handle_.attr("size").cast<uint64_t>();
  }
  ~PyByteSource() override {
    AcquireGil gil;  // the last owner may be a thread without the GIL
    handle_ = py::object();
  }

  uint64_t size() const override { return size_; }
  const std::string& path() const override { return path_; }
  bool remote() const override { return true; }

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
