// Errors raised by the engine. Every error names the file it concerns; the
// bindings map each kind onto one Python exception type (see design notes §6).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace sackli {

enum class ErrorKind {
  kNotFound,         // FileNotFoundError
  kCorruption,       // sackli.CorruptionError (a ValueError)
  kOutOfRange,       // IndexError
  kInvalidArgument,  // ValueError
  kIo,               // OSError (subclass chosen from errno)
  kClosed,           // ValueError: operation on a closed reader/writer
  kOutOfMemory,      // MemoryError: an allocation for a record failed
  kTooLarge,         // sackli.RecordTooLargeError (a ValueError): a record
                     // decodes to more than the reader's max_record_bytes
};

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message, std::string path = {},
        int errno_value = 0)
      : std::runtime_error(message),
        kind_(kind),
        path_(std::move(path)),
        errno_value_(errno_value) {}

  ErrorKind kind() const { return kind_; }
  // The file concerned, or empty.
  const std::string& path() const { return path_; }
  // The OS error number for kIo and kNotFound, or 0.
  int errno_value() const { return errno_value_; }

 private:
  ErrorKind kind_;
  std::string path_;
  int errno_value_;
};

// Throws kNotFound for ENOENT/ENOTDIR, kIo otherwise; `what` says which
// operation failed ("open", "read", ...).
[[noreturn]] void ThrowOsError(int errno_value, const std::string& what,
                               const std::string& path);

// Throws kCorruption: "<path>: <what> (byte offset <offset>)".
[[noreturn]] void ThrowCorruption(const std::string& path, uint64_t offset,
                                  const std::string& what);

// The most a reader decodes for one record when no cap is set.
constexpr uint64_t kUnlimitedRecordBytes = ~uint64_t{0};

[[noreturn]] inline void ThrowInvalidArgument(const std::string& message) {
  throw Error(ErrorKind::kInvalidArgument, message);
}

[[noreturn]] inline void ThrowOutOfRange(const std::string& message) {
  throw Error(ErrorKind::kOutOfRange, message);
}

}  // namespace sackli
