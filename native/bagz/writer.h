// Writes one bag file as bagz does, but never in place: the bag is written in
// a partial folder beside the target (format.h, PartialFolderPrefix) and
// renamed onto the target when it is complete, so a reader of the target
// sees the old file or the new one, never a half-written one (and readers of
// the old file keep it). Payloads go to the partial records file and limits
// to its `limits.<name>` as they are written, so flush() makes everything so
// far readable there with SEPARATE placement and a crash leaves a recoverable
// bag. On close, TAIL placement appends the limits to the records file and
// deletes `limits.<name>`; then the file (for SEPARATE, its limits file
// first) is renamed onto the target and the partial folder removed.
//
// Compressed records smaller than kLargeRecordBytes are copied into batches
// that the shared thread pool compresses while the caller goes on; finished
// batches are appended strictly in call order by whichever call comes next
// (or Flush/Close). The batches in flight are bounded in number (two per
// thread of max_parallelism) and in bytes (kMaxBytesInFlight for their
// records and compressed forms): a call that would exceed either waits. A
// record of kLargeRecordBytes or more is not copied: the calling thread
// compresses it from the caller's buffer (the lock released meanwhile) into
// a frame buffer of which only the frame's pages are touched, appended as
// soon as the records before it are. So what a writer holds stays within
// kMaxBytesInFlight plus one batch, plus for each thread writing a large
// record its compressed frame (at most the record's size and 0.4%),
// whatever max_parallelism is. The buffer of the last large record's frame
// is kept, until Close, for the next one: a fresh buffer page-faults in
// every page its frame takes, which cost more than compressing did.
// Uncompressed records are appended at once. Thread-safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "bagz/append_sink.h"
#include "bagz/codec.h"
#include "bagz/record_checksums.h"
#include "bagz/shard.h"

namespace sackli {

// How one Writer writes its file, resolved for it (the codec of its own
// path). The engine's layer: Python's options reach it through the bindings'
// WriterBindingOptions (python/bagz/options.h).
struct WriterConfig {
  LimitsPlacement placement = LimitsPlacement::kTail;
  Codec codec;
  size_t max_parallelism = 1;  // threads WriteMany may compress on
  // false: write into the target itself, as bagz does (no partial folder):
  // with SEPARATE placement, Flush makes the records so far readable there.
  // Local files only (a streamed writer must be atomic).
  bool atomic = true;
  // fsync the files before the rename that publishes them, and the folder
  // after it: a Close that returned survives power loss.
  bool durable = false;
  // Write a CRC-32C sidecar (record_checksums.h) beside the bag: its
  // records' CRCs go to `<partial>.crc32c.unfinished` as they are written,
  // the trailer on Close, and Publish moves `<partial>.crc32c` onto
  // `<target>.crc32c` before the records. Uncompressed bags only (the
  // bindings refuse it for others). Without it, Publish removes a sidecar
  // beside the target: it belonged to the old content.
  bool record_checksums = false;
};

class Writer {
 public:
  // Creates the partial folder of `path` and the files in it (or, not
  // atomic, `path` and its limits file themselves). A `path` that is a
  // symbolic link is written through: the file it points to is replaced,
  // with the partial folder beside that file. Throws kNotFound when the
  // folder of `path` does not exist, kIo (EISDIR) when `path` is a
  // directory, kInvalidArgument for a streamed writer that is not atomic.
  Writer(std::string path, WriterConfig options);
  // Streams the records (and, for TAIL, the limits) into `records` instead
  // of a local file: the bytes leave as they are written, so the local disk
  // holds only the limits (8 bytes a record) in the partial folder beside
  // `path`. Close(publish) publishes only what is local: for SEPARATE the
  // limits file, renamed onto `limits.<target name>`; making the streamed
  // records visible (completing an upload) is the owner of the sink's job,
  // after Close. Throws as the constructor above.
  Writer(std::string path, WriterConfig options, std::unique_ptr<AppendSink> records);
  // Closes (and publishes) the file if still open, swallowing errors (call
  // Close() to see them).
  ~Writer();
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  // How many records, and bytes of them, a caller gathering records one by
  // one (the bindings' iterable path) should hand to one WriteMany: enough
  // that a call costs nothing next to its records, few enough that what the
  // caller holds for the call stays bounded.
  static constexpr size_t kWriteManyMaxRecords = 4096;
  static constexpr size_t kWriteManyMaxBytes = size_t{16} << 20;
  // A compressed record at least this large is compressed by the calling
  // thread from the caller's buffer (no copy).
  static constexpr size_t kLargeRecordBytes = size_t{16} << 20;
  // The bytes that batches in flight may hold (their records and their
  // compressed forms at worst), whatever max_parallelism is; one batch is
  // always let through, so a batch larger than this still goes alone.
  static constexpr size_t kMaxBytesInFlight = size_t{256} << 20;

