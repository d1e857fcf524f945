#include "bagz/errors.h"

#include <cerrno>
#include <cstring>

namespace sackli {

void ThrowOsError(int errno_value, const std::string& what,
                  const std::string& path) {
  std::string message = what + ": " + std::strerror(errno_value);
  ErrorKind kind = (errno_value == ENOENT || errno_value == ENOTDIR)
                       ? ErrorKind::kNotFound
                       : ErrorKind::kIo;
  throw Error(kind, message, path, errno_value);
}

void ThrowCorruption(const std::string& path, uint64_t offset,
                     const std::string& what) {
  throw Error(ErrorKind::kCorruption,
              path + ": " + what + " (byte offset " + std::to_string(offset) +
                  ")",
              path);
}

}  // namespace sackli
