// `_engine.MapCore`: one MapBuffer or IntMap (native/int_map*.h) over a
// Python buffer (borrowed), a local file (mapped by the engine) or, for
// objects that only answer obj[a:b], over its header and index alone (the
// Python side then fetches value bytes and hands them to `check_value`).
// Keys that are not integers raise TypeError; negative keys or keys of 2**64
// and more are simply absent. Lookups release the GIL.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <type_traits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bagz/crc32c.h"
#include "bagz/fault_guard.h"
#include "maps/int_map.h"
#include "maps/int_map_build.h"
#include "maps/int_map_lookup.h"
#include "bagz/local_file.h"
#include "bagz/memory_source.h"
#include "python/buffers.h"
#include "python/gil.h"
#include "python/indices.h"
#include "python/register.h"
#include "bagz/thread_pool.h"

namespace py = pybind11;

namespace sackli::python {
namespace {

// Below these sizes a lookup keeps the GIL while it decodes or copies:
// switching threads would cost more than the work (as single reads do).
constexpr uint64_t kReleaseGilDecodeBytes = 16 * 1024;
constexpr uint64_t kReleaseGilCopyBytes = 1024 * 1024;
// A batch allocates its bytes objects in groups of this many, each handed to
// the decoding threads at once.
constexpr size_t kValuesPerPublish = 256;

MapKind KindArgument(const std::string& kind) {
  if (kind == "mapbuffer") return MapKind::kMapBuffer;
  if (kind == "intmap") return MapKind::kIntMap;
  ThrowInvalidArgument("map kind must be 'mapbuffer' or 'intmap', not '" + kind + "'");
}

const char* CompressionName(MapCompression compression) {
  switch (compression) {
    case MapCompression::kNone: return "none";
    case MapCompression::kGzip: return "gzip";
    case MapCompression::kBrotli: return "br";
    case MapCompression::kZstd: return "zstd";
    case MapCompression::kLzma: return "lzma";
  }
  return "none";
}

MapCompression CompressionArgument(const std::string& name) {
  for (MapCompression c : {MapCompression::kNone, MapCompression::kGzip,
                           MapCompression::kBrotli, MapCompression::kZstd,
                           MapCompression::kLzma}) {
    if (name == CompressionName(c)) return c;
  }
  ThrowInvalidArgument("unknown map compression '" + name + "'");
}

// An `int` as uint64, or nullopt outside uint64.
std::optional<uint64_t> IntAsUint64(PyObject* number) {
  // The signed conversion walks the digits itself; the unsigned one goes
  // through a generic byte-array routine, several times slower. So keys
  // below 2**63 (most) take the first, the rest the second.
  int overflow = 0;
  const long long value = PyLong_AsLongLongAndOverflow(number, &overflow);
  if (overflow == 0) {
    if (value == -1 && PyErr_Occurred()) throw py::error_already_set();
    if (value < 0) return std::nullopt;
    return static_cast<uint64_t>(value);
  }
  if (overflow < 0) return std::nullopt;
  const unsigned long long big = PyLong_AsUnsignedLongLong(number);
  if (big == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
    if (!PyErr_ExceptionMatches(PyExc_OverflowError)) throw py::error_already_set();
    PyErr_Clear();
    return std::nullopt;
  }
  return static_cast<uint64_t>(big);
}

// A key as uint64, or nullopt for integers no map can hold (negative, too
// big). TypeError for non-integers.
std::optional<uint64_t> KeyArgument(py::handle key) {
  // An int (the common case) needs no conversion, nor a new reference.
  if (PyLong_CheckExact(key.ptr())) return IntAsUint64(key.ptr());
  py::object number = py::reinterpret_steal<py::object>(PyNumber_Index(key.ptr()));
  if (!number) throw py::error_already_set();
  return IntAsUint64(number.ptr());
}

// The keys of a batched lookup: `valid[j]` is the key at `slot[j]`; the
// other slots (of `count`) hold integers no map can hold.
struct KeyBatch {
  std::vector<uint64_t> valid;
  std::vector<size_t> slot;
  size_t count = 0;