  // Both raise the error of an earlier batch that could not be written.
  void Write(std::string_view record);
  // Writes `records` in order, any number of them: the writer takes them in
  // slices of at most kWriteManyMaxRecords / kWriteManyMaxBytes, so the
  // memory it holds stays bounded (compressed records wait in at most a few
  // batches in flight) and other threads' calls are not locked out for the
  // whole call; their records may land between two slices. The records must
  // stay valid until the call returns.
  void WriteMany(const std::vector<std::string_view>& records);
  // Waits for the batches in flight, then hands everything written so far to
  // the OS (readable with SEPARATE limits).
  void Flush();
  // Finishes the file (waiting for the batches in flight), then, with
  // `publish`, renames it onto the target (Publish(path())). Idempotent. A
  // Close that fails leaves the partial files for sackli.recover.
  void Close(bool publish = true);
  // After Close(false): renames the finished file onto `target` (and, for
  // SEPARATE, its limits file onto `limits.<target name>` first) and removes
  // the partial folder. Links are followed: the file a symbolic link
  // `target` points to is replaced, the link stays. Durable, it then fsyncs
  // the folders renamed into unless `sync_folder` is false (a shard set
  // syncs its folder once, after its last shard). Idempotent.
  void Publish(const std::string& target, bool sync_folder = true);
  // Stops writing and deletes the partial files: the target is left as it
  // was. For a write that failed. Idempotent; no-op once published. A write
  // in place (not atomic) keeps what it wrote, with its limits file, for
  // sackli.recover: the target holds it already.
  void Discard();
  // Stops writing without publishing and keeps what was written where it
  // is (records before their limits, as much as can still reach the file):
  // what a crash after a flush leaves, for sackli.recover. For a writer
  // that was never closed; the destructor abandons an unclosed writer.
  // Idempotent; no-op once closed, discarded or published.
  void Abandon();

  // The target.
  const std::string& path() const { return path_; }
  // The records file being written, in the partial folder (for a streamed
  // writer, the name its limits file is derived from; no records there);
  // the target itself when not atomic.
  const std::string& partial_path() const { return partial_path_; }
  // Whether it writes a CRC-32C sidecar (WriterConfig::record_checksums).
  bool record_checksums() const { return options_.record_checksums; }
  // Whether the records go to a sink given to the constructor.
  bool streamed() const { return streamed_; }
  // Records accepted so far (compressed ones may still be in flight).
  uint64_t records_written() const;
  // Bytes of the records section so far; waits for the batches in flight.
  uint64_t bytes_written();
  bool closed() const;
  // Whether a write would now wait for batches in flight.
  bool backlogged() const;

 private:
  // Records to compress, and then their compressed forms; or the place in
  // call order of a large record its caller compresses (on_caller).
  struct Batch {
    std::string raw;  // the records back to back
    std::vector<size_t> ends;
    std::string encoded;
    std::vector<size_t> encoded_ends;
    bool on_caller = false;
    Codec::Frame frame;  // on_caller: the record's frame
    size_t cost = 0;  // bytes counted in bytes_in_flight_
    bool done = false;  // guarded by the writer's mutex
    std::exception_ptr error;
  };

