#include "rows/row_decode.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <string>

#include "bagz/errors.h"
#include "bagz/format.h"
#include "bagz/thread_pool.h"

namespace sackli {
namespace {

// Thrown inside this file only: why a row does not decode. DecodeRows turns
// it into a CorruptionError naming the bag and the record.
struct BadRow {
  std::string what;
};

[[noreturn]] void Bad(std::string what) { throw BadRow{std::move(what)}; }

// A value must end where its header says (a struct body at its last end,
// list elements at their last slot or end): a record of another schema
// (a narrower or wider column, columns in another order) is seldom exactly
// as long as a row of this one, and this is what tells them apart where
// every offset still lies inside the record.
void CheckLength(const char* what, uint64_t size, uint64_t expected) {
  if (size != expected) {
    Bad(std::string(what) + " holds " + std::to_string(size) + " bytes where its header says " +
        std::to_string(expected));
  }
}

// Thrown inside this file only: a part's values outgrow 32-bit offsets
// (string, binary and list columns); not corruption, too many rows at once.
struct TooLarge {};

// Bytes of a row; every access is checked against `size`.
struct Span {
  const uint8_t* data;
  uint64_t size;

  uint32_t U32(uint64_t at) const {
    if (at > size || size - at < 4) Bad("an offset or count lies beyond the row");
    return LoadU32(reinterpret_cast<const char*>(data + at));
  }
  Span Sub(uint64_t at, uint64_t length) const {
    if (at > size || length > size - at) Bad("a value lies beyond the row");
    return {data + at, length};
  }
  bool Bit(uint64_t i) const { return (data[i >> 3] >> (i & 7)) & 1; }
};

// Whether `text` is well-formed UTF-8 (no overlongs, surrogates or code
// points above U+10FFFF): string columns must hold text, whatever the bytes
// of a corrupt row say.
bool IsUtf8(Span text) {
  const uint8_t* p = text.data;
  const uint8_t* end = p + text.size;
  while (p < end) {
    uint64_t word;
    if (end - p >= 8 && (std::memcpy(&word, p, 8), (word & 0x8080808080808080ULL) == 0)) {
      p += 8;  // eight ASCII bytes
      continue;
    }
    const uint8_t c = *p;
    if (c < 0x80) {
      ++p;
      continue;
    }
    size_t extra;
    uint8_t low = 0x80, high = 0xBF;  // the allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      extra = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
      extra = 2;
      if (c == 0xE0) low = 0xA0;
      if (c == 0xED) high = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      extra = 3;
      if (c == 0xF0) low = 0x90;
      if (c == 0xF4) high = 0x8F;
    } else {
      return false;
    }
    if (static_cast<size_t>(end - p) <= extra) return false;
    if (p[1] < low || p[1] > high) return false;
    for (size_t k = 2; k <= extra; ++k) {
      if ((p[k] & 0xC0) != 0x80) return false;
    }
    p += extra + 1;
  }
  return true;
}

void AppendBit(std::vector<uint8_t>& bits, int64_t index, bool value) {
  if ((index & 7) == 0) bits.push_back(0);
  if (value) bits.back() = static_cast<uint8_t>(bits.back() | (1 << (index & 7)));
}

// A struct body (row_layout.h): its fields, checked as they are reached.
class StructView {
 public:
  StructView(const RowType& type, Span body) : type_(type), body_(body) {
    if (body.size < type.header_bytes()) Bad("a struct is shorter than its fixed part");
    area_ = body.Sub(type.header_bytes(), body.size - type.header_bytes());
    const uint64_t ends = uint64_t{type.bitmap_bytes} + type.fixed_bytes;
    const uint64_t used =
        type.variable_count == 0 ? 0 : body.U32(ends + 4 * uint64_t{type.variable_count - 1});
    CheckLength("a struct body", body.size, type.header_bytes() + used);
  }
  bool Valid(size_t c) const { return body_.Bit(c); }
  const uint8_t* Slot(size_t c) const {
    return body_.data + type_.bitmap_bytes + type_.slots[c];
  }
  Span Variable(size_t c) const {
    const uint64_t ends = uint64_t{type_.bitmap_bytes} + type_.fixed_bytes;
    const uint32_t k = type_.slots[c];
    const uint32_t begin = k == 0 ? 0 : body_.U32(ends + 4 * uint64_t{k - 1});
    const uint32_t end = body_.U32(ends + 4 * uint64_t{k});
    if (begin > end) Bad("variable-width offsets out of order");
    return area_.Sub(begin, end - begin);
  }

