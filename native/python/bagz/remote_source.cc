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
    if (offset > size_ || length > size_ - offset) {
      ThrowCorruption(path_, offset,
                      "read of " + std::to_string(length) +
                          " bytes past the end of the object (" +
                          std::to_string(size_) + " bytes)");
    }
    if (length == 0) return;
    AcquireGil gil;
    py::object data = handle_.attr("read")(offset, length);
    py::buffer_info info = py::buffer(data).request();
    const size_t got = static_cast<size_t>(info.size * info.itemsize);
    if (got != length) {
      throw Error(ErrorKind::kIo,
                  path_ + ": asked for " + std::to_string(length) +
                      " bytes at offset " + std::to_string(offset) + ", got " +
                      std::to_string(got),
                  path_, EIO);
    }
    std::memcpy(dst, info.ptr, length);
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
      }};
}

}  // namespace sackli::python