  void Add(std::optional<uint64_t> key) {
    if (key) {
      valid.push_back(*key);
      slot.push_back(count);
    }
    ++count;
  }
};

// The keys of `keys`: an integer buffer, a list or tuple, or any iterable.
KeyBatch ReadKeys(py::handle keys) {
  KeyBatch batch;
  PyObject* object = keys.ptr();
  // Integer arrays without a Python object per key; negative keys are absent.
  // Other buffers (floats, foreign byte orders, 2-D) go item by item below,
  // which raises for what is not an integer.
  const IntegerBuffer found = ForEachBufferInteger(object, [&](size_t, auto value) {
    if constexpr (std::is_signed_v<decltype(value)>) {
      batch.Add(value < 0 ? std::nullopt : std::optional<uint64_t>(static_cast<uint64_t>(value)));
    } else {
      batch.Add(static_cast<uint64_t>(value));
    }
  });
  if (found == IntegerBuffer::kIntegers) return batch;
  if (PyList_CheckExact(object) || PyTuple_CheckExact(object)) {
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(object);
    PyObject** items = PySequence_Fast_ITEMS(object);
    batch.valid.reserve(static_cast<size_t>(n));
    batch.slot.reserve(static_cast<size_t>(n));
    // The int objects of a list are scattered over the heap: each is a
    // cache miss unless it is on its way well before it is read.
    constexpr Py_ssize_t kAhead = 16;
    for (Py_ssize_t k = 0; k < n; ++k) {
      if (k + kAhead < n) __builtin_prefetch(items[k + kAhead]);
      batch.Add(KeyArgument(items[k]));
    }
    return batch;
  }
  for (py::handle key : keys) batch.Add(KeyArgument(key));
  return batch;
}

class MapCore {
 public:
  // The whole map in a Python buffer.
  MapCore(py::object buffer, const std::string& kind, std::string name)
      : owner_(buffer) {
    borrowed_.emplace(buffer.ptr());
    const std::string_view bytes = borrowed_->view();
    source_ = std::make_shared<MemorySource>(bytes.data(), bytes.size(), std::move(name));
    Open(KindArgument(kind), bytes.data(), bytes.size(), bytes.size());
  }

  // A local file, mapped by the engine (guarded against truncation).
  static std::unique_ptr<MapCore> OpenFile(const std::string& path,
                                           const std::string& kind) {
    auto core = std::unique_ptr<MapCore>(new MapCore());
    {
      ReleaseGil release;
      core->source_ = OpenLocalFile(path, AccessPattern::kRandom, CachePolicy::kSystem);
    }
    const MapKind map_kind = KindArgument(kind);
    const char* mapped = core->source_->mapped();
    const uint64_t size = core->source_->size();
    if (mapped == nullptr) {  // an empty file is not mapped
      core->OpenIndexCopy(map_kind, core->source_->path(), size);
    } else {
      Guarded(*core->source_, [&] { core->Open(map_kind, mapped, size, size); });
    }
    return core;
  }

  // Header and index only (`header_and_index` holds at least the header and
  // then as much of the index as the caller fetched); `map_size` None when
  // the size of the map is unknown.
  static std::unique_ptr<MapCore> FromIndex(const py::bytes& header_and_index,
                                            const std::string& kind, std::string name,
                                            std::optional<uint64_t> map_size) {
    auto core = std::unique_ptr<MapCore>(new MapCore());
    core->index_copy_ = std::string(header_and_index);
    const MapKind map_kind = KindArgument(kind);
    uint64_t size = map_size.value_or(kUnknownMapSize);
    if (!map_size && map_kind == MapKind::kIntMap) size = core->index_copy_.size();
    core->Open(map_kind, core->index_copy_.data(), core->index_copy_.size(), size, std::move(name));
    return core;
  }

  const MapIndex& index() const { return *index_; }
  bool has_values() const { return source_ != nullptr; }
  uint64_t max_value_bytes() const { return max_value_bytes_; }
  void set_max_value_bytes(uint64_t bytes) { max_value_bytes_ = bytes; }