  // Discard and Abandon: stops writing; `keep` leaves what was written (for
  // recovery), otherwise the partial files are deleted.
  void Stop(bool keep);
  // Waits until every batch reported (the pool is done with this writer).
  void WaitAllLocked(std::unique_lock<std::mutex>& lock);
  void AppendLocked(std::string_view stored);
  void CheckOpenLocked() const;
  void AppendLimitsToRecordsLocked();
  // Close with record_checksums: appends the sidecar's trailer and renames
  // it to `<partial>.crc32c`.
  void FinishChecksumsLocked();
  // Appends a record, or for compressed records, enqueues it.
  void AcceptLocked(std::string_view record, std::unique_lock<std::mutex>& lock);
  // Adds a record to the open batch; submits the batch once full.
  void EnqueueLocked(std::string_view record, std::unique_lock<std::mutex>& lock);
  // Compresses a large record on the calling thread, the lock released
  // meanwhile, its place in call order held in the queue.
  void CompressOnCallerLocked(std::string_view record,
                              std::unique_lock<std::mutex>& lock);
  void SubmitLocked();
  // Appends the finished batches at the front of the queue, in order.
  void DrainLocked();
  // Waits until at most `at_most` batches are in flight (draining as they
  // finish).
  void WaitLocked(std::unique_lock<std::mutex>& lock, size_t at_most);
  // Whether the batches in flight exceed their bounds (count or bytes).
  bool OverBoundsLocked() const;
  // Waits until they do not (draining as they finish).
  void WaitForRoomLocked(std::unique_lock<std::mutex>& lock);

  const std::string path_;
  const WriterConfig options_;
  const std::string partial_folder_;
  const std::string partial_path_;
  const bool streamed_;
  mutable std::mutex mutex_;
  std::unique_ptr<AppendSink> records_;
  AppendFile limits_;
  AppendFile checksums_;  // with record_checksums: the CRCs so far
  ChecksumsBuilder checksums_state_;
  uint64_t records_accepted_ = 0;  // appended or in a batch
  uint64_t bytes_written_ = 0;
  bool closed_ = false;
  bool finished_ = false;   // closed, and the partial bag is complete
  bool published_ = false;  // renamed onto its target
  bool discarded_ = false;
  std::unique_ptr<Batch> open_batch_;
  std::deque<std::shared_ptr<Batch>> in_flight_;
  std::condition_variable batch_done_;
  size_t max_in_flight_;
  size_t bytes_in_flight_ = 0;  // the costs of the batches in flight
  Codec::Frame spare_frame_;  // the last large record's, for the next one
  std::exception_ptr failure_;  // a batch that could not be written
};

// Turns an interrupted write (a records file and its `limits.<name>`) into a
// complete bag with TAIL limits: keeps the longest prefix of whole limits that
// is monotonic and inside the records file, truncates the records file after
// the last kept record, appends the limits and deletes the limits file.
// A write with record_checksums left `<name>.crc32c.unfinished`: its CRCs
// of the kept records become `<name>.crc32c` (with its trailer; CRCs that
// had not reached the file are computed from the records). Any other
// `<name>.crc32c` belonged to older content and is deleted.
struct RecoverResult {
  uint64_t records = 0;          // records in the recovered bag
  uint64_t dropped_limits = 0;   // limits found but not usable
  uint64_t dropped_bytes = 0;    // record bytes past the last usable limit
};
//
// Nothing is followed: `path` and its limits file are opened with O_NOFOLLOW
// through a descriptor of their folder (itself opened with O_NOFOLLOW when it
// is a partial folder, `.<name>.sackli-partial-<tag>`); a link, anything but
// a regular file, or a file with other hard links is refused (kIo: ELOOP or
// EPERM), naming it, before anything is changed.
RecoverResult RecoverBag(const std::string& path);

// The file that writing `path` replaces: `path` itself, or where the chain of
// symbolic links starting at it ends (the end may not exist yet, as for
// open(2) through a dangling link). Writers replace that file and keep the
// links, as writing through open(2) would. Like the kernel's
// fs.protected_symlinks, a link in a sticky, world-writable folder that is
// owned by neither the caller (euid) nor the folder's owner is not followed:
// kIo with EACCES naming the link. ELOOP after 40 links.
std::string ResolveWriteLinks(const std::string& path);

}  // namespace sackli
