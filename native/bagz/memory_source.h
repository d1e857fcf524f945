// Bytes already in memory (a caller's buffer) as a ByteSource, so the code
// that reads mapped files reads them too. The memory is borrowed: its owner
// keeps it alive and unchanged for the source's lifetime. Thread-safe.
#pragma once

#include <cstring>
#include <string>

#include "bagz/byte_source.h"
#include "bagz/errors.h"

namespace sackli {

class MemorySource final : public ByteSource {
 public:
  MemorySource(const char* data, uint64_t size, std::string name)
      : data_(data), size_(size), name_(std::move(name)) {}

  uint64_t size() const override { return size_; }
  const std::string& path() const override { return name_; }
  const char* mapped() const override { return data_; }
  void Read(uint64_t offset, size_t length, char* dst) const override {
    if (offset > size_ || length > size_ - offset) {
      ThrowCorruption(name_, offset,
                      "read of " + std::to_string(length) +
                          " bytes past the end (" + std::to_string(size_) +
                          " bytes)");
    }
    if (length > 0) std::memcpy(dst, data_ + offset, length);
  }

 private:
  const char* data_;
  uint64_t size_;
  std::string name_;
};

}  // namespace sackli