 private:
  const RowType& type_;
  Span body_;
  Span area_{};
};

// One output array being built, of any type, with its children.
class Builder {
 public:
  explicit Builder(const RowType& type) : type_(type) {
    for (const RowType& child : type.children) children_.push_back(std::make_unique<Builder>(child));
    if (HasOffsets()) AppendOffset(0);
  }

  void AppendNull() {
    Validity(false);
    switch (type_.kind) {
      case RowKind::kBool: AppendBit(values_, length_ - 1, false); break;
      case RowKind::kFixed: values_.resize(values_.size() + type_.width, 0); break;
      case RowKind::kBinary: case RowKind::kLargeBinary:
        AppendOffset(static_cast<int64_t>(values_.size()));
        break;
      case RowKind::kList: case RowKind::kLargeList:
        AppendOffset(children_[0]->length_);
        break;
      case RowKind::kFixedList:
        for (uint32_t e = 0; e < type_.width; ++e) children_[0]->AppendNull();
        break;
      case RowKind::kStruct:
        for (auto& child : children_) child->AppendNull();
        break;
      case RowKind::kNull: break;
    }
  }

  // A valid fixed value from its slot.
  void AppendFixed(const uint8_t* slot) {
    if (type_.kind == RowKind::kNull) return AppendNull();
    Validity(true);
    if (type_.kind == RowKind::kBool) {
      AppendBit(values_, length_ - 1, *slot != 0);
    } else {
      values_.insert(values_.end(), slot, slot + type_.width);
    }
  }

  // A valid variable-width value from its bytes.
  void AppendVariable(Span value) {
    Validity(true);
    switch (type_.kind) {
      case RowKind::kBinary: case RowKind::kLargeBinary:
        if (type_.utf8 && !IsUtf8(value)) Bad("a string that is not UTF-8");
        values_.insert(values_.end(), value.data, value.data + value.size);
        AppendOffset(static_cast<int64_t>(values_.size()));
        return;
      case RowKind::kList: case RowKind::kLargeList: {
        const uint32_t count = value.U32(0);
        Elements(value.Sub(4, value.size - 4), count);
        AppendOffset(children_[0]->length_);
        return;
      }
      case RowKind::kFixedList:
        Elements(value, type_.width);
        return;
      case RowKind::kStruct: {
        const StructView view(type_, value);
        for (size_t c = 0; c < children_.size(); ++c) children_[c]->AppendField(view, c);
        return;
      }
      default:
        Bad("a fixed-width value stored as variable-width");
    }
  }

  // Field c of a struct body.
  void AppendField(const StructView& view, size_t c) {
    if (!view.Valid(c)) {
      AppendNull();
    } else if (type_.is_fixed()) {
      AppendFixed(view.Slot(c));
    } else {
      AppendVariable(view.Variable(c));
    }
  }

  int64_t length() const { return length_; }

  // Moves the built buffers into `out` (an Arrow C array the consumer
  // releases).
  void ExportTo(ArrowArray* out);

 private:
  bool HasOffsets() const {
    return type_.kind == RowKind::kBinary || type_.kind == RowKind::kLargeBinary ||
           type_.kind == RowKind::kList || type_.kind == RowKind::kLargeList;
  }
  bool SmallOffsets() const {
    return type_.kind == RowKind::kBinary || type_.kind == RowKind::kList;
  }

  void Validity(bool valid) {
    AppendBit(validity_, length_, valid);
    ++length_;
    if (!valid) ++null_count_;
  }

