#include "rows/row_encode.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>

#include "bagz/errors.h"
#include "bagz/format.h"
#include "bagz/thread_pool.h"

namespace sackli {
namespace {

// Checks that `array` has the buffers and children `type` needs, so that
// encoding never reads a pointer that is not there.
void CheckShape(const RowType& type, const ArrowArray& array) {
  const auto bad = [](const char* what) {
    ThrowInvalidArgument(std::string("row codec: the Arrow array does not match its schema (") +
                         what + ")");
  };
  if (array.length < 0 || array.offset < 0) bad("negative length or offset");
  if (array.n_buffers != type.buffer_count()) bad("buffer count");
  if (array.n_buffers > 0 && array.buffers == nullptr) bad("no buffers");
  for (int64_t b = 1; b < array.n_buffers; ++b) {
    if (array.buffers[b] == nullptr && array.length > 0) bad("a missing data buffer");
  }
  if (array.n_children != static_cast<int64_t>(type.children.size())) bad("child count");
  for (int64_t c = 0; c < array.n_children; ++c) {
    if (array.children == nullptr || array.children[c] == nullptr) bad("a missing child");
    CheckShape(type.children[static_cast<size_t>(c)], *array.children[c]);
  }
}

bool Bit(const void* bits, int64_t i) {
  return (static_cast<const uint8_t*>(bits)[i >> 3] >> (i & 7)) & 1;
}

// One array and its type; `i` below is a logical index (before the
// array's own offset).
struct Column {
  const RowType* type;
  const ArrowArray* array;

  bool IsValid(int64_t i) const {
    if (type->kind == RowKind::kNull) return false;
    const void* validity = array->buffers[0];
    return validity == nullptr || Bit(validity, array->offset + i);
  }
  Column Child(size_t c) const { return {&type->children[c], array->children[c]}; }
  // [begin, end) of value i of a binary or list array.
  void Range(int64_t i, int64_t& begin, int64_t& end) const {
    const int64_t at = array->offset + i;
    if (type->kind == RowKind::kBinary || type->kind == RowKind::kList) {
      const auto* offsets = static_cast<const int32_t*>(array->buffers[1]);
      begin = offsets[at];
      end = offsets[at + 1];
    } else {
      const auto* offsets = static_cast<const int64_t*>(array->buffers[1]);
      begin = offsets[at];
      end = offsets[at + 1];
    }
  }
};

class RowWriter {
 public:
  explicit RowWriter(std::vector<char>& out) : out_(out) {}

  // A struct body of the children of `parent` at logical child index `i`
  // (the caller has already added the struct's offset).
  void StructBody(const Column& parent, int64_t i) {
    const RowType& type = *parent.type;
    const size_t start = out_.size();
    out_.resize(start + type.header_bytes(), 0);
    const size_t fixed = start + type.bitmap_bytes;
    const size_t ends = fixed + type.fixed_bytes;
    const size_t area = ends + 4 * size_t{type.variable_count};
    for (size_t c = 0; c < type.children.size(); ++c) {
      const Column child = parent.Child(c);
      const bool valid = child.IsValid(i);
      if (valid) out_[start + c / 8] = static_cast<char>(out_[start + c / 8] | (1 << (c % 8)));
      if (child.type->is_fixed()) {
        if (valid) FixedValue(child, i, &out_[fixed + type.slots[c]]);
      } else {
        if (valid) VariableValue(child, i);
        PutU32(ends + 4 * size_t{type.slots[c]}, out_.size() - area);
      }
    }
  }

 private:
  void PutU32(size_t at, size_t value) {
    if (value > std::numeric_limits<uint32_t>::max()) {
      ThrowInvalidArgument("row codec: a row longer than 4 GiB cannot be encoded");
    }
    StoreU32(&out_[at], static_cast<uint32_t>(value));
  }

  void Append(const void* data, size_t size) {
    const auto* bytes = static_cast<const char*>(data);
    out_.insert(out_.end(), bytes, bytes + size);
  }

  static void FixedValue(const Column& column, int64_t i, char* slot) {
    const int64_t at = column.array->offset + i;
    if (column.type->kind == RowKind::kBool) {
      *slot = static_cast<char>(Bit(column.array->buffers[1], at));
    } else if (column.type->kind == RowKind::kFixed) {
      const size_t width = column.type->width;
      std::memcpy(slot, static_cast<const char*>(column.array->buffers[1]) + at * width, width);
    }
  }