  int64_t Find(py::handle key) const {
    const std::optional<uint64_t> k = KeyArgument(key);
    return k ? index_->Find(*k) : -1;
  }

  // The stored bytes of `position`: [begin, end), end None when it runs to
  // the (unknown) end of the map.
  py::tuple Extent(uint32_t position) const {
    CheckPosition(position);
    const ValueExtent extent = index_->Extent(position);
    py::object end = index_->RunsToUnknownEnd(position) ? py::none() : py::cast(extent.end);
    return py::make_tuple(extent.begin, end);
  }

  // The value at `position` (zstd and none decoded; other compressions as
  // stored, without the crc32c).
  py::object ValueAt(uint32_t position, bool check_crc) const {
    RequireValues();
    CheckPosition(position);
    MapLookup lookup(*index_, *source_, check_crc, max_value_bytes_);
    FoundValue found;
    WithoutGilIf(source_->remote(), [&] { found = lookup.LocateAt(position); });
    return MaterialiseOne(lookup, found);
  }

  // The value of `key`, or None.
  py::object Get(py::handle key, bool check_crc) const {
    RequireValues();
    const std::optional<uint64_t> k = KeyArgument(key);
    if (!k) return py::none();
    // One key: no batch vectors or lists (this is the path of mb[key]).
    MapLookup lookup(*index_, *source_, check_crc, max_value_bytes_);
    FoundValue found;
    WithoutGilIf(source_->remote(), [&] {
      const int64_t position = Guarded(*source_, [&] { return index_->Find(*k); });
      if (position >= 0) found = lookup.LocateAt(static_cast<uint32_t>(position));
    });
    if (found.position < 0) return py::none();
    return MaterialiseOne(lookup, found);
  }

  // Values of `keys` in order, None for absent keys.
  py::list GetMany(py::handle keys, bool check_crc, size_t parallelism,
                   py::object default_value) const {
    RequireValues();
    const KeyBatch keys_read = ReadKeys(keys);
    MapLookup lookup(*index_, *source_, check_crc, max_value_bytes_);
    std::vector<FoundValue> found;
    {
      ReleaseGil release;
      found = lookup.Locate(keys_read.valid.data(), keys_read.valid.size(), parallelism);
    }
    py::list values = Materialise(lookup, found, parallelism, default_value);
    const size_t n = keys_read.count;
    if (keys_read.valid.size() == n) return values;  // every key a uint64: the usual case
    py::list out(n);
    for (size_t k = 0; k < n; ++k) out[k] = default_value;
    for (size_t j = 0; j < keys_read.valid.size(); ++j) out[keys_read.slot[j]] = values[j];
    return out;
  }

  // The values at positions [first, first + count), as ValueAt gives them.
  py::list ValuesAt(uint32_t first, uint32_t count, bool check_crc,
                    size_t parallelism) const {
    RequireValues();
    if (uint64_t{first} + count > index_->size()) {
      ThrowOutOfRange("map positions " + std::to_string(first) + " + " +
                      std::to_string(count) + " out of range");
    }
    MapLookup lookup(*index_, *source_, check_crc, max_value_bytes_);
    std::vector<FoundValue> found;
    {
      ReleaseGil release;
      found = lookup.LocateRange(first, count, parallelism);
    }
    return Materialise(lookup, found, parallelism);
  }

  // Checks and decodes the stored bytes of `position` fetched by the caller.
  py::object CheckValue(uint32_t position, py::object stored, bool check_crc) const {
    BorrowedBytes bytes(stored.ptr());
    CheckPosition(position);
    // An object shorter than the index says gives short slices: a value cut
    // off there is damage, not a shorter value.
    const ValueExtent extent = index_->Extent(position);
    const uint64_t got = bytes.view().size();
    if (!index_->RunsToUnknownEnd(position) && got != extent.end - extent.begin) {
      index_->ThrowCorruptValue(position, extent.begin,
                                "the map ends after " + std::to_string(got) + " of its " +
                                    std::to_string(extent.end - extent.begin) +
                                    " stored bytes (truncated)");
    }
    MapLookup lookup(*index_, *source_or_empty(), check_crc, max_value_bytes_);
    const FoundValue found =
        lookup.LocateIn(position, bytes.view().data(), bytes.view().size());
    return MaterialiseOne(lookup, found);
  }

