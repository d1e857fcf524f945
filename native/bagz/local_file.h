// Local files as ByteSources. The default maps the file; the cache policies
// trade the page cache for predictable memory use:
//   kSystem         mmap, let the kernel cache pages. Within process-wide
//                   budgets (local_file.cc): a file of at most 4 KiB is read
//                   whole at open instead, and past the mapping budget files
//                   are read with pread through DescriptorCache.
//   kDropAfterRead  pread, then posix_fadvise(DONTNEED) on what was read.
//   kDirectIo       O_DIRECT with 4 KiB-aligned reads through a bounce buffer;
//                   a file system that refuses O_DIRECT raises kInvalidArgument.
// Access patterns become madvise/posix_fadvise hints. macOS has neither
// O_DIRECT nor posix_fadvise: F_NOCACHE and F_RDAHEAD stand in (see
// local_file.cc and docs/platforms.md).
#pragma once

#include <memory>
#include <string>

#include "bagz/byte_source.h"

namespace sackli {

// kLast: the last value, as in shard.h.
enum class AccessPattern { kSystem = 0, kRandom = 1, kSequential = 2, kLast = kSequential };
enum class CachePolicy { kSystem = 0, kDropAfterRead = 1, kDirectIo = 2, kLast = kDirectIo };

// Throws kNotFound for a missing file, kIo (EISDIR) for a directory.
std::shared_ptr<ByteSource> OpenLocalFile(const std::string& path,
                                          AccessPattern access,
                                          CachePolicy cache);

bool LocalFileExists(const std::string& path);

SourceOpener LocalOpener(AccessPattern access, CachePolicy cache);

}  // namespace sackli
