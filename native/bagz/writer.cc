#include "bagz/writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <random>
#include <utility>

#include "bagz/crc32c.h"
#include "bagz/errors.h"
#include "bagz/format.h"
#include "bagz/posix_io.h"
#include "bagz/thread_pool.h"

namespace sackli {
namespace {

constexpr size_t kBufferBytes = AppendFile::kAppendBufferBytes;
// A compression batch is submitted at this many raw bytes or records: large
// enough that handing it to the pool costs nothing next to compressing it.
constexpr size_t kBatchBytes = 512 * 1024;
constexpr size_t kBatchRecords = 512;

// open(2) with O_CLOEXEC, retried on EINTR: a descriptor, or -1 with errno.
int OpenRetrying(const std::string& path, int flags) {
  int fd;
  do {
    fd = ::open(path.c_str(), flags | O_CLOEXEC, 0666);
  } while (fd < 0 && errno == EINTR);
  return fd;
}

int OpenForWriting(const std::string& path, int flags) {
  const int fd = OpenRetrying(path, flags);
  if (fd < 0) ThrowOsError(errno, "open for writing", path);
  return fd;
}

// Closes a descriptor when it goes out of scope.
struct FdCloser {
  int fd;
  ~FdCloser() { ::close(fd); }
};

uint64_t FileSize(int fd, const std::string& path) {
  struct stat st;
  if (::fstat(fd, &st) != 0) ThrowOsError(errno, "stat", path);
  return static_cast<uint64_t>(st.st_size);
}

// Reads the first `n` bytes of `from` in chunks, handing each to `append`.
template <typename Append>
void CopyFileContents(int from, const std::string& from_path, uint64_t n,
                      Append&& append) {
  std::string chunk;
  for (uint64_t done = 0; done < n;) {
    const size_t step = static_cast<size_t>(std::min<uint64_t>(kBufferBytes, n - done));
    chunk.resize(step);
    PreadFully(from, done, step, chunk.data(), from_path);
    append(chunk.data(), step);
    done += step;
  }
}

// A tag that no other writer of the same target uses at the same time, in
// this process or another (on this host or, on shared storage, another).
std::string UniqueTag() {
  static std::atomic<uint64_t> counter{0};
  static const uint32_t salt = std::random_device{}();
  char tag[64];
  std::snprintf(tag, sizeof(tag), "%ld-%llu-%08x", static_cast<long>(::getpid()),
                static_cast<unsigned long long>(counter.fetch_add(1)), salt);
  return tag;
}

std::string BaseName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string FolderOf(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

// Whether following the link `link` (lstat'ed as `st`) is what the kernel's
// fs.protected_symlinks forbids: in a sticky, world-writable folder, a link
// owned by neither the follower nor the folder's owner. A shared /tmp-like
// folder then cannot redirect a write into a file of the writer's own.
static void RefuseProtectedLink(const std::string& link, const struct stat& st) {
  struct stat folder;
  if (::stat(FolderOf(link).c_str(), &folder) != 0) return;  // reported by the open
  const bool shared = (folder.st_mode & S_ISVTX) && (folder.st_mode & S_IWOTH);
  if (!shared || st.st_uid == ::geteuid() || st.st_uid == folder.st_uid) return;
  throw Error(ErrorKind::kIo,
              link + ": a symbolic link owned by another user in a sticky, "
                     "world-writable folder: not followed for writing (as the "
                     "kernel's fs.protected_symlinks rule)",
              link, EACCES);
}

std::string ResolveWriteLinks(const std::string& path) {
  std::string current = path;
  for (int hops = 0; hops < 40; ++hops) {
    struct stat st;
    if (::lstat(current.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return current;
    RefuseProtectedLink(current, st);
    std::string link(static_cast<size_t>(st.st_size > 0 ? st.st_size : 4096), '\0');
    const ssize_t n = ::readlink(current.c_str(), link.data(), link.size());
    if (n < 0) ThrowOsError(errno, "read the link", current);
    link.resize(static_cast<size_t>(n));
    current = (!link.empty() && link[0] == '/') ? link : FolderOf(current) + "/" + link;
  }
  ThrowOsError(ELOOP, "open for writing", path);
}

namespace {

// Creates the partial folder for `records`, the file to be replaced, and
// returns it. Errors name `target`: for the user, the file being written.
std::string CreatePartialFolder(const std::string& target, const std::string& records) {
  struct stat st;
  if (::stat(target.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    ThrowOsError(EISDIR, "open for writing", target);
  }
  const std::string folder = PartialFolderPrefix(records) + UniqueTag();
  if (::mkdir(folder.c_str(), 0777) != 0) {
    ThrowOsError(errno, "open for writing", target);
  }
  return folder;
}

void RemoveQuietly(const std::string& path) { ::unlink(path.c_str()); }

void Rename(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) {
    ThrowOsError(errno, "rename " + from + " to", to);
  }
}

// fsync of a folder, so that the names renamed into it survive power loss.
// File systems that cannot sync a folder (EINVAL) keep names durable on
// their own terms; that is not an error.
void SyncFolder(const std::string& folder) {
  const int fd = OpenRetrying(folder, O_RDONLY | O_DIRECTORY);
  if (fd < 0) ThrowOsError(errno, "open the folder", folder);
  const int result = ::fsync(fd);
  const int error = errno;
  ::close(fd);
  if (result != 0 && error != EINVAL && error != ENOTSUP) {
    ThrowOsError(error, "fsync the folder", folder);
  }
}

// Moves `from` onto `to` atomically. rename(2) where it can; across file
// systems (a link into another mount) it copies into a temporary file beside
// `to` (synced when `durable`) and renames that.
void MoveFile(const std::string& from, const std::string& to, bool durable) {
  if (::rename(from.c_str(), to.c_str()) == 0) return;
  if (errno != EXDEV) ThrowOsError(errno, "rename " + from + " to", to);
  const std::string temporary =
      FolderOf(to) + "/." + BaseName(to) + ".sackli-copy-" + UniqueTag();
  const int in = OpenRetrying(from, O_RDONLY);
  if (in < 0) ThrowOsError(errno, "open", from);
  FdCloser close_in{in};
  AppendFile out;
  try {
    out.Open(temporary);
    CopyFileContents(in, from, FileSize(in, from),
                     [&](const char* data, size_t n) { out.Append(data, n); });
    out.FlushBuffer();
    if (durable) out.Sync();
    out.Close();
    Rename(temporary, to);
  } catch (...) {
    RemoveQuietly(temporary);
    throw;
  }
  RemoveQuietly(from);
}

}  // namespace

Writer::Writer(std::string path, WriterConfig options)
    : Writer(std::move(path), std::move(options), nullptr) {}

namespace {

// The partial folder of a writer: none for a write in place.
std::string PartialFolderFor(const std::string& path, const WriterConfig& options,
                             bool streamed) {
  if (options.atomic) return CreatePartialFolder(path, ResolveWriteLinks(path));
  if (streamed) {
    throw Error(ErrorKind::kInvalidArgument,
                path + ": a streamed write (an upload) cannot be in place: "
                       "its object appears only when the upload completes",
                path);
  }
  // open(2) follows the links; our rule for links owned by others holds
  // even where the kernel's fs.protected_symlinks is off.
  ResolveWriteLinks(path);
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    ThrowOsError(EISDIR, "open for writing", path);
  }
  return "";
}

}  // namespace

Writer::Writer(std::string path, WriterConfig options,
               std::unique_ptr<AppendSink> records)
    : path_(std::move(path)),
      options_(std::move(options)),
      partial_folder_(PartialFolderFor(path_, options_, records != nullptr)),
      partial_path_(options_.atomic
                        ? partial_folder_ + "/" + BaseName(ResolveWriteLinks(path_))
                        : path_),
      streamed_(records != nullptr),
      records_(std::move(records)),
      max_in_flight_(2 * std::max<size_t>(options_.max_parallelism, 1)) {
  try {
    if (!streamed_) {
      auto file = std::make_unique<AppendFile>();
      file->Open(partial_path_);  // in place: truncates the target
      records_ = std::move(file);
    }
    limits_.Open(LimitsPathFor(partial_path_));
    if (options_.record_checksums) {
      if (options_.codec.compressed()) {
        throw Error(ErrorKind::kInvalidArgument,
                    path_ + ": record_checksums is for uncompressed bags; a compressed "
                            "record is checked by its zstd frame's content checksum",
                    path_);
      }
      checksums_.Open(UnfinishedChecksumsPathFor(partial_path_));
    }
  } catch (...) {
    if (options_.atomic) {
      RemoveQuietly(partial_path_);
      RemoveQuietly(LimitsPathFor(partial_path_));
      RemoveQuietly(UnfinishedChecksumsPathFor(partial_path_));
      ::rmdir(partial_folder_.c_str());
    }
    throw;
  }
}

Writer::~Writer() {
  try {
    // Publishing here would make a write that was cut short (an exception
    // before Close) look complete: it stays unfinished, for recovery.
    if (!closed()) Abandon();
  } catch (...) {
    // A destructor cannot report; the partial files stay for recovery.
  }
}

void Writer::CheckOpenLocked() const {
  if (closed_) {
    throw Error(ErrorKind::kClosed, path_ + ": write to a closed Writer", path_);
  }
  if (failure_) std::rethrow_exception(failure_);
}

void Writer::AppendLocked(std::string_view stored) {
  const size_t buffered = records_->buffered();
  records_->Append(stored.data(), stored.size());
  // Handed on, the earlier records are in the file: their limits follow
  // them there, so a crash loses at most the last buffer of records (the
  // limits alone would otherwise wait for a megabyte of their own).
  const bool handed_on = records_->buffered() < buffered + stored.size();
  bytes_written_ += stored.size();
  char limit[kLimitBytes];
  StoreU64(limit, bytes_written_);
  // A limit must never reach the disk before the bytes it points past.
  if (limits_.buffered() + kLimitBytes > kBufferBytes) records_->FlushBuffer();
  if (handed_on) {
    limits_.FlushBuffer();
    if (options_.record_checksums) checksums_.FlushBuffer();
  }
  limits_.Append(limit, kLimitBytes);
  if (options_.record_checksums) {
    char crc[kChecksumBytes];
    checksums_state_.Add(Crc32c(stored.data(), stored.size()), bytes_written_, crc);
    checksums_.Append(crc, kChecksumBytes);
  }
}

void Writer::FinishChecksumsLocked() {
  const std::string trailer = checksums_state_.Trailer();
  checksums_.Append(trailer.data(), trailer.size());
  checksums_.FlushBuffer();
  if (options_.durable) checksums_.Sync();
  checksums_.Close();
  Rename(checksums_.path(), ChecksumsPathFor(partial_path_));
}

void Writer::Write(std::string_view record) {
  std::unique_lock<std::mutex> lock(mutex_);
  CheckOpenLocked();
  AcceptLocked(record, lock);
}

void Writer::WriteMany(const std::vector<std::string_view>& records) {
  size_t next = 0;
  do {
    std::unique_lock<std::mutex> lock(mutex_);
    CheckOpenLocked();
    // One slice per lock: a Flush, Close or Write of another thread gets its
    // turn between slices of a long call.
    const size_t end = next + std::min(records.size() - next, kWriteManyMaxRecords);
    size_t bytes = 0;
    while (next < end && bytes < kWriteManyMaxBytes) {
      // A record that waited (for room, or compressing a large one) let
      // other threads in: a Close among them ends the call.
      CheckOpenLocked();
      bytes += records[next].size();
      AcceptLocked(records[next++], lock);
    }
  } while (next < records.size());
}

void Writer::AcceptLocked(std::string_view record,
                          std::unique_lock<std::mutex>& lock) {
  ++records_accepted_;
  if (options_.codec.compressed() && record.size() >= kLargeRecordBytes) {
    CompressOnCallerLocked(record, lock);
  } else if (options_.codec.compressed()) {
    EnqueueLocked(record, lock);
  } else {
    AppendLocked(record);
  }
}

void Writer::EnqueueLocked(std::string_view record,
                           std::unique_lock<std::mutex>& lock) {
  if (!open_batch_) open_batch_ = std::make_unique<Batch>();
  open_batch_->raw.append(record.data(), record.size());
  open_batch_->ends.push_back(open_batch_->raw.size());
  if (open_batch_->raw.size() >= kBatchBytes ||
      open_batch_->ends.size() >= kBatchRecords) {
    SubmitLocked();
  }
  DrainLocked();
  WaitForRoomLocked(lock);
}

void Writer::CompressOnCallerLocked(std::string_view record,
                                    std::unique_lock<std::mutex>& lock) {
  SubmitLocked();  // the records before it go first
  const auto slot = std::make_shared<Batch>();
  slot->on_caller = true;
  in_flight_.push_back(slot);
  Codec::Frame frame = std::exchange(spare_frame_, Codec::Frame());
  lock.unlock();
  // Lock released: the pool's batches report, other threads write, while
  // this one compresses from the caller's buffer.
  std::exception_ptr error;
  try {
    frame = options_.codec.EncodeFrame(record.data(), record.size(), std::move(frame));
  } catch (const CodecError& e) {
    error = std::make_exception_ptr(Error(ErrorKind::kIo, path_ + ": " + e.what(), path_));
  } catch (...) {
    error = std::current_exception();
  }
  lock.lock();
  slot->frame = std::move(frame);
  slot->error = error;
  slot->done = true;
  batch_done_.notify_all();
  DrainLocked();  // appends it now unless batches ahead of it are in flight
}

void Writer::SubmitLocked() {
  if (!open_batch_) return;
  std::shared_ptr<Batch> batch(std::move(open_batch_));
  // Its records and, at worst, as many compressed bytes (plus zstd's bound
  // on the growth of incompressible data, under 1%).
  batch->cost = 2 * batch->raw.size() + batch->raw.size() / 128;
  bytes_in_flight_ += batch->cost;
  in_flight_.push_back(batch);
  // The task touches the writer only to report, under its lock; Close (and
  // so the destructor) waits for every batch to report.
  ThreadPool::Shared().Submit(
      [this, batch, codec = options_.codec] {
        std::exception_ptr error;
        try {
          size_t begin = 0;
          batch->encoded_ends.reserve(batch->ends.size());
          for (size_t end : batch->ends) {
            codec.Encode(batch->raw.data() + begin, end - begin, batch->encoded);
            batch->encoded_ends.push_back(batch->encoded.size());
            begin = end;
          }
        } catch (const CodecError& e) {
          error = std::make_exception_ptr(
              Error(ErrorKind::kIo, path_ + ": " + e.what(), path_));
        } catch (...) {
          error = std::current_exception();
        }
        std::lock_guard<std::mutex> lock(mutex_);
        batch->error = error;
        batch->done = true;
        batch_done_.notify_all();
      },
      options_.max_parallelism);
}

void Writer::DrainLocked() {
  if (failure_) std::rethrow_exception(failure_);
  while (!in_flight_.empty() && in_flight_.front()->done) {
    std::shared_ptr<Batch> batch = std::move(in_flight_.front());
    in_flight_.pop_front();
    bytes_in_flight_ -= batch->cost;
    try {
      if (batch->error) std::rethrow_exception(batch->error);
      if (batch->on_caller) {
        AppendLocked({batch->frame.bytes.get(), batch->frame.size});
        // Kept for the next large record (the larger of two).
        if (batch->frame.capacity > spare_frame_.capacity) {
          spare_frame_ = std::exchange(batch->frame, Codec::Frame());
        }
        continue;
      }
      size_t begin = 0;
      for (size_t end : batch->encoded_ends) {
        AppendLocked({batch->encoded.data() + begin, end - begin});
        begin = end;
      }
    } catch (...) {
      // Later records must not follow a lost batch: the writer fails for
      // good, every later call raising this error.
      failure_ = std::current_exception();
      throw;
    }
  }
}

void Writer::WaitLocked(std::unique_lock<std::mutex>& lock, size_t at_most) {
  while (in_flight_.size() > at_most) {
    // Another thread may drain the queue while this one waits.
    batch_done_.wait(lock, [this] {
      return in_flight_.empty() || in_flight_.front()->done;
    });
    DrainLocked();
  }
}

bool Writer::OverBoundsLocked() const {
  // One batch alone goes whatever its size.
  return in_flight_.size() > max_in_flight_ ||
         (bytes_in_flight_ > kMaxBytesInFlight && in_flight_.size() > 1);
}

void Writer::WaitForRoomLocked(std::unique_lock<std::mutex>& lock) {
  while (OverBoundsLocked()) {
    batch_done_.wait(lock, [this] {
      return in_flight_.empty() || in_flight_.front()->done;
    });
    DrainLocked();
  }
}

void Writer::Flush() {
  std::unique_lock<std::mutex> lock(mutex_);
  CheckOpenLocked();
  SubmitLocked();
  WaitLocked(lock, 0);
  records_->FlushBuffer();
  limits_.FlushBuffer();
  if (options_.record_checksums) checksums_.FlushBuffer();
}

void Writer::AppendLimitsToRecordsLocked() {
  // Through the sink, which may be an upload rather than a file.
  CopyFileContents(limits_.fd(), limits_.path(),
                   FileSize(limits_.fd(), limits_.path()),
                   [this](const char* data, size_t n) { records_->Append(data, n); });
}

void Writer::WaitAllLocked(std::unique_lock<std::mutex>& lock) {
  batch_done_.wait(lock, [this] {
    for (const auto& batch : in_flight_) {
      if (!batch->done) return false;
    }
    return true;
  });
}

void Writer::Close(bool publish) {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!closed_) {
      closed_ = true;
      // Every batch reports before anything else happens: the pool must be
      // done with this writer even when appending fails.
      SubmitLocked();
      WaitAllLocked(lock);
      DrainLocked();
      records_->FlushBuffer();
      limits_.FlushBuffer();
      if (options_.placement == LimitsPlacement::kTail) {
        AppendLimitsToRecordsLocked();
        records_->FlushBuffer();
        if (options_.durable) records_->Sync();
        records_->Close();
        limits_.Close();
        if (::unlink(limits_.path().c_str()) != 0 && errno != ENOENT) {
          ThrowOsError(errno, "delete", limits_.path());
        }
      } else {
        if (options_.durable) {
          records_->Sync();
          limits_.Sync();
        }
        records_->Close();
        limits_.Close();
      }
      if (options_.record_checksums) FinishChecksumsLocked();
      finished_ = true;
      spare_frame_ = {};
    }
  }
  if (publish) Publish(path_);
}

void Writer::Publish(const std::string& target, bool sync_folder) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (published_) return;
  if (!finished_) {
    const std::string where =
        options_.atomic ? "its files stay in " + partial_folder_
                        : "its files stay at " + partial_path_;
    throw Error(ErrorKind::kClosed,
                path_ + ": cannot publish a write that did not finish (" + where +
                    " for sackli.recover)",
                path_);
  }
  // In place, the records are already at `target` unless it is another
  // name (a shard written under its pending name).
  const bool move = options_.atomic || target != partial_path_;
  const bool durable = options_.durable;
  std::string folders[2];
  if (options_.placement == LimitsPlacement::kSeparate) {
    // Beside `target`, where readers of `target` look for it.
    const std::string limits_target = ResolveWriteLinks(LimitsPathFor(target));
    if (move) MoveFile(LimitsPathFor(partial_path_), limits_target, durable);
    folders[0] = FolderOf(limits_target);
  }
  // The sidecar goes first: a reader that finds the new records finds their
  // checks (one that opens between the two renames is told the sidecar is
  // another version's).
  const std::string checksums_target = ResolveWriteLinks(ChecksumsPathFor(target));
  if (options_.record_checksums) {
    if (move) MoveFile(ChecksumsPathFor(partial_path_), checksums_target, durable);
  } else if (!streamed_) {
    RemoveQuietly(checksums_target);  // the old content's
  }
  // Streamed records are published by the sink's owner.
  if (!streamed_) {
    const std::string records_target = ResolveWriteLinks(target);
    if (move) MoveFile(partial_path_, records_target, durable);
    folders[1] = FolderOf(records_target);
  }
  if (options_.placement == LimitsPlacement::kTail) {
    // A limits file beside the target belonged to its old content (a bag
    // with SEPARATE limits): left there, sackli.recover would take it for an
    // interrupted write of the new one.
    RemoveQuietly(LimitsPathFor(target));
  }
  if (durable && sync_folder) {
    if (!folders[0].empty()) SyncFolder(folders[0]);
    if (!folders[1].empty() && folders[1] != folders[0]) SyncFolder(folders[1]);
  }
  if (options_.atomic) ::rmdir(partial_folder_.c_str());
  published_ = true;
}

void Writer::Discard() { Stop(/*keep=*/!options_.atomic); }

void Writer::Abandon() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closed_) return;
  }
  Stop(/*keep=*/true);
}

