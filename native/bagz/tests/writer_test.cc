// The writer: the bytes of TAIL and SEPARATE bags as docs/format.md gives
// them, compressed writes from several threads, the files that Close,
// Publish and Discard leave, Flush, writes in place (not atomic) and
// writes through symbolic links.
#include "bagz/writer.h"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "bagz/errors.h"
#include "bagz/format.h"
#include "bagz/tests/test_bags.h"
#include "bagz/thread_pool.h"

namespace sackli {
namespace {

using testing::FileExists;
using testing::OpenBag;
using testing::OpenOptions;
using testing::ReadFile;
using testing::TempDir;
using testing::U64;

WriterConfig Options(LimitsPlacement placement, Codec codec = Codec::None(),
                      size_t parallelism = 1) {
  WriterConfig options;
  options.placement = placement;
  options.codec = std::move(codec);
  options.max_parallelism = parallelism;
  return options;
}

// The example of docs/format.md.
const std::string kPayload = "abcdef123catcat";
const std::string kLimits = U64(6) + U64(9) + U64(15);

void WriteExample(Writer& writer) {
  writer.Write("abcdef");
  writer.WriteMany({"123", "catcat"});
}

TEST(Writer, TailBagBytesAreTheFormatsExample) {
  TempDir dir;
  const std::string path = dir.File("x.bag");
  {
    Writer writer(path, Options(LimitsPlacement::kTail));
    WriteExample(writer);
    EXPECT_EQ(writer.records_written(), 3u);
    EXPECT_EQ(writer.bytes_written(), 15u);
    writer.Close();
  }
  EXPECT_EQ(ReadFile(path), kPayload + kLimits);
  // Nothing else: no limits file, no partial folder.
  EXPECT_EQ(dir.List(), std::vector<std::string>{"x.bag"});
}

TEST(Writer, SeparateBagBytesAreTheFormatsExample) {
  TempDir dir;
  const std::string path = dir.File("x.bag");
  Writer writer(path, Options(LimitsPlacement::kSeparate));
  WriteExample(writer);
  writer.Close();
  EXPECT_EQ(ReadFile(path), kPayload);
  EXPECT_EQ(ReadFile(dir.File("limits.x.bag")), kLimits);
  EXPECT_EQ(dir.List(), (std::vector<std::string>{"limits.x.bag", "x.bag"}));
}

TEST(Writer, EmptyBagIsAnEmptyFile) {
  TempDir dir;
  const std::string path = dir.File("x.bagz");
  Writer(path, Options(LimitsPlacement::kTail, Codec::Zstd(3, ""))).Close();
  EXPECT_EQ(ReadFile(path), "");
  EXPECT_EQ(OpenBag({path})->size(), 0u);
}

TEST(Writer, CompressedRecordsAreOneFrameEachAndEmptyStaysEmpty) {
  TempDir dir;
  const std::string path = dir.File("x.bagz");
  const std::vector<std::string> records = {std::string(1000, 'a'), "", "b"};
  Writer writer(path, Options(LimitsPlacement::kTail, Codec::Zstd(3, "")));
  writer.WriteMany({records[0], records[1], records[2]});
  writer.Close();
  const std::string bytes = ReadFile(path);
  // Three limits at the tail; the empty record takes no bytes.
  const uint64_t end = LoadU64(bytes.data() + bytes.size() - 8);
  ASSERT_EQ(bytes.size(), end + 24);
  EXPECT_EQ(LoadU64(bytes.data() + end), LoadU64(bytes.data() + end + 8));
  EXPECT_LT(end, 100u);  // compressed
  // Every frame starts with zstd's magic number.
  EXPECT_EQ(bytes.substr(0, 4), std::string("\x28\xb5\x2f\xfd", 4));
  EXPECT_EQ(testing::ReadAll(*OpenBag({path})), records);
}

// Records of thread t are "t<t>-<i>", written in slices of `per_call`.
std::vector<std::string> ThreadRecords(int t, int n) {
  std::vector<std::string> records;
  for (int i = 0; i < n; ++i) {
    records.push_back("t" + std::to_string(t) + "-" + std::to_string(i) +
                      std::string(static_cast<size_t>(i % 50), 'x'));
  }
  return records;
}

TEST(Writer, CompressedWriteManyFromThreadsKeepsEachThreadsOrder) {
  TempDir dir;
  const std::string path = dir.File("x.bagz");
  constexpr int kThreads = 4;
  constexpr int kPerThread = 3000;
  {
    Writer writer(path, Options(LimitsPlacement::kTail, Codec::Zstd(1, ""), 4));
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&writer, t] {
        const std::vector<std::string> records = ThreadRecords(t, kPerThread);
        for (int first = 0; first < kPerThread; first += 250) {
          std::vector<std::string_view> call(records.begin() + first,
                                             records.begin() + first + 250);
          writer.WriteMany(call);
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
    EXPECT_EQ(writer.records_written(), uint64_t{kThreads} * kPerThread);
    writer.Close();
  }
  const std::vector<std::string> read = testing::ReadAll(*OpenBag({path}));
  ASSERT_EQ(read.size(), size_t{kThreads} * kPerThread);
  std::vector<std::vector<std::string>> by_thread(kThreads);
  for (const std::string& record : read) {
    by_thread[static_cast<size_t>(record[1] - '0')].push_back(record);
  }
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(by_thread[t], ThreadRecords(t, kPerThread)) << "thread " << t;
  }
}

// Keeps every thread of the shared pool busy until released, so that the
// batches a writer submits meanwhile stay in flight: what the writer then
// holds is what its bounds let in, however fast compression would be.
class BusyPool {
 public:
  explicit BusyPool(size_t at_least) : state_(std::make_shared<State>()) {
    ThreadPool& pool = ThreadPool::Shared();
    const size_t threads = std::max(pool.num_threads(), at_least);
    for (size_t i = 0; i < threads; ++i) {
      pool.Submit(
          [state = state_] {  // shared: a task may wake after the BusyPool is gone
            std::unique_lock<std::mutex> lock(state->mutex);
            ++state->busy;
            state->changed.notify_all();
            state->changed.wait(lock, [&] { return state->released; });
          },
          threads);
    }
    std::unique_lock<std::mutex> lock(state_->mutex);
    state_->changed.wait(lock, [&] { return state_->busy == threads; });
  }
  ~BusyPool() { Release(); }
  void Release() {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->released = true;
    state_->changed.notify_all();
  }

