#include "writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "errors.h"
#include "format.h"
#include "posix_io.h"
#include "thread_pool.h"

namespace sackli {
namespace {

constexpr size_t kBufferBytes = 1 << 20;

int OpenForWriting(const std::string& path, int flags) {
  int fd;
  do {
    fd = ::open(path.c_str(), flags | O_CLOEXEC, 0666);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) ThrowOsError(errno, "open for writing", path);
  return fd;
}

uint64_t FileSize(int fd, const std::string& path) {
  struct stat st;
  if (::fstat(fd, &st) != 0) ThrowOsError(errno, "stat", path);
  return static_cast<uint64_t>(st.st_size);
}

// Appends `n` bytes of `from` (starting at offset 0) to the end of `to`.
void AppendFileContents(int from, const std::string& from_path, uint64_t n,
                        int to, const std::string& to_path) {
  std::string chunk;
  for (uint64_t done = 0; done < n;) {
    const size_t step = static_cast<size_t>(std::min<uint64_t>(kBufferBytes, n - done));
    chunk.resize(step);
    PreadFully(from, done, step, chunk.data(), from_path);
    WriteFully(to, chunk.data(), step, to_path);
    done += step;
  }
}

}  // namespace

Writer::AppendFile::AppendFile(std::string path) : path_(std::move(path)) {
  fd_ = OpenForWriting(path_, O_RDWR | O_CREAT | O_TRUNC);
  buffer_.reserve(kBufferBytes);
}

Writer::AppendFile::~AppendFile() {
  if (fd_ >= 0) ::close(fd_);
}

void Writer::AppendFile::Append(const char* data, size_t n) {
  if (buffer_.size() + n > kBufferBytes) FlushBuffer();
  if (n >= kBufferBytes) {
    WriteFully(fd_, data, n, path_);
  } else {
    buffer_.append(data, n);
  }
}

void Writer::AppendFile::FlushBuffer() {
  if (buffer_.empty()) return;
  WriteFully(fd_, buffer_.data(), buffer_.size(), path_);
  buffer_.clear();
}

void Writer::AppendFile::Close() {
  if (fd_ < 0) return;
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0 && errno != EINTR) ThrowOsError(errno, "close", path_);
}

Writer::Writer(std::string path, WriterOptions options)
    : path_(std::move(path)),
      options_(std::move(options)),
      records_(path_),
      limits_(LimitsPathFor(path_)) {}

Writer::~Writer() {
  try {
    Close();
  } catch (...) {
    // A destructor cannot report; the limits file stays for recovery.
  }
}

void Writer::CheckOpenLocked() const {
  if (closed_) {
    throw Error(ErrorKind::kClosed, path_ + ": write to a closed Writer", path_);
  }
}

void Writer::AppendLocked(std::string_view stored) {
  records_.Append(stored.data(), stored.size());
  bytes_written_ += stored.size();
  char limit[kLimitBytes];
  StoreU64(limit, bytes_written_);
  // A limit must never reach the disk before the bytes it points past.
  if (limits_.buffered() + kLimitBytes > kBufferBytes) records_.FlushBuffer();
  limits_.Append(limit, kLimitBytes);
  ++records_written_;
}

