#include "bagz/local_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "bagz/descriptor_cache.h"
#include "bagz/errors.h"
#include "bagz/fault_guard.h"
#include "bagz/posix_io.h"

// What bypasses or empties the page cache differs by platform (each choice
// is listed in docs/platforms.md):
//   Linux (glibc and musl), FreeBSD: O_DIRECT for DIRECT_IO; posix_fadvise
//     for DROP_AFTER_READ and the access hints.
//   macOS: neither. fcntl(F_NOCACHE) keeps a descriptor's reads out of the
//     page cache, for DIRECT_IO and DROP_AFTER_READ; fcntl(F_RDAHEAD, 0)
//     turns read-ahead off for RANDOM.
//   Elsewhere: DIRECT_IO is refused (kInvalidArgument) and the hints are
//     not given; DROP_AFTER_READ reads the same bytes through the cache.
#if defined(__linux__) && !defined(O_DIRECT)
#error "O_DIRECT is missing: compile with _GNU_SOURCE (g++ and clang++ define it)"
#endif
#if defined(O_DIRECT)
#define SACKLI_DIRECT_FLAG O_DIRECT
#elif defined(F_NOCACHE)
#define SACKLI_DIRECT_NOCACHE 1
#define SACKLI_DIRECT_FLAG 0
#else
#define SACKLI_NO_DIRECT_IO 1
#define SACKLI_DIRECT_FLAG 0
#endif

namespace sackli {
namespace {

constexpr uint64_t kDirectAlignment = 4096;

// Opens `path` read-only and checks it is a regular file; returns the
// descriptor, its status in `*st`.
int OpenRegularFile(const std::string& path, int extra_flags, struct stat* st) {
  int fd;
  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is rejected
  // below like every other non-regular file. Regular files ignore the flag.
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | extra_flags);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    const int error = errno;
    struct stat what;
    // O_DIRECT on a directory fails with EINVAL: say what is wrong with it.
    if (error == EINVAL && ::stat(path.c_str(), &what) == 0 && S_ISDIR(what.st_mode)) {
      ThrowOsError(EISDIR, "open", path);
    }
    errno = error;
    if (errno == EINVAL && SACKLI_DIRECT_FLAG != 0 &&
        (extra_flags & SACKLI_DIRECT_FLAG)) {
      throw Error(ErrorKind::kInvalidArgument,
                  path +
                      ": CachePolicy.DIRECT_IO: the file system refuses "
                      "O_DIRECT for this file; use CachePolicy.DROP_AFTER_READ",
                  path);
    }
    ThrowOsError(errno, "open", path);
  }
  if (::fstat(fd, st) != 0) {
    const int err = errno;
    ::close(fd);
    ThrowOsError(err, "stat", path);
  }
  if (S_ISDIR(st->st_mode)) {
    ::close(fd);
    ThrowOsError(EISDIR, "open", path);
  }
  if (!S_ISREG(st->st_mode)) {
    ::close(fd);
    throw Error(ErrorKind::kInvalidArgument,
                path + ": not a regular file (a bag must be a file, not a "
                       "FIFO, socket or device)",
                path);
  }
  return fd;
}

void CheckBounds(uint64_t offset, size_t length, uint64_t size,
                 const std::string& path) {
  if (offset > size || length > size - offset) {
    ThrowCorruption(path, offset,
                    "read of " + std::to_string(length) +
                        " bytes past the end of a file of " +
                        std::to_string(size) + " bytes");
  }
}

#if defined(POSIX_FADV_NORMAL)
int FadviseFor(AccessPattern access) {
  switch (access) {
    case AccessPattern::kRandom:
      return POSIX_FADV_RANDOM;
    case AccessPattern::kSequential:
      return POSIX_FADV_SEQUENTIAL;
    case AccessPattern::kSystem:
      break;
  }
  return POSIX_FADV_NORMAL;
}
#endif

// The access pattern of a file read with pread, as a hint to the kernel.
void AdviseAccess(int fd, AccessPattern access) {
  if (access == AccessPattern::kSystem) return;
#if defined(POSIX_FADV_NORMAL)
  posix_fadvise(fd, 0, 0, FadviseFor(access));
#elif defined(F_RDAHEAD)
  // macOS reads ahead by default, which is what SEQUENTIAL asks for.
  if (access == AccessPattern::kRandom) ::fcntl(fd, F_RDAHEAD, 0);
#else
  (void)fd;
#endif
}