  void VariableValue(const Column& column, int64_t i) {
    const RowType& type = *column.type;
    switch (type.kind) {
      case RowKind::kBinary:
      case RowKind::kLargeBinary: {
        int64_t begin, end;
        column.Range(i, begin, end);
        Append(static_cast<const char*>(column.array->buffers[2]) + begin,
               static_cast<size_t>(end - begin));
        return;
      }
      case RowKind::kList:
      case RowKind::kLargeList: {
        int64_t begin, end;
        column.Range(i, begin, end);
        const size_t at = out_.size();
        out_.resize(at + 4);
        PutU32(at, static_cast<size_t>(end - begin));
        Elements(column.Child(0), begin, end - begin);
        return;
      }
      case RowKind::kFixedList: {
        const int64_t size = type.width;
        Elements(column.Child(0), (column.array->offset + i) * size, size);
        return;
      }
      case RowKind::kStruct:
        StructBody(column, column.array->offset + i);
        return;
      default:
        return;
    }
  }

  // The element bitmap and values of elements [first, first + count) of
  // `child` (logical indices).
  void Elements(const Column& child, int64_t first, int64_t count) {
    const size_t bitmap = out_.size();
    out_.resize(bitmap + static_cast<size_t>((count + 7) / 8), 0);
    for (int64_t e = 0; e < count; ++e) {
      if (child.IsValid(first + e)) {
        out_[bitmap + e / 8] = static_cast<char>(out_[bitmap + e / 8] | (1 << (e % 8)));
      }
    }
    if (child.type->is_fixed()) {
      const size_t width = child.type->fixed_width();
      const size_t values = out_.size();
      out_.resize(values + width * static_cast<size_t>(count), 0);
      if (width == 0) return;
      for (int64_t e = 0; e < count; ++e) {
        if (child.IsValid(first + e)) FixedValue(child, first + e, &out_[values + e * width]);
      }
      return;
    }
    const size_t ends = out_.size();
    out_.resize(ends + 4 * static_cast<size_t>(count), 0);
    const size_t area = out_.size();
    for (int64_t e = 0; e < count; ++e) {
      if (child.IsValid(first + e)) VariableValue(child, first + e);
      PutU32(ends + 4 * static_cast<size_t>(e), out_.size() - area);
    }
  }

  std::vector<char>& out_;
};

void EncodePart(const RowType& type, const ArrowArray& batch, int64_t begin, int64_t end,
                EncodedRows& part) {
  part.offsets.reserve(static_cast<size_t>(end - begin) + 1);
  part.offsets.push_back(0);
  RowWriter writer(part.data);
  const Column top{&type, &batch};
  for (int64_t row = begin; row < end; ++row) {
    part.data.push_back(static_cast<char>(kRowFormatVersion));
    writer.StructBody(top, batch.offset + row);
    part.offsets.push_back(part.data.size());
  }
}

}  // namespace

EncodedRows EncodeRows(const RowType& type, const ArrowArray& batch, size_t parallelism) {
  CheckShape(type, batch);
  const int64_t rows = batch.length;
  // Parts of at least a few thousand rows: fewer copies when joining.
  const size_t parts = static_cast<size_t>(std::clamp<int64_t>(
      rows / 4096, 1, static_cast<int64_t>(std::max<size_t>(parallelism, 1))));
  std::vector<EncodedRows> pieces(parts);
  ThreadPool::Shared().ParallelFor(parts, parts, [&](size_t p) {
    EncodePart(type, batch, rows * static_cast<int64_t>(p) / static_cast<int64_t>(parts),
               rows * static_cast<int64_t>(p + 1) / static_cast<int64_t>(parts), pieces[p]);
  });
  if (parts == 1) return std::move(pieces[0]);
  EncodedRows joined;
  size_t total = 0;
  for (const EncodedRows& piece : pieces) total += piece.data.size();
  joined.data.reserve(total);
  joined.offsets.reserve(static_cast<size_t>(rows) + 1);
  joined.offsets.push_back(0);
  for (EncodedRows& piece : pieces) {
    const uint64_t base = joined.data.size();
    joined.data.insert(joined.data.end(), piece.data.begin(), piece.data.end());
    for (size_t k = 1; k < piece.offsets.size(); ++k) {
      joined.offsets.push_back(base + piece.offsets[k]);
    }
    piece = EncodedRows{};
  }
  return joined;
}

}  // namespace sackli
