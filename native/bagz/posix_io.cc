#include "bagz/posix_io.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "bagz/errors.h"

namespace sackli {

void PreadFully(int fd, uint64_t offset, size_t n, char* dst,
                const std::string& path) {
  while (n > 0) {
    const ssize_t got = ::pread(fd, dst, std::min(n, kMaxTransferBytes),
                                static_cast<off_t>(offset));
    if (got < 0) {
      if (errno == EINTR) continue;
      ThrowOsError(errno, "read", path);
    }
    if (got == 0) ThrowCorruption(path, offset, "unexpected end of file");
    dst += got;
    offset += static_cast<uint64_t>(got);
    n -= static_cast<size_t>(got);
  }
}

void WriteFully(int fd, const char* data, size_t n, const std::string& path) {
  while (n > 0) {
    const ssize_t written = ::write(fd, data, std::min(n, kMaxTransferBytes));
    if (written < 0) {
      if (errno == EINTR) continue;
      ThrowOsError(errno, "write", path);
    }
    data += written;
    n -= static_cast<size_t>(written);
  }
}

}  // namespace sackli