// Sets up `fd` for DROP_AFTER_READ: where the pages cannot be dropped after
// each read (DropPages), they are kept out of the cache from the start.
void PrepareDropAfterRead(int fd) {
#if !defined(POSIX_FADV_DONTNEED) && defined(F_NOCACHE)
  ::fcntl(fd, F_NOCACHE, 1);
#else
  (void)fd;
#endif
}

// Tells the kernel that [offset, offset + length) of `fd` will not be read
// again: its pages leave the page cache.
void DropPages(int fd, uint64_t offset, size_t length) {
#if defined(POSIX_FADV_DONTNEED)
  posix_fadvise(fd, static_cast<off_t>(offset), static_cast<off_t>(length),
                POSIX_FADV_DONTNEED);
#else
  (void)fd;
  (void)offset;
  (void)length;
#endif
}

// --- How many files the process keeps in memory or mapped (issue 49: a set
// of 99,999 shards must not map 99,999 files, and vm.max_map_count is 65,530
// by default). The three ways of reading a file under CachePolicy::kSystem,
// cheapest first:
//   InlineFile  a file of at most kInlineFileBytes, read whole at open, while
//               the process holds less than kInlineBudgetBytes so.
//   MappedFile  mapped, while the process maps fewer than MappedFileBudget()
//               files.
//   PreadFile   read with pread through DescriptorCache's bounded set of
//               open descriptors.
constexpr uint64_t kInlineFileBytes = 4096;  // one page: what a mapping costs
constexpr uint64_t kInlineBudgetBytes = uint64_t{256} << 20;

std::atomic<uint64_t> g_inline_bytes{0};
std::atomic<size_t> g_mapped_files{0};

// A quarter of vm.max_map_count (the rest stays for the heap, libraries and
// the other mappings of the process), or SACKLI_MAX_MAPPED_FILES when set.
size_t MappedFileBudget() {
  static const size_t budget = [] {
    if (const char* set = std::getenv("SACKLI_MAX_MAPPED_FILES")) {
      const long value = std::strtol(set, nullptr, 10);
      if (value >= 0) return static_cast<size_t>(value);
    }
    size_t max_map_count = 65530;
#if defined(__linux__)
    std::ifstream file("/proc/sys/vm/max_map_count");
    size_t value = 0;
    if (file >> value && value > 0) max_map_count = value;
#endif
    return max_map_count / 4;
  }();
  return budget;
}

// Takes one unit of `counter` under `budget`, or returns false.
template <typename T>
bool Reserve(std::atomic<T>& counter, T amount, T budget) {
  T now = counter.load(std::memory_order_relaxed);
  do {
    if (now + amount > budget) return false;
  } while (!counter.compare_exchange_weak(now, now + amount,
                                          std::memory_order_relaxed));
  return true;
}

// A small file held in memory: one read at open, no mapping, no descriptor,
// and its first record costs no page fault. It reads as a mapping does
// (mapped()), and a later change of the file does not reach it.
class InlineFile final : public ByteSource {
 public:
  // `size` bytes reserved in g_inline_bytes, released on destruction.
  InlineFile(std::string path, int fd, uint64_t size)
      : path_(std::move(path)), size_(size) {
    struct Release {
      uint64_t size;
      bool armed = true;
      ~Release() {
        if (armed) g_inline_bytes.fetch_sub(size, std::memory_order_relaxed);
      }
    } release{size};
    data_.reset(new char[size > 0 ? size : 1]);
    PreadFully(fd, 0, static_cast<size_t>(size), data_.get(), path_);
    release.armed = false;
  }
  ~InlineFile() override { g_inline_bytes.fetch_sub(size_, std::memory_order_relaxed); }

  uint64_t size() const override { return size_; }
  const std::string& path() const override { return path_; }
  const char* mapped() const override { return data_.get(); }
  void Read(uint64_t offset, size_t length, char* dst) const override {
    CheckBounds(offset, length, size_, path_);
    if (length > 0) std::memcpy(dst, data_.get() + offset, length);
  }

 private:
  std::string path_;
  uint64_t size_;
  std::unique_ptr<char[]> data_;
};

