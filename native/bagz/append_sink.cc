#include "bagz/append_sink.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "bagz/errors.h"
#include "bagz/posix_io.h"

namespace sackli {

void AppendFile::Open(std::string path) {
  path_ = std::move(path);
  int fd;
  do {
    fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) ThrowOsError(errno, "open for writing", path_);
  fd_ = fd;
  buffer_.reserve(kAppendBufferBytes);
}

AppendFile::~AppendFile() {
  if (fd_ >= 0) ::close(fd_);
}

void AppendFile::Append(const char* data, size_t n) {
  if (buffer_.size() + n > kAppendBufferBytes) FlushBuffer();
  if (n >= kAppendBufferBytes) {
    WriteFully(fd_, data, n, path_);
  } else {
    buffer_.append(data, n);
  }
}

void AppendFile::FlushBuffer() {
  if (buffer_.empty()) return;
  WriteFully(fd_, buffer_.data(), buffer_.size(), path_);
  buffer_.clear();
}

void AppendFile::Sync() {
  if (fd_ >= 0 && ::fsync(fd_) != 0) ThrowOsError(errno, "fsync", path_);
}

void AppendFile::Close() {
  if (fd_ < 0) return;
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0 && errno != EINTR) ThrowOsError(errno, "close", path_);
}

}  // namespace sackli