  void Validate() const {
    if (source_ != nullptr) {
      Guarded(*source_, [&] { index_->Validate(); });
    } else {
      index_->Validate();
    }
  }

  py::list Keys() const {
    py::list keys(index_->size());
    for (uint32_t i = 0; i < index_->size(); ++i) keys[i] = py::int_(index_->Key(i));
    return keys;
  }

 private:
  MapCore() = default;

  void Open(MapKind kind, const char* bytes, size_t available, uint64_t map_size,
            std::string name = {}) {
    if (name.empty()) name = source_->path();
    header_ = ParseMapHeader(bytes, available, kind, name);
    index_.emplace(header_, bytes + header_.index_offset(), map_size, name);
    if (available < header_.data_offset()) {
      ThrowCorruption(name, available,
                      "truncated index: " + std::to_string(available) +
                          " bytes of header and index, the header promises " +
                          std::to_string(header_.data_offset()));
    }
  }

  // An unmapped (empty) local file: its bytes, copied.
  void OpenIndexCopy(MapKind kind, const std::string& name, uint64_t size) {
    index_copy_.resize(size);
    source_->Read(0, size, index_copy_.data());
    Open(kind, index_copy_.data(), index_copy_.size(), size, name);
  }

  void RequireValues() const {
    if (source_ == nullptr) ThrowInvalidArgument("this map core holds no values");
  }
  void CheckPosition(uint32_t position) const {
    if (position >= index_->size()) {
      ThrowOutOfRange("map position " + std::to_string(position) + " out of range");
    }
  }
  const ByteSource* source_or_empty() const {
    static const MemorySource empty(nullptr, 0, "<none>");
    return source_ != nullptr ? source_.get() : &empty;
  }

  template <typename Fn>
  static void WithoutGilIf(bool release, const Fn& fn) {
    if (release) {
      ReleaseGil released;
      fn();
    } else {
      fn();
    }
  }

  // Allocates the bytes of one found value and decodes into it.
  py::object MaterialiseOne(const MapLookup& lookup, const FoundValue& found) const {
    py::object bytes = py::reinterpret_steal<py::object>(NewBytes(found.decoded_size));
    char* output = BytesData(bytes.ptr());
    const bool zstd = index_->header().compression == MapCompression::kZstd;
    const ByteSource& source = *source_or_empty();
    WithoutGilIf(found.decoded_size >= (zstd ? kReleaseGilDecodeBytes : kReleaseGilCopyBytes),
                 [&] { Guarded(source, [&] { lookup.DecodeOne(found, output); }); });
    return bytes;
  }

  // Allocates one bytes per found value and decodes into them; `absent`
  // stands for keys not found.
  py::list Materialise(const MapLookup& lookup, const std::vector<FoundValue>& found,
                       size_t parallelism, py::handle absent = py::none()) const {
    const size_t n = found.size();
    py::list values(n);
    std::vector<char*> outputs(n, nullptr);
    // Sets values[k] (and outputs[k]) for k in [first, end).
    auto allocate = [&](size_t first, size_t end) {
      for (size_t k = first; k < end; ++k) {
        PyObject* value;
        if (found[k].position < 0) {
          value = absent.inc_ref().ptr();
        } else {
          value = NewBytes(found[k].decoded_size);
          outputs[k] = BytesData(value);
        }
        PyList_SET_ITEM(values.ptr(), static_cast<Py_ssize_t>(k), value);
      }
    };
    uint64_t total = 0;
    for (const FoundValue& value : found) total += value.decoded_size;
    KeepHeapForBatches(total);
    if (n > kValuesPerPublish && parallelism > 1) {
      // The pool decodes each group of values while this thread allocates
      // the bytes of the next ones (holding the GIL, as it must).
      PublishedDecode decode(lookup, found, outputs.data(), parallelism);
      for (size_t first = 0; first < n; first += kValuesPerPublish) {
        const size_t end = std::min(n, first + kValuesPerPublish);
        allocate(first, end);
        decode.Publish(end);
      }
      ReleaseGil release;
      decode.Finish();
      return values;
    }
    allocate(0, n);
    const bool zstd = index_->header().compression == MapCompression::kZstd;
    const bool large = total >= (zstd ? kReleaseGilDecodeBytes : kReleaseGilCopyBytes);
    WithoutGilIf(n > 1 || large, [&] { lookup.Decode(found, outputs.data(), parallelism); });
    return values;
  }