class MappedFile final : public ByteSource {
 public:
  // Maps the file open as `fd` (`size` bytes); one unit of g_mapped_files is
  // reserved for it, released on destruction.
  MappedFile(std::string path, AccessPattern access, int fd, uint64_t size)
      : path_(std::move(path)), size_(size) {
    // Opening a bag reads its 8-byte trailer. Through the mapping that is a
    // page fault mapping a run of pages, and unmapping them again at close;
    // one pread costs a fraction of that.
    tail_size_ = static_cast<size_t>(std::min<uint64_t>(size_, sizeof(tail_)));
    try {
      PreadFully(fd, size_ - tail_size_, tail_size_, tail_, path_);
    } catch (...) {
      g_mapped_files.fetch_sub(1, std::memory_order_relaxed);
      throw;
    }
    if (size_ == 0) {  // mmap refuses empty mappings
      g_mapped_files.fetch_sub(1, std::memory_order_relaxed);
      return;
    }
    void* base = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
      const int error = errno;
      g_mapped_files.fetch_sub(1, std::memory_order_relaxed);
      ThrowOsError(error, "mmap", path_);
    }
    base_ = static_cast<const char*>(base);
    try {
      faults_ = std::make_unique<MappingFaults>(base_, size_, path_);
    } catch (...) {
      ::munmap(base, size_);
      g_mapped_files.fetch_sub(1, std::memory_order_relaxed);
      throw;
    }
    InstallFaultHandler();
    if (access == AccessPattern::kRandom) {
      ::madvise(base, size_, MADV_RANDOM);
    } else if (access == AccessPattern::kSequential) {
      ::madvise(base, size_, MADV_SEQUENTIAL);
    }
  }
  ~MappedFile() override {
    if (base_ == nullptr) return;
    ::munmap(const_cast<char*>(base_), size_);
    g_mapped_files.fetch_sub(1, std::memory_order_relaxed);
  }

  uint64_t size() const override { return size_; }
  const std::string& path() const override { return path_; }
  // An empty file has no mapping; any non-null pointer serves since no byte
  // of it is ever read.
  const char* mapped() const override { return base_ ? base_ : kEmpty; }
  MappingFaults* faults() const override { return faults_.get(); }
  void Read(uint64_t offset, size_t length, char* dst) const override {
    CheckBounds(offset, length, size_, path_);
    if (length == 0) return;
    if (offset >= size_ - tail_size_) {
      std::memcpy(dst, tail_ + (offset - (size_ - tail_size_)), length);
      return;
    }
    Guarded(*this, [&] { std::memcpy(dst, base_ + offset, length); });
  }

 private:
  static constexpr char kEmpty[1] = {0};
  std::string path_;
  uint64_t size_ = 0;
  const char* base_ = nullptr;
  std::unique_ptr<MappingFaults> faults_;  // null for an empty file
  char tail_[8] = {};  // the file's last bytes, read at open
  size_t tail_size_ = 0;
};

// pread-based file; with `drop_after_read` each read is followed by
// posix_fadvise(DONTNEED) so large scans do not fill the page cache. Its
// descriptor lives in DescriptorCache::Shared(): when evicted, the next read
// opens the file again, and raises if the path now names another file.
class PreadFile final : public ByteSource {
 public:
  PreadFile(std::string path, AccessPattern access, bool drop_after_read,
            int fd, const struct stat& st)
      : path_(std::move(path)),
        access_(access),
        drop_after_read_(drop_after_read),
        size_(static_cast<uint64_t>(st.st_size)),
        device_(st.st_dev),
        inode_(st.st_ino) {
    auto owned = std::make_shared<const Fd>(fd);
    Prepare(fd);
    DescriptorCache::Shared().Put(this, std::move(owned));
  }
  ~PreadFile() override { DescriptorCache::Shared().Forget(this); }

  uint64_t size() const override { return size_; }
  const std::string& path() const override { return path_; }
  void Read(uint64_t offset, size_t length, char* dst) const override {
    CheckBounds(offset, length, size_, path_);
    const std::shared_ptr<const Fd> fd =
        DescriptorCache::Shared().Get(this, [this] { return Reopen(); });
    PreadFully(fd->get(), offset, length, dst, path_);
    if (drop_after_read_ && length > 0) DropPages(fd->get(), offset, length);
  }

 private:
  void Prepare(int fd) const {
    AdviseAccess(fd, access_);
    if (drop_after_read_) PrepareDropAfterRead(fd);
  }
  // Opens the file again after its descriptor was evicted. Replaced since
  // (a rename over it): its content is not the one this reader opened.
  int Reopen() const {
    struct stat st;
    const int fd = OpenRegularFile(path_, 0, &st);
    if (st.st_dev != device_ || st.st_ino != inode_) {
      ::close(fd);
      ThrowCorruption(path_, 0,
                      "the file was replaced while this reader had it open "
                      "(another file now has its name): open it again to "
                      "read what it holds now");
    }
    Prepare(fd);
    return fd;
  }

  std::string path_;
  AccessPattern access_;
  bool drop_after_read_;
  uint64_t size_;
  dev_t device_;
  ino_t inode_;
};

