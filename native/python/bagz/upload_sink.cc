#include "python/bagz/upload_sink.h"

#include <string>
#include <utility>

#include "python/gil.h"

namespace py = pybind11;

namespace sackli::python {
namespace {

class PyUploadSink : public AppendSink {
 public:
  PyUploadSink(py::object stream, std::string url)
      : stream_(std::move(stream)), url_(std::move(url)) {
    buffer_.reserve(AppendFile::kAppendBufferBytes);
  }
  ~PyUploadSink() override {
    AcquireGil gil;  // the writer may be dropped by a thread without it
    stream_ = py::object();
  }

  void Append(const char* data, size_t n) override {
    if (buffer_.size() + n > AppendFile::kAppendBufferBytes) FlushBuffer();
    if (n >= AppendFile::kAppendBufferBytes) {
      Hand(data, n);
    } else {
      buffer_.append(data, n);
    }
  }

  void FlushBuffer() override {
    if (buffer_.empty()) return;
    Hand(buffer_.data(), buffer_.size());
    buffer_.clear();
  }

  void Close() override { buffer_.clear(); }
  size_t buffered() const override { return buffer_.size(); }
  const std::string& path() const override { return url_; }

 private:
  // bytes (a copy), not a view of our buffer: the stream may keep what it
  // is given.
  void Hand(const char* data, size_t n) {
    AcquireGil gil;
    stream_.attr("write")(py::bytes(data, n));
  }

  py::object stream_;
  std::string url_;
  std::string buffer_;
};

}  // namespace

std::unique_ptr<AppendSink> MakeUploadSink(py::object stream, std::string url) {
  return std::make_unique<PyUploadSink>(std::move(stream), std::move(url));
}

}  // namespace sackli::python
