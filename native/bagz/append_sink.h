// Where the writer's bytes go: an append-only sink. The writer appends a
// bag's records (and, for TAIL placement, then its limits) to one sink and
// never reads them back, so the records need not sit in a local file: the
// bindings stream them into an upload (native/python/upload_sink.h).
//
// Errors: Append, FlushBuffer and Close throw what the destination throws
// (sackli::Error for local files, naming the file). A sink is used by one
// thread at a time (the writer calls it under its lock); not thread-safe.
#pragma once

#include <cstddef>
#include <string>

namespace sackli {

class AppendSink {
 public:
  virtual ~AppendSink() = default;
  // Appends n bytes; may keep them in a buffer until FlushBuffer.
  virtual void Append(const char* data, size_t n) = 0;
  // Hands the buffered bytes on to the destination.
  virtual void FlushBuffer() = 0;
  // Makes the bytes handed on so far durable where the destination can
  // (fsync for a local file); a no-op for destinations that commit
  // durably on their own (an upload, committed when it completes).
  virtual void Sync() {}
  // Closes; bytes not yet flushed are dropped (the writer flushes first
  // unless it is discarding the bag). Idempotent.
  virtual void Close() = 0;
  // Bytes appended but not yet handed on.
  virtual size_t buffered() const = 0;
  // The destination, for error messages.
  virtual const std::string& path() const = 0;
};

// A local file created (truncated) for appending, written through a buffer
// of kAppendBufferBytes (larger appends go straight to the file).
class AppendFile : public AppendSink {
 public:
  static constexpr size_t kAppendBufferBytes = size_t{1} << 20;

  AppendFile() = default;
  ~AppendFile() override;
  AppendFile(const AppendFile&) = delete;
  AppendFile& operator=(const AppendFile&) = delete;

  // Creates (truncates) `path`. Throws an Error naming it.
  void Open(std::string path);
  void Append(const char* data, size_t n) override;
  void FlushBuffer() override;
  void Sync() override;
  void Close() override;
  size_t buffered() const override { return buffer_.size(); }
  const std::string& path() const override { return path_; }
  int fd() const { return fd_; }

 private:
  std::string path_;
  int fd_ = -1;
  std::string buffer_;
};

}  // namespace sackli