// O_DIRECT file: every read is widened to aligned boundaries and goes through
// an aligned bounce buffer, bypassing the page cache entirely. On macOS the
// descriptor has F_NOCACHE instead, which needs no alignment but moves
// aligned reads straight from the disk too.
class DirectFile final : public ByteSource {
 public:
  explicit DirectFile(std::string path) : path_(std::move(path)) {
#if defined(SACKLI_NO_DIRECT_IO)
    throw Error(ErrorKind::kInvalidArgument,
                path_ + ": CachePolicy.DIRECT_IO needs O_DIRECT or F_NOCACHE, "
                        "which this platform lacks; use "
                        "CachePolicy.DROP_AFTER_READ",
                path_);
#else
    struct stat st;
    fd_ = OpenRegularFile(path_, SACKLI_DIRECT_FLAG, &st);
    size_ = static_cast<uint64_t>(st.st_size);
#endif
#if defined(SACKLI_DIRECT_NOCACHE)
    if (::fcntl(fd_, F_NOCACHE, 1) == -1) {
      const int error = errno;
      ::close(fd_);
      throw Error(ErrorKind::kInvalidArgument,
                  path_ + ": CachePolicy.DIRECT_IO: the file system refuses "
                          "F_NOCACHE (" + std::strerror(error) +
                          "); use CachePolicy.DROP_AFTER_READ",
                  path_);
    }
#endif
  }
  ~DirectFile() override { ::close(fd_); }

  uint64_t size() const override { return size_; }
  const std::string& path() const override { return path_; }
  void Read(uint64_t offset, size_t length, char* dst) const override {
    CheckBounds(offset, length, size_, path_);
    if (length == 0) return;
    const uint64_t start = offset & ~(kDirectAlignment - 1);
    const uint64_t end =
        (offset + length + kDirectAlignment - 1) & ~(kDirectAlignment - 1);
    const size_t span = static_cast<size_t>(end - start);
    void* raw = nullptr;
    if (::posix_memalign(&raw, kDirectAlignment, span) != 0) {
      throw std::bad_alloc();
    }
    std::unique_ptr<char, decltype(&std::free)> bounce(static_cast<char*>(raw),
                                                       &std::free);
    // The aligned span may run past the end of the file: a short read there
    // is expected, so read until the bytes we need are in.
    size_t have = 0;
    const size_t need = static_cast<size_t>(offset + length - start);
    while (have < need) {
      const ssize_t n =
          ::pread(fd_, bounce.get() + have,
                  std::min<size_t>(span - have, kMaxTransferBytes),
                  static_cast<off_t>(start + have));
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EINVAL) {
          throw Error(ErrorKind::kInvalidArgument,
                      path_ +
                          ": CachePolicy.DIRECT_IO: the file system refuses "
                          "aligned O_DIRECT reads; use "
                          "CachePolicy.DROP_AFTER_READ",
                      path_);
        }
        ThrowOsError(errno, "read", path_);
      }
      if (n == 0) ThrowCorruption(path_, start + have, "unexpected end of file");
      have += static_cast<size_t>(n);
    }
    std::memcpy(dst, bounce.get() + (offset - start), length);
  }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

}  // namespace

std::shared_ptr<ByteSource> OpenLocalFile(const std::string& path,
                                          AccessPattern access,
                                          CachePolicy cache) {
  if (cache == CachePolicy::kDirectIo) return std::make_shared<DirectFile>(path);
  struct stat st;
  const int fd = OpenRegularFile(path, 0, &st);
  if (cache == CachePolicy::kDropAfterRead) {
    return std::make_shared<PreadFile>(path, access, true, fd, st);
  }
  Fd owned(fd);  // closed once the file is in memory or mapped
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size <= kInlineFileBytes &&
      Reserve<uint64_t>(g_inline_bytes, size, kInlineBudgetBytes)) {
    return std::make_shared<InlineFile>(path, fd, size);
  }
  if (Reserve<size_t>(g_mapped_files, 1, MappedFileBudget())) {
    try {
      return std::make_shared<MappedFile>(path, access, fd, size);
    } catch (const Error& e) {
      // Out of address space or of mappings (RLIMIT_AS, vm.max_map_count
      // shared with other code): pread needs neither.
      if (e.errno_value() != ENOMEM) throw;
    }
  }
  return std::make_shared<PreadFile>(path, access, false, owned.release(), st);
}

bool LocalFileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

SourceOpener LocalOpener(AccessPattern access, CachePolicy cache) {
  return SourceOpener{
      [access, cache](const std::string& path) {
        return OpenLocalFile(path, access, cache);
      },
      &LocalFileExists};
}

}  // namespace sackli