 private:
  struct State {
    std::mutex mutex;
    std::condition_variable changed;
    size_t busy = 0;
    bool released = false;
  };
  std::shared_ptr<State> state_;
};

// Polls `done` for up to ten seconds.
template <typename Done>
bool Eventually(Done done) {
  for (int i = 0; i < 10000 && !done(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return done();
}

// The stored records of a TAIL bag, as they are in the file.
std::vector<std::string> StoredRecords(const std::string& path, size_t n) {
  const std::string file = ReadFile(path);
  std::vector<std::string> stored;
  const size_t limits = file.size() - n * kLimitBytes;
  uint64_t begin = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t end = LoadU64(file.data() + limits + i * kLimitBytes);
    stored.push_back(file.substr(begin, end - begin));
    begin = end;
  }
  return stored;
}

// The byte bound, not only the count (two batches a thread, 128 here):
// records of 8 MiB, one batch each, stop at the 16th, whose batch takes the
// bytes in flight past kMaxBytesInFlight (16 x 16.06 MiB); once the pool
// runs again every record arrives, in order.
TEST(Writer, BatchesInFlightAreBoundedInBytes) {
  static_assert(Writer::kMaxBytesInFlight == size_t{256} << 20);
  TempDir dir;
  const std::string path = dir.File("x.bagz");
  const std::string record(size_t{8} << 20, 'r');
  constexpr size_t kParallelism = 64;
  constexpr int kRecords = 20;
  BusyPool busy(kParallelism);
  Writer writer(path, Options(LimitsPlacement::kTail, Codec::Zstd(1, ""), kParallelism));
  std::thread writing([&] {
    for (int i = 0; i < kRecords; ++i) writer.Write(record);
  });
  EXPECT_TRUE(Eventually([&] { return writer.records_written() == 16 && writer.backlogged(); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(writer.records_written(), 16u);  // still waiting for room
  busy.Release();
  writing.join();
  writer.Close();
  EXPECT_EQ(testing::ReadAll(*OpenBag({path})), std::vector<std::string>(kRecords, record));
}

// A record of kLargeRecordBytes or more is compressed by the caller into
// the frame Encode makes; it keeps its place after a batch still in flight
// (its frame waits for it) and before the records after it.
TEST(Writer, LargeRecordsKeepTheirPlaceAndTheirBytes) {
  TempDir dir;
  const std::string path = dir.File("x.bagz");
  std::string large(Writer::kLargeRecordBytes + 3, '\0');
  for (size_t i = 0; i < large.size(); ++i) large[i] = static_cast<char>((i * 7919) >> 9);
  // Three large ones: the second and third reuse the first one's buffer.
  const std::vector<std::string> records = {"before", large, "after", large.substr(1), "",
                                            large.substr(2)};
  const Codec codec = Codec::Zstd(3, "");
  {
    BusyPool busy(2);
    Writer writer(path, Options(LimitsPlacement::kTail, codec, 2));
    std::thread writing([&] {
      writer.Write(records[0]);
      writer.Write(records[1]);  // compressed here while "before" waits on the pool
      writer.WriteMany({records[2], records[3], records[4], records[5]});
    });
    EXPECT_TRUE(Eventually([&] { return writer.records_written() >= 2; }));
    busy.Release();
    writing.join();
    writer.Close();
  }
  std::vector<std::string> expected;
  for (const std::string& record : records) {
    std::string frame;
    codec.Encode(record.data(), record.size(), frame);
    expected.push_back(frame);
  }
  EXPECT_EQ(StoredRecords(path, records.size()), expected);
  EXPECT_EQ(testing::ReadAll(*OpenBag({path})), records);
}

// Close from another thread while a large record is being compressed waits
// for it: the record is in the bag, whole.
TEST(Writer, CloseWaitsForALargeRecordBeingCompressed) {
  TempDir dir;
  const std::string path = dir.File("x.bagz");
  const std::string large(Writer::kLargeRecordBytes * 2, 'L');
  Writer writer(path, Options(LimitsPlacement::kTail, Codec::Zstd(19, ""), 1));
  std::thread writing([&] { writer.Write(large); });
  EXPECT_TRUE(Eventually([&] { return writer.records_written() == 1; }));
  writer.Close();
  writing.join();
  EXPECT_EQ(testing::ReadAll(*OpenBag({path})), std::vector<std::string>{large});
}

TEST(Writer, WriteManyTakesMoreThanItsBoundsInOrder) {
  static_assert(Writer::kWriteManyMaxRecords > 0 && Writer::kWriteManyMaxBytes > 0);
  TempDir dir;
  for (const char* name : {"raw.bag", "zstd.bagz"}) {
    const std::string path = dir.File(name);
    const Codec codec = HasZstdSuffix(path) ? Codec::Zstd(1, "") : Codec::None();
    // More records than one slice holds, then more bytes than one slice holds.
    const std::vector<std::string> many = testing::MakeRecords(3 * Writer::kWriteManyMaxRecords + 5, 40);
    const std::string big(Writer::kWriteManyMaxBytes / 2 + 1, 'B');
    std::vector<std::string_view> call(many.begin(), many.end());
    for (int k = 0; k < 3; ++k) call.push_back(big);
    Writer writer(path, Options(LimitsPlacement::kTail, codec, 2));
    writer.WriteMany(call);
    writer.Close();
    const std::vector<std::string> read = testing::ReadAll(*OpenBag({path}));
    ASSERT_EQ(read.size(), call.size());
    for (size_t i = 0; i < call.size(); ++i) ASSERT_EQ(read[i], call[i]) << name << " record " << i;
  }
}

TEST(Writer, FlushMakesRecordsReadableAsSeparate) {
  TempDir dir;
  const std::string path = dir.File("x.bagz");
  Writer writer(path, Options(LimitsPlacement::kTail, Codec::Zstd(3, ""), 2));
  const std::vector<std::string> records = testing::MakeRecords(2000);
  std::vector<std::string_view> views(records.begin(), records.end());
  writer.WriteMany(views);
  writer.Flush();
  EXPECT_FALSE(FileExists(path));  // not published before Close
  OpenOptions separate;
  separate.placement = LimitsPlacement::kSeparate;
  EXPECT_EQ(testing::ReadAll(*OpenBag({writer.partial_path()}, separate)), records);
  writer.Close();
  EXPECT_EQ(testing::ReadAll(*OpenBag({path})), records);
}

TEST(Writer, CloseWithoutPublishThenPublishElsewhere) {
  TempDir dir;
  const std::string path = dir.File("x.bag");
  const std::string target = dir.File("y.bag");
  Writer writer(path, Options(LimitsPlacement::kSeparate));
  WriteExample(writer);
  writer.Close(/*publish=*/false);
  EXPECT_TRUE(writer.closed());
  EXPECT_FALSE(FileExists(path));
  EXPECT_EQ(ReadFile(writer.partial_path()), kPayload);
  writer.Publish(target);
  writer.Publish(target);  // idempotent
  EXPECT_EQ(ReadFile(target), kPayload);
  EXPECT_EQ(ReadFile(dir.File("limits.y.bag")), kLimits);
  EXPECT_EQ(dir.List(), (std::vector<std::string>{"limits.y.bag", "y.bag"}));
  try {
    writer.Write("late");
    FAIL() << "wrote to a closed writer";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kClosed);
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

TEST(Writer, DiscardLeavesTheTargetAsItWas) {
  TempDir dir;
  const std::string path = dir.File("x.bag");
  testing::WriteFile(path, "old");
  Writer writer(path, Options(LimitsPlacement::kTail, Codec::Zstd(3, ""), 2));
  const std::vector<std::string> records = testing::MakeRecords(1000);
  writer.WriteMany(std::vector<std::string_view>(records.begin(), records.end()));
  writer.Discard();
  writer.Discard();  // idempotent
  EXPECT_EQ(ReadFile(path), "old");
  EXPECT_EQ(dir.List(), std::vector<std::string>{"x.bag"});
  EXPECT_THROW(writer.Publish(path), Error);
}

TEST(Writer, TailReplacesASeparateBagsLimitsFile) {
  TempDir dir;
  const std::string path = dir.File("x.bag");
  {
    Writer writer(path, Options(LimitsPlacement::kSeparate));
    WriteExample(writer);
    writer.Close();
  }
  ASSERT_TRUE(FileExists(dir.File("limits.x.bag")));
  Writer writer(path, Options(LimitsPlacement::kTail));
  WriteExample(writer);
  writer.Close();
  EXPECT_EQ(ReadFile(path), kPayload + kLimits);
  EXPECT_EQ(dir.List(), std::vector<std::string>{"x.bag"});
}

TEST(Writer, DestroyedUnclosedItPublishesNothingAndKeepsItsRecords) {
  TempDir dir;
  const std::string path = dir.File("x.bag");
  std::string partial;
  {
    Writer writer(path, Options(LimitsPlacement::kTail, Codec::Zstd(3, ""), 2));
    WriteExample(writer);
    partial = writer.partial_path();
  }  // no Close: a write cut short must not look complete
  EXPECT_FALSE(FileExists(path));
  ASSERT_TRUE(FileExists(partial));
  // Every record accepted reached the file, each before its limit.
  EXPECT_EQ(ReadFile(LimitsPathFor(partial)).size(), 3 * kLimitBytes);
  EXPECT_EQ(RecoverBag(partial).records, 3u);
}

TEST(Writer, MissingFolderIsNotFound) {
  TempDir dir;
  try {
    Writer writer(dir.File("no/such/x.bag"), Options(LimitsPlacement::kTail));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
  }
}

WriterConfig InPlace(LimitsPlacement placement) {
  WriterConfig options = Options(placement);
  options.atomic = false;
  return options;
}

TEST(Writer, InPlaceFlushMakesRecordsReadableAtThePath) {
  TempDir dir;
  const std::string path = dir.File("x.bag");
  Writer writer(path, InPlace(LimitsPlacement::kSeparate));
  EXPECT_EQ(writer.partial_path(), path);
  WriteExample(writer);
  writer.Flush();
  OpenOptions separate;
  separate.placement = LimitsPlacement::kSeparate;
  EXPECT_EQ(testing::ReadAll(*OpenBag({path}, separate)),
            (std::vector<std::string>{"abcdef", "123", "catcat"}));
  EXPECT_EQ(dir.List(), (std::vector<std::string>{"limits.x.bag", "x.bag"}));
  writer.Close();
  EXPECT_EQ(ReadFile(path), kPayload);
  EXPECT_EQ(ReadFile(dir.File("limits.x.bag")), kLimits);
}

TEST(Writer, InPlaceTailIsTheSameBagAndLeavesNoLimitsFile) {
  TempDir dir;
  const std::string path = dir.File("x.bag");
  testing::WriteFile(path, "old content, longer than the new bag");
  Writer writer(path, InPlace(LimitsPlacement::kTail));
  WriteExample(writer);
  writer.Close();
  EXPECT_EQ(ReadFile(path), kPayload + kLimits);
  EXPECT_EQ(dir.List(), std::vector<std::string>{"x.bag"});
}

TEST(Writer, InPlaceDiscardKeepsWhatWasWrittenForRecovery) {
  TempDir dir;
  const std::string path = dir.File("x.bag");
  Writer writer(path, InPlace(LimitsPlacement::kTail));
  WriteExample(writer);
  writer.Discard();
  EXPECT_EQ(ReadFile(path), kPayload);
  EXPECT_EQ(ReadFile(dir.File("limits.x.bag")), kLimits);
  EXPECT_EQ(RecoverBag(path).records, 3u);
  EXPECT_EQ(ReadFile(path), kPayload + kLimits);
}

TEST(Writer, InPlacePublishUnderAnotherNameRenames) {
  TempDir dir;
  const std::string pending = dir.File("x-00000-of-pending.bag");
  Writer writer(pending, InPlace(LimitsPlacement::kSeparate));
  WriteExample(writer);
  writer.Close(/*publish=*/false);
  writer.Publish(dir.File("x-00000-of-00001.bag"));
  EXPECT_EQ(dir.List(), (std::vector<std::string>{"limits.x-00000-of-00001.bag",
                                                  "x-00000-of-00001.bag"}));
  EXPECT_EQ(ReadFile(dir.File("x-00000-of-00001.bag")), kPayload);
}

TEST(Writer, DurableWriteIsTheSameBag) {
  TempDir dir;
  const std::string path = dir.File("x.bag");
  WriterConfig options = Options(LimitsPlacement::kSeparate);
  options.durable = true;
  Writer writer(path, options);
  WriteExample(writer);
  writer.Close();
  EXPECT_EQ(ReadFile(path), kPayload);
  EXPECT_EQ(ReadFile(dir.File("limits.x.bag")), kLimits);
  EXPECT_EQ(dir.List(), (std::vector<std::string>{"limits.x.bag", "x.bag"}));
}

TEST(Writer, WritesThroughASymbolicLinkAndKeepsIt) {
  TempDir dir;
  ASSERT_EQ(::mkdir(dir.File("store").c_str(), 0777), 0);
  const std::string real = dir.File("store/real.bag");
  testing::WriteFile(real, "old");
  const std::string link = dir.File("link.bag");
  ASSERT_EQ(::symlink("store/real.bag", link.c_str()), 0);
  Writer writer(link, Options(LimitsPlacement::kSeparate));
  // The partial folder is beside the file the link points to.
  EXPECT_NE(writer.partial_path().find("/store/.real.bag.sackli-partial-"), std::string::npos)
      << writer.partial_path();
  WriteExample(writer);
  writer.Close();
  char target[256] = {};
  ASSERT_GT(::readlink(link.c_str(), target, sizeof(target) - 1), 0);
  EXPECT_EQ(std::string(target), "store/real.bag");
  EXPECT_EQ(ReadFile(real), kPayload);
  // SEPARATE limits beside the link, where readers of the link look.
  EXPECT_EQ(ReadFile(dir.File("limits.link.bag")), kLimits);
}

TEST(Writer, StreamedWriteCannotBeInPlace) {
  TempDir dir;
  class NullSink : public AppendSink {
   public:
    void Append(const char*, size_t) override {}
    void FlushBuffer() override {}
    void Close() override {}
    size_t buffered() const override { return 0; }
    const std::string& path() const override { return path_; }

   private:
    std::string path_ = "upload";
  };
  try {
    Writer writer(dir.File("x.bag"), InPlace(LimitsPlacement::kTail),
                  std::make_unique<NullSink>());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
  }
  EXPECT_EQ(dir.List(), std::vector<std::string>{});
}

TEST(RecoverBag, KeepsTheUsablePrefix) {
  TempDir dir;
  const std::string path = dir.File("x.bag");
  testing::WriteFile(path, kPayload + "torn");
  // The third limit points past the records: only two records survive.
  testing::WriteFile(dir.File("limits.x.bag"), U64(6) + U64(9) + U64(500) + "abc");
  const RecoverResult result = RecoverBag(path);
  EXPECT_EQ(result.records, 2u);
  EXPECT_EQ(result.dropped_limits, 1u);
  EXPECT_EQ(result.dropped_bytes, kPayload.size() + 4 - 9);
  EXPECT_EQ(ReadFile(path), "abcdef123" + U64(6) + U64(9));
  EXPECT_FALSE(FileExists(dir.File("limits.x.bag")));
}

// The errno of the Error that `run` throws, or -1 when it throws none.
template <typename Run>
int ErrnoOf(Run&& run) {
  try {
    run();
  } catch (const Error& e) {
    return e.errno_value();
  }
  return -1;
}

TEST(RecoverBag, FollowsNoLinkAndCutsNoFileElsewhere) {
  TempDir dir;
  const std::string elsewhere = dir.File("bashrc");
  testing::WriteFile(elsewhere, "secret");
  const std::string partial = dir.File(".x.bag.sackli-partial-1");
  ASSERT_EQ(::mkdir(partial.c_str(), 0700), 0);
  testing::WriteFile(partial + "/limits.x.bag", "");
  ASSERT_EQ(::symlink(elsewhere.c_str(), (partial + "/x.bag").c_str()), 0);
  EXPECT_EQ(ErrnoOf([&] { RecoverBag(partial + "/x.bag"); }), ELOOP);
  ASSERT_EQ(::unlink((partial + "/x.bag").c_str()), 0);
  ASSERT_EQ(::link(elsewhere.c_str(), (partial + "/x.bag").c_str()), 0);
  EXPECT_EQ(ErrnoOf([&] { RecoverBag(partial + "/x.bag"); }), EPERM);
  EXPECT_EQ(ReadFile(elsewhere), "secret");
  EXPECT_TRUE(FileExists(partial + "/limits.x.bag"));
}

TEST(RecoverBag, DoesNotEnterAPartialFolderThatIsALink) {
  TempDir dir;
  const std::string folder = dir.File("private");
  ASSERT_EQ(::mkdir(folder.c_str(), 0700), 0);
  testing::WriteFile(folder + "/x.bag", kPayload);
  testing::WriteFile(folder + "/limits.x.bag", kLimits);
  const std::string partial = dir.File(".x.bag.sackli-partial-1");
  ASSERT_EQ(::symlink(folder.c_str(), partial.c_str()), 0);
  EXPECT_EQ(ErrnoOf([&] { RecoverBag(partial + "/x.bag"); }), ELOOP);
  EXPECT_EQ(ReadFile(folder + "/x.bag"), kPayload);
}

TEST(ResolveWriteLinks, RefusesAnotherUsersLinkInASharedFolder) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a link another owner";
  TempDir dir;
  const std::string shared = dir.File("shared");
  ASSERT_EQ(::mkdir(shared.c_str(), 0777), 0);
  ASSERT_EQ(::chmod(shared.c_str(), 01777), 0);
  const std::string link = shared + "/out.bag";
  ASSERT_EQ(::symlink(dir.File("victim.bag").c_str(), link.c_str()), 0);
  EXPECT_EQ(ResolveWriteLinks(link), dir.File("victim.bag"));  // one's own link
  ASSERT_EQ(::lchown(link.c_str(), 65534, 65534), 0);
  EXPECT_EQ(ErrnoOf([&] { ResolveWriteLinks(link); }), EACCES);
  // The folder's owner's link is followed, as the kernel's rule says.
  ASSERT_EQ(::chown(shared.c_str(), 65534, 65534), 0);
  EXPECT_EQ(ResolveWriteLinks(link), dir.File("victim.bag"));
}

}  // namespace
}  // namespace sackli
