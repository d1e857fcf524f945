// Writes one bag file as bagz does: payloads go to the records file and
// limits to `limits.<name>` as they are written, so flush() makes everything
// so far readable with SEPARATE placement and a crash leaves a recoverable
// bag. On close, TAIL placement appends the limits to the records file and
// deletes `limits.<name>`.
//
// Thread-safe: records are compressed outside the lock (in parallel for
// WriteMany) and appended in call order under it.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "codec.h"
#include "shard.h"

namespace sackli {

struct WriterOptions {
  LimitsPlacement placement = LimitsPlacement::kTail;
  Codec codec;
  size_t max_parallelism = 1;  // threads WriteMany may compress on
};

class Writer {
 public:
  // Creates (truncates) `path` and its limits file. Throws kNotFound when the
  // folder does not exist, kIo (EISDIR) when `path` is a directory.
  Writer(std::string path, WriterOptions options);
  // Closes the file if still open, swallowing errors (call Close() to see them).
  ~Writer();
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  void Write(std::string_view record);
  // Compresses the records in parallel, then appends them in order.
  void WriteMany(const std::vector<std::string_view>& records);
  // Hands everything written so far to the OS (readable with SEPARATE limits).
  void Flush();
  // Idempotent.
  void Close();

  const std::string& path() const { return path_; }
  uint64_t records_written() const;
  uint64_t bytes_written() const;  // bytes of the records section so far
  bool closed() const;

 private:
  class AppendFile {
   public:
    AppendFile(std::string path);
    ~AppendFile();
    void Append(const char* data, size_t n);
    void FlushBuffer();
    void Close();
    int fd() const { return fd_; }
    const std::string& path() const { return path_; }
    size_t buffered() const { return buffer_.size(); }

   private:
    std::string path_;
    int fd_ = -1;
    std::string buffer_;
  };

  void AppendLocked(std::string_view stored);
  void CheckOpenLocked() const;
  void AppendLimitsToRecordsLocked();

  const std::string path_;
  const WriterOptions options_;
  mutable std::mutex mutex_;
  AppendFile records_;
  AppendFile limits_;
  uint64_t records_written_ = 0;
  uint64_t bytes_written_ = 0;
  bool closed_ = false;
};

// Turns an interrupted write (a records file and its `limits.<name>`) into a
// complete bag with TAIL limits: keeps the longest prefix of whole limits that
// is monotonic and inside the records file, truncates the records file after
// the last kept record, appends the limits and deletes the limits file.
struct RecoverResult {
  uint64_t records = 0;          // records in the recovered bag
  uint64_t dropped_limits = 0;   // limits found but not usable
  uint64_t dropped_bytes = 0;    // record bytes past the last usable limit
};
RecoverResult RecoverBag(const std::string& path);

}  // namespace sackli