  void AppendOffset(int64_t value) {
    if (SmallOffsets()) {
      if (value > std::numeric_limits<int32_t>::max()) throw TooLarge{};
      const int32_t small = static_cast<int32_t>(value);
      const auto* bytes = reinterpret_cast<const uint8_t*>(&small);
      offsets_.insert(offsets_.end(), bytes, bytes + 4);
    } else {
      const auto* bytes = reinterpret_cast<const uint8_t*>(&value);
      offsets_.insert(offsets_.end(), bytes, bytes + 8);
    }
  }

  // `count` list elements: [bitmap][fixed values | u32 ends + area].
  void Elements(Span bytes, uint32_t count) {
    Builder& child = *children_[0];
    const uint64_t bitmap_bytes = (uint64_t{count} + 7) / 8;
    const Span bitmap = bytes.Sub(0, bitmap_bytes);
    const Span rest = bytes.Sub(bitmap_bytes, bytes.size - bitmap_bytes);
    if (child.type_.is_fixed()) {
      const uint64_t width = child.type_.fixed_width();
      CheckLength("a list's elements", rest.size, width * count);
      const Span values = rest.Sub(0, width * count);
      for (uint32_t e = 0; e < count; ++e) {
        if (bitmap.Bit(e)) {
          child.AppendFixed(values.data + width * e);
        } else {
          child.AppendNull();
        }
      }
      return;
    }
    const Span ends = rest.Sub(0, 4 * uint64_t{count});
    const Span area = rest.Sub(ends.size, rest.size - ends.size);
    uint32_t begin = 0;
    for (uint32_t e = 0; e < count; ++e) {
      const uint32_t end = ends.U32(4 * uint64_t{e});
      if (end < begin) Bad("list element offsets out of order");
      const Span value = area.Sub(begin, end - begin);
      if (bitmap.Bit(e)) {
        child.AppendVariable(value);
      } else {
        child.AppendNull();
      }
      begin = end;
    }
    CheckLength("a list's elements", area.size, begin);
  }

