// Whole-buffer reads and writes on file descriptors, retrying on EINTR and
// short transfers. Errors name the file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace sackli {

// Reads exactly n bytes at offset; a premature end of file means the file
// is shorter than its metadata says: corruption at that offset.
void PreadFully(int fd, uint64_t offset, size_t n, char* dst,
                const std::string& path);

// Writes all n bytes at the file position.
void WriteFully(int fd, const char* data, size_t n, const std::string& path);

}  // namespace sackli