void Writer::Write(std::string_view record) {
  if (!options_.codec.compressed() || record.empty()) {
    std::lock_guard<std::mutex> lock(mutex_);
    CheckOpenLocked();
    AppendLocked(record);
    return;
  }
  thread_local std::string encoded;
  encoded.clear();
  try {
    options_.codec.Encode(record.data(), record.size(), encoded);
  } catch (const CodecError& e) {
    throw Error(ErrorKind::kIo, path_ + ": " + e.what(), path_);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  CheckOpenLocked();
  AppendLocked(encoded);
}

void Writer::WriteMany(const std::vector<std::string_view>& records) {
  if (!options_.codec.compressed()) {
    std::lock_guard<std::mutex> lock(mutex_);
    CheckOpenLocked();
    for (std::string_view record : records) AppendLocked(record);
    return;
  }
  std::vector<std::string> encoded(records.size());
  uint64_t total = 0;
  for (std::string_view record : records) total += record.size();
  const size_t parallelism =
      total >= 64 * 1024 ? options_.max_parallelism : 1;
  const size_t blocks = std::min(records.size(), parallelism * 8);
  ThreadPool::Shared().ParallelFor(blocks, parallelism, [&](size_t b) {
    const size_t begin = records.size() * b / blocks;
    const size_t end = records.size() * (b + 1) / blocks;
    for (size_t i = begin; i < end; ++i) {
      try {
        options_.codec.Encode(records[i].data(), records[i].size(), encoded[i]);
      } catch (const CodecError& e) {
        throw Error(ErrorKind::kIo, path_ + ": " + e.what(), path_);
      }
    }
  });
  std::lock_guard<std::mutex> lock(mutex_);
  CheckOpenLocked();
  for (const std::string& stored : encoded) AppendLocked(stored);
}

void Writer::Flush() {
  std::lock_guard<std::mutex> lock(mutex_);
  CheckOpenLocked();
  records_.FlushBuffer();
  limits_.FlushBuffer();
}

void Writer::AppendLimitsToRecordsLocked() {
  const uint64_t limits_bytes = FileSize(limits_.fd(), limits_.path());
  AppendFileContents(limits_.fd(), limits_.path(), limits_bytes, records_.fd(),
                     records_.path());
}

void Writer::Close() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (closed_) return;
  closed_ = true;
  records_.FlushBuffer();
  limits_.FlushBuffer();
  if (options_.placement == LimitsPlacement::kTail) {
    AppendLimitsToRecordsLocked();
    records_.Close();
    limits_.Close();
    if (::unlink(limits_.path().c_str()) != 0 && errno != ENOENT) {
      ThrowOsError(errno, "delete", limits_.path());
    }
  } else {
    records_.Close();
    limits_.Close();
  }
}

uint64_t Writer::records_written() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return records_written_;
}

uint64_t Writer::bytes_written() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bytes_written_;
}

bool Writer::closed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return closed_;
}

RecoverResult RecoverBag(const std::string& path) {
  const std::string limits_path = LimitsPathFor(path);
  const int records_fd = OpenForWriting(path, O_RDWR);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } close_records{records_fd};
  int limits_fd;
  do {
    limits_fd = ::open(limits_path.c_str(), O_RDONLY | O_CLOEXEC);
  } while (limits_fd < 0 && errno == EINTR);
  if (limits_fd < 0) {
    if (errno == ENOENT) {
      throw Error(ErrorKind::kNotFound,
                  path + ": nothing to recover: " + limits_path +
                      " does not exist (the bag is complete, or its limits "
                      "are lost)",
                  limits_path, ENOENT);
    }
    ThrowOsError(errno, "open", limits_path);
  }
  Closer close_limits{limits_fd};

  const uint64_t records_size = FileSize(records_fd, path);
  const uint64_t limits_size = FileSize(limits_fd, limits_path);
  const uint64_t found = limits_size / kLimitBytes;

  // Keep the longest usable prefix of limits.
  RecoverResult result;
  uint64_t previous = 0;
  std::string chunk;
  for (uint64_t first = 0; first < found;) {
    const uint64_t count =
        std::min<uint64_t>(found - first, kBufferBytes / kLimitBytes);
    chunk.resize(static_cast<size_t>(count * kLimitBytes));
    PreadFully(limits_fd, first * kLimitBytes, chunk.size(), chunk.data(),
               limits_path);
    uint64_t usable = 0;
    while (usable < count) {
      const uint64_t limit = LoadU64(chunk.data() + usable * kLimitBytes);
      if (limit < previous || limit > records_size) break;
      previous = limit;
      ++usable;
    }
    result.records += usable;
    if (usable < count) break;
    first += count;
  }
  result.dropped_limits = found - result.records;
  result.dropped_bytes = records_size - previous;

  if (::ftruncate(records_fd, static_cast<off_t>(previous)) != 0) {
    ThrowOsError(errno, "truncate", path);
  }
  if (::lseek(records_fd, 0, SEEK_END) < 0) ThrowOsError(errno, "seek", path);
  AppendFileContents(limits_fd, limits_path, result.records * kLimitBytes,
                     records_fd, path);
  if (::fsync(records_fd) != 0) ThrowOsError(errno, "fsync", path);
  if (::unlink(limits_path.c_str()) != 0) ThrowOsError(errno, "delete", limits_path);
  return result;
}

}  // namespace sackli