  py::object owner_;
  std::optional<BorrowedBytes> borrowed_;
  std::shared_ptr<ByteSource> source_;
  // The most one value may decode to (sackli.maps' max_value_bytes).
  uint64_t max_value_bytes_ = kUnlimitedRecordBytes;
  std::string index_copy_;
  MapHeader header_;
  std::optional<MapIndex> index_;
};

// A key or IntMap value of a map being built: OverflowError (as mapbuffer's
// numpy conversion raises) for integers outside uint64.
uint64_t BuildWord(py::handle number, const char* what) {
  const std::optional<uint64_t> word = KeyArgument(number);
  if (!word) {
    PyErr_Format(PyExc_OverflowError, "map %s %S is out of bounds for uint64", what,
                 number.ptr());
    throw py::error_already_set();
  }
  return *word;
}

// The words of `numbers` (keys or values), in order.
std::vector<uint64_t> BuildWords(py::iterable numbers, const char* what) {
  std::vector<uint64_t> words;
  for (py::handle number : numbers) words.push_back(BuildWord(number, what));
  return words;
}

// `keys[k]` -> `values[k]`, keys in any order (sorted here, by the engine).
py::object BuildMapBufferBinding(py::iterable keys, py::list values,
                                const std::string& compression, uint8_t version,
                                int zstd_level, size_t parallelism) {
  std::vector<uint64_t> sorted_keys = BuildWords(keys, "key");
  if (sorted_keys.size() != values.size()) {
    ThrowInvalidArgument("a map needs one value per key");
  }
  std::vector<BorrowedBytes> borrowed;
  borrowed.reserve(values.size());
  for (py::handle value : values) {
    if (PyUnicode_Check(value.ptr())) {
      throw py::type_error("map values must be bytes-like, not str (give tobytesfn)");
    }
    borrowed.emplace_back(value.ptr());
  }
  const MapCompression c = CompressionArgument(compression);
  std::vector<std::string_view> views;
  MapBufferPlan plan;
  {
    ReleaseGil release;
    const std::vector<uint32_t> order = SortKeys(sorted_keys);
    views.reserve(order.size());
    for (uint32_t k : order) views.push_back(borrowed[k].view());
    plan = PlanMapBuffer(sorted_keys, views, c, version, zstd_level, parallelism);
  }
  // Laid out straight into the bytes object: no second copy of the map.
  py::object out = py::reinterpret_steal<py::object>(NewBytes(plan.size));
  char* data = BytesData(out.ptr());
  {
    ReleaseGil release;
    WriteMapBuffer(plan, data, parallelism);
  }
  return out;
}

}  // namespace

void RegisterIntMap(py::module_& m) {
  py::class_<MapCore>(m, "MapCore")
      .def(py::init<py::object, const std::string&, std::string>(), py::arg("buffer"),
           py::arg("kind"), py::arg("name"))
      .def_static("open_file", &MapCore::OpenFile, py::arg("path"), py::arg("kind"))
      .def_static("from_index", &MapCore::FromIndex, py::arg("header_and_index"),
                  py::arg("kind"), py::arg("name"), py::arg("map_size"))
      .def_property_readonly("count", [](const MapCore& c) { return c.index().size(); })
      .def_property_readonly("version", [](const MapCore& c) { return c.index().header().version; })
      .def_property_readonly("compression", [](const MapCore& c) {
        return CompressionName(c.index().header().compression);
      })
      .def_property_readonly("map_size", [](const MapCore& c) -> py::object {
        const uint64_t size = c.index().map_size();
        return size == kUnknownMapSize ? py::none() : py::cast(size);
      })
      .def_property_readonly("data_offset", [](const MapCore& c) {
        return c.index().header().data_offset();
      })
      .def_property_readonly("has_values", &MapCore::has_values)
      .def("find", &MapCore::Find, py::arg("key"))
      .def("key_at", [](const MapCore& c, uint32_t i) {
        if (i >= c.index().size()) ThrowOutOfRange("map position out of range");
        return c.index().Key(i);
      })
      .def("word_at", [](const MapCore& c, uint32_t i) {
        if (i >= c.index().size()) ThrowOutOfRange("map position out of range");
        return c.index().Word(i);
      })
      .def("keys", &MapCore::Keys)
      .def("extent", &MapCore::Extent, py::arg("position"))
      .def("value_at", &MapCore::ValueAt, py::arg("position"), py::arg("check_crc"))
      .def("get", &MapCore::Get, py::arg("key"), py::arg("check_crc"))
      .def("values_at", &MapCore::ValuesAt, py::arg("first"), py::arg("count"),
           py::arg("check_crc"), py::arg("parallelism"))
      .def("get_many", &MapCore::GetMany, py::arg("keys"), py::arg("check_crc"),
           py::arg("parallelism"), py::arg("default") = py::none())
      .def("check_value", &MapCore::CheckValue, py::arg("position"), py::arg("stored"),
           py::arg("check_crc"))
      .def("validate", &MapCore::Validate)
      .def_property("max_value_bytes", &MapCore::max_value_bytes,
                    &MapCore::set_max_value_bytes,
                    "The most one value may decode to (UNLIMITED_RECORD_BYTES: no cap).");

  m.def("build_map_buffer", &BuildMapBufferBinding, py::arg("keys"),
        py::arg("values"), py::arg("compression"), py::arg("version"),
        py::arg("zstd_level"), py::arg("parallelism"));
  m.def("build_int_map", [](py::iterable keys, py::iterable values) {
    std::vector<uint64_t> sorted_keys = BuildWords(keys, "key");
    const std::vector<uint64_t> words = BuildWords(values, "value");
    if (sorted_keys.size() != words.size()) {
      ThrowInvalidArgument("a map needs one value per key");
    }
    std::string out;
    {
      ReleaseGil release;
      const std::vector<uint32_t> order = SortKeys(sorted_keys);
      std::vector<uint64_t> sorted_values;
      sorted_values.reserve(order.size());
      for (uint32_t k : order) sorted_values.push_back(words[k]);
      out = BuildIntMap(sorted_keys, sorted_values);
    }
    return py::bytes(out);
  }, py::arg("keys"), py::arg("values"));
  m.def("crc32c", [](py::object data, uint32_t crc) {
    BorrowedBytes bytes(data.ptr());
    ReleaseGil release;
    return Crc32c(bytes.view().data(), bytes.view().size(), crc);
  }, py::arg("data"), py::arg("crc") = 0);
  m.def("zstd_map_value", [](py::object data, int level) {
    BorrowedBytes bytes(data.ptr());
    std::string out;
    {
      ReleaseGil release;
      out = EncodeZstdMapValue(bytes.view(), level);
    }
    return py::bytes(out);
  }, py::arg("data"), py::arg("level"));
  m.def("eytzinger_order", &EytzingerOrder, py::arg("n"));
  m.def("map_header_bytes", [](const std::string& kind) {
    MapHeader header;
    header.kind = KindArgument(kind);
    return header.index_offset();
  }, py::arg("kind"));
  // Where the values of the map whose header is `header` start.
  m.def("map_data_offset", [](py::bytes header, const std::string& kind,
                              const std::string& name) {
    const std::string bytes(header);
    return ParseMapHeader(bytes.data(), bytes.size(), KindArgument(kind), name).data_offset();
  }, py::arg("header"), py::arg("kind"), py::arg("name"));
}

}  // namespace sackli::python
