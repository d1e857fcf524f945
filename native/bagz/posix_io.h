// Whole-buffer reads and writes on file descriptors, retrying on EINTR and
// short transfers. Errors name the file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace sackli {

// The most one read or write call moves. macOS refuses a transfer of more
// than INT_MAX bytes (EINVAL) where Linux moves 0x7ffff000 and returns: one
// size that suits both.
inline constexpr size_t kMaxTransferBytes = size_t{1} << 30;

// Reads exactly n bytes at offset; a premature end of file means the file
// is shorter than its metadata says: corruption at that offset.
void PreadFully(int fd, uint64_t offset, size_t n, char* dst,
                const std::string& path);

// Writes all n bytes at the file position.
void WriteFully(int fd, const char* data, size_t n, const std::string& path);

}  // namespace sackli