void Writer::Stop(bool keep) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (published_ || discarded_) return;
  closed_ = true;
  if (keep && !failure_) SubmitLocked();  // records accepted reach the file too
  WaitAllLocked(lock);  // the pool must be done with this writer
  if (keep) {
    // What was written stays for sackli.recover: as much of it as can
    // still reach the file, records before their limits.
    try {
      DrainLocked();
      records_->FlushBuffer();
      limits_.FlushBuffer();
      if (options_.record_checksums) checksums_.FlushBuffer();
    } catch (...) {
      // What reached the file is recoverable; the rest is lost with the write.
    }
  }
  try {
    records_->Close();
    limits_.Close();
    checksums_.Close();
  } catch (const Error&) {
    // The files go anyway.
  }
  if (!keep) {
    RemoveQuietly(partial_path_);
    RemoveQuietly(LimitsPathFor(partial_path_));
    RemoveQuietly(UnfinishedChecksumsPathFor(partial_path_));
    ::rmdir(partial_folder_.c_str());
  }
  spare_frame_ = {};
  discarded_ = true;
}

uint64_t Writer::records_written() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return records_accepted_;
}

uint64_t Writer::bytes_written() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!closed_) {
    SubmitLocked();
    WaitLocked(lock, 0);
  }
  return bytes_written_;
}