  const RowType& type_;
  int64_t length_ = 0;
  int64_t null_count_ = 0;
  std::vector<uint8_t> validity_;
  std::vector<uint8_t> values_;   // fixed values, bool bits or binary bytes
  std::vector<uint8_t> offsets_;  // int32 or int64
  std::vector<std::unique_ptr<Builder>> children_;
};

// What an exported array owns; freed by ReleaseExported.
struct Exported {
  std::vector<uint8_t> validity, values, offsets;
  const void* buffers[3] = {nullptr, nullptr, nullptr};
  std::vector<ArrowArray*> children;
};

void ReleaseExported(ArrowArray* array) {
  auto* exported = static_cast<Exported*>(array->private_data);
  for (ArrowArray* child : exported->children) {
    if (child->release != nullptr) child->release(child);
    delete child;
  }
  delete exported;
  array->release = nullptr;
}

// A buffer's address, never null (consumers may reject a null data buffer
// even for zero values).
const void* Address(std::vector<uint8_t>& buffer) {
  if (buffer.empty()) buffer.reserve(8);
  return buffer.data();
}

// Fills `out` as a struct array of `children` (moving their buffers).
void ExportStruct(std::vector<std::unique_ptr<Builder>>& children, int64_t length,
                  Exported* exported, ArrowArray* out) {
  out->n_children = static_cast<int64_t>(children.size());
  exported->children.reserve(children.size());
  for (auto& child : children) {
    auto* array = new ArrowArray{};
    exported->children.push_back(array);
    child->ExportTo(array);
  }
  out->children = exported->children.data();
  out->length = length;
}

void Builder::ExportTo(ArrowArray* out) {
  auto* exported = new Exported;
  *out = ArrowArray{};
  out->private_data = exported;
  out->release = &ReleaseExported;
  out->length = length_;
  exported->validity = std::move(validity_);
  exported->values = std::move(values_);
  exported->offsets = std::move(offsets_);
  const bool nulls = type_.kind != RowKind::kNull && null_count_ > 0;
  out->null_count = type_.kind == RowKind::kNull ? length_ : null_count_;
  exported->buffers[0] = nulls ? Address(exported->validity) : nullptr;
  out->n_buffers = type_.buffer_count();
  switch (type_.kind) {
    case RowKind::kBool: case RowKind::kFixed:
      exported->buffers[1] = Address(exported->values);
      break;
    case RowKind::kBinary: case RowKind::kLargeBinary:
      exported->buffers[1] = Address(exported->offsets);
      exported->buffers[2] = Address(exported->values);
      break;
    case RowKind::kList: case RowKind::kLargeList:
      exported->buffers[1] = Address(exported->offsets);
      break;
    case RowKind::kNull: case RowKind::kFixedList: case RowKind::kStruct: break;
  }
  out->buffers = exported->buffers;
  if (!children_.empty()) {
    ExportStruct(children_, length_, exported, out);
  }
}

// The column builders of one part of a batch.
struct Part {
  std::vector<std::unique_ptr<Builder>> columns;
  int64_t rows = 0;
};

void DecodePart(const RowType& type, const char* data, size_t data_size,
                const int64_t* offsets, size_t begin, size_t end,
                const std::vector<size_t>& columns, const RowSource& source, Part& part) {
  for (size_t c : columns) part.columns.push_back(std::make_unique<Builder>(type.children[c]));
  for (size_t k = begin; k < end; ++k) {
    try {
      if (offsets[k] < 0 || offsets[k] > offsets[k + 1] ||
          static_cast<uint64_t>(offsets[k + 1]) > data_size) {
        Bad("its offsets lie outside the records read");
      }
      const Span row{reinterpret_cast<const uint8_t*>(data) + offsets[k],
                     static_cast<uint64_t>(offsets[k + 1] - offsets[k])};
      if (row.size == 0 || row.data[0] != kRowFormatVersion) {
        Bad(row.size == 0 ? "an empty record" : "an unknown row format version");
      }
      const StructView view(type, row.Sub(1, row.size - 1));
      for (size_t i = 0; i < columns.size(); ++i) part.columns[i]->AppendField(view, columns[i]);
    } catch (const TooLarge&) {
      ThrowInvalidArgument(source.name + ": the rows from record " +
                           std::to_string(source.first + begin) +
                           " on hold more than 2 GiB of one 32-bit-offset column; read fewer "
                           "rows at a time (batch_size=)");
    } catch (const BadRow& bad) {
      throw Error(ErrorKind::kCorruption,
                  source.name + ": record " + std::to_string(source.first + k) +
                      " is not a row written with encoding='row' for this schema (" + bad.what +
                      ")",
                  source.name);
    }
  }
  part.rows = static_cast<int64_t>(end - begin);
}

}  // namespace

std::vector<ArrowArray> DecodeRows(const RowType& type, const char* data, size_t data_size,
                                   const int64_t* offsets, size_t rows,
                                   const std::vector<size_t>& columns, size_t parallelism,
                                   const RowSource& source) {
  for (size_t c : columns) {
    if (c >= type.children.size()) {
      ThrowInvalidArgument("row codec: column index " + std::to_string(c) + " out of range");
    }
  }
  // Parts of at least a couple of thousand rows, so that joining the
  // parts' batches stays cheap.
  const size_t parts = std::clamp<size_t>(rows / 2048, 1, std::max<size_t>(parallelism, 1));
  std::vector<Part> built(parts);
  ThreadPool::Shared().ParallelFor(parts, parts, [&](size_t p) {
    DecodePart(type, data, data_size, offsets, rows * p / parts, rows * (p + 1) / parts,
               columns, source, built[p]);
  });
  std::vector<ArrowArray> batches(parts);
  for (size_t p = 0; p < parts; ++p) {
    auto* exported = new Exported;
    batches[p] = ArrowArray{};
    batches[p].private_data = exported;
    batches[p].release = &ReleaseExported;
    batches[p].n_buffers = 1;
    batches[p].buffers = exported->buffers;
    ExportStruct(built[p].columns, built[p].rows, exported, &batches[p]);
  }
  return batches;
}

}  // namespace sackli