bool Writer::backlogged() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return in_flight_.size() >= max_in_flight_ || bytes_in_flight_ >= kMaxBytesInFlight;
}

bool Writer::closed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return closed_;
}

namespace {

bool IsPartialFolderName(const std::string& name) {
  return !name.empty() && name[0] == '.' && name.find(kPartialMarker) != std::string::npos;
}

// Opens `name` in the folder `folder_fd` without following a link, and
// refuses what a writer never leaves there: anything but a regular file, or
// a file with other hard links (a name of a file elsewhere, which recovery
// would truncate). ENOENT is returned as -1 for the caller to explain.
int OpenEntryForRecovery(int folder_fd, const std::string& name, const std::string& path,
                         int flags) {
  int fd;
  do {
    fd = ::openat(folder_fd, name.c_str(), flags | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    if (errno == ENOENT) return -1;
    if (errno == ELOOP || errno == EMLINK) {
      throw Error(ErrorKind::kIo,
                  path + ": is a symbolic link: recovery follows no links (it recovers "
                         "only files a sackli writer left)",
                  path, ELOOP);
    }
    ThrowOsError(errno, "open", path);
  }
  struct stat st;
  const bool stated = ::fstat(fd, &st) == 0;
  const int stat_error = errno;
  if (!stated || !S_ISREG(st.st_mode) || st.st_nlink > 1) {
    ::close(fd);
    if (!stated) ThrowOsError(stat_error, "stat", path);
    const std::string why = !S_ISREG(st.st_mode)
                                ? "is not a regular file (a device, fifo, socket or folder)"
                                : "has " + std::to_string(st.st_nlink) +
                                      " hard links (a name of a file elsewhere)";
    throw Error(ErrorKind::kIo,
                path + ": " + why + ": recovery refuses it (it recovers only files a "
                                    "sackli writer left)",
                path, EPERM);
  }
  return fd;
}

}  // namespace

namespace {

// RecoverBag's sidecar: `<path>.crc32c.unfinished`'s CRCs of the first
// `records` records (those it lacks computed from the records file) and a
// trailer become `<path>.crc32c`; without an unfinished sidecar, a
// `<path>.crc32c` of older content is deleted. Every name is opened through
// `folder_fd`, without following links.
void RecoverChecksums(int folder_fd, const std::string& path, int records_fd,
                      int limits_fd, uint64_t records) {
  const std::string unfinished = UnfinishedChecksumsPathFor(path);
  const std::string finished = ChecksumsPathFor(path);
  const int in = OpenEntryForRecovery(folder_fd, BaseName(unfinished), unfinished, O_RDONLY);
  if (in < 0) {
    if (::unlinkat(folder_fd, BaseName(finished).c_str(), 0) != 0 && errno != ENOENT) {
      ThrowOsError(errno, "delete", finished);
    }
    return;
  }
  FdCloser close_in{in};
  const uint64_t kept = std::min(records, FileSize(in, unfinished) / kChecksumBytes);
  int out;
  do {
    out = ::openat(folder_fd, BaseName(finished).c_str(),
                   O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0666);
  } while (out < 0 && errno == EINTR);
  if (out < 0) ThrowOsError(errno, "open for writing", finished);
  FdCloser close_out{out};
  ChecksumsBuilder builder;
  const uint64_t per_chunk = kBufferBytes / kLimitBytes;
  std::string crcs, limits, record, written;
  uint64_t begin = 0;
  for (uint64_t first = 0; first < records; first += per_chunk) {
    const uint64_t count = std::min(per_chunk, records - first);
    limits.resize(static_cast<size_t>(count * kLimitBytes));
    PreadFully(limits_fd, first * kLimitBytes, limits.size(), limits.data(),
               LimitsPathFor(path));
    const uint64_t from_file = first < kept ? std::min(count, kept - first) : 0;
    crcs.resize(static_cast<size_t>(from_file * kChecksumBytes));
    if (from_file > 0) {
      PreadFully(in, first * kChecksumBytes, crcs.size(), crcs.data(), unfinished);
    }
    written.clear();
    for (uint64_t k = 0; k < count; ++k) {
      const uint64_t end = LoadU64(limits.data() + k * kLimitBytes);
      uint32_t crc;
      if (k < from_file) {
        crc = LoadU32(crcs.data() + k * kChecksumBytes);
      } else {  // written, but its CRC had not reached the file
        record.resize(static_cast<size_t>(end - begin));
        PreadFully(records_fd, begin, record.size(), record.data(), path);
        crc = Crc32c(record.data(), record.size());
      }
      char bytes[kChecksumBytes];
      builder.Add(crc, end, bytes);
      written.append(bytes, kChecksumBytes);
      begin = end;
    }
    WriteFully(out, written.data(), written.size(), finished);
  }
  const std::string trailer = builder.Trailer();
  WriteFully(out, trailer.data(), trailer.size(), finished);
  if (::fsync(out) != 0) ThrowOsError(errno, "fsync", finished);
  if (::unlinkat(folder_fd, BaseName(unfinished).c_str(), 0) != 0) {
    ThrowOsError(errno, "delete", unfinished);
  }
}

}  // namespace

RecoverResult RecoverBag(const std::string& path) {
  const std::string limits_path = LimitsPathFor(path);
  const std::string folder = FolderOf(path);
  const std::string name = BaseName(path);
  // Inside a partial folder (untrusted: a download, a shared folder) the
  // folder itself must not be a link either; every open and the unlink go
  // through its descriptor, so swapping a name for a link after a check
  // changes nothing.
  const int folder_flags =
      O_RDONLY | O_DIRECTORY | (IsPartialFolderName(BaseName(folder)) ? O_NOFOLLOW : 0);
  const int folder_fd = OpenRetrying(folder, folder_flags);
  if (folder_fd < 0) {
    if (errno == ELOOP || errno == ENOTDIR) {
      throw Error(ErrorKind::kIo,
                  folder + ": is a symbolic link, or not a folder: recovery follows no links",
                  folder, ELOOP);
    }
    ThrowOsError(errno, "open the folder", folder);
  }
  FdCloser close_folder{folder_fd};
  const int records_fd = OpenEntryForRecovery(folder_fd, name, path, O_RDWR);
  if (records_fd < 0) ThrowOsError(ENOENT, "open for writing", path);
  FdCloser close_records{records_fd};
  const int limits_fd =
      OpenEntryForRecovery(folder_fd, BaseName(limits_path), limits_path, O_RDONLY);
  if (limits_fd < 0) {
    throw Error(ErrorKind::kNotFound,
                path + ": nothing to recover: " + limits_path +
                    " does not exist (the bag is complete, or its limits "
                    "are lost)",
                limits_path, ENOENT);
  }
  FdCloser close_limits{limits_fd};

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
  CopyFileContents(limits_fd, limits_path, result.records * kLimitBytes,
                   [&](const char* data, size_t n) { WriteFully(records_fd, data, n, path); });
  if (::fsync(records_fd) != 0) ThrowOsError(errno, "fsync", path);
  RecoverChecksums(folder_fd, path, records_fd, limits_fd, result.records);
  if (::unlinkat(folder_fd, BaseName(limits_path).c_str(), 0) != 0) {
    ThrowOsError(errno, "delete", limits_path);
  }
  return result;
}

}  // namespace sackli
