// The row codec's layout: which Arrow types a row can hold and where each
// value of a row lies (docs/format.md, "Arrow rows"). Built from an Arrow C
// data interface schema (a struct: the columns of a record batch).
//
// A row is: u8 version (kRowFormatVersion), then the columns as a struct
// body. A struct body is [validity bitmap over its fields, 1 bit each,
// LSB first][fixed slots of its fixed-width fields, in field order][one u32
// end per variable-width field][variable area]. Variable field k spans
// [end[k - 1], end[k]) of the variable area (end[-1] = 0), so one field is
// reached without walking the others. A list value is [u32 count][element
// bitmap][count fixed values | count u32 ends + element area]; a
// fixed-size list is the same without the count. Strings and binaries are
// their bytes. A null's fixed slot is zeros and its variable span empty.
// Little-endian throughout.
//
// Thread-safety: a RowType is immutable once built; share it freely.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "arrow/arrow_stream.h"

namespace sackli {

// The leading byte of every row; another value is a row of another format.
inline constexpr uint8_t kRowFormatVersion = 1;

enum class RowKind {
  kNull,         // Arrow null type: no bytes, always null
  kBool,         // one byte, 0 or 1
  kFixed,        // `width` bytes copied as they are (ints, floats, dates, ...)
  kBinary,       // string / binary (int32 offsets)
  kLargeBinary,  // large_string / large_binary (int64 offsets)
  kList,         // list (int32 offsets)
  kLargeList,    // large_list (int64 offsets)
  kFixedList,    // fixed_size_list of `width` elements
  kStruct,
};

struct RowType {
  RowKind kind = RowKind::kNull;
  uint32_t width = 0;  // kFixed: bytes per value; kFixedList: elements
  bool utf8 = false;   // kBinary / kLargeBinary: a string type (checked on decode)
  std::vector<RowType> children;  // lists: one; struct: its fields

  // Struct only: where each field lies in a struct body.
  std::vector<uint32_t> slots;  // fixed field: byte offset of its slot in
                                // the fixed section; variable: its end's index
  uint32_t bitmap_bytes = 0;
  uint32_t fixed_bytes = 0;
  uint32_t variable_count = 0;

  // Whether values sit in a fixed slot (null, bool, fixed) rather than
  // behind an end offset.
  bool is_fixed() const {
    return kind == RowKind::kNull || kind == RowKind::kBool || kind == RowKind::kFixed;
  }
  // Bytes of a fixed value's slot.
  uint32_t fixed_width() const {
    return kind == RowKind::kFixed ? width : kind == RowKind::kBool ? 1 : 0;
  }
  // Buffers an array of this kind has in the Arrow C data interface.
  int64_t buffer_count() const {
    switch (kind) {
      case RowKind::kNull: return 0;
      case RowKind::kBinary: case RowKind::kLargeBinary: return 3;
      case RowKind::kFixedList: case RowKind::kStruct: return 1;
      default: return 2;
    }
  }
  // Bytes before a struct body's variable area.
  uint64_t header_bytes() const {
    return uint64_t{bitmap_bytes} + fixed_bytes + 4 * uint64_t{variable_count};
  }
};

// Why the row codec cannot hold rows of `schema` (e.g. "column 'm': map
// type '+m' is not supported"), or empty when it can. `schema` must be a
// struct (the columns of a record batch). Dictionaries, unions, maps, views,
// run-end encoded arrays and extension types are not supported: write such
// rows as Arrow IPC rows instead. Never throws for a malformed schema (it
// is unsupported).
std::string RowCodecUnsupported(const ArrowSchema& schema);

// The layout of rows of `schema`. Throws sackli::Error(kInvalidArgument)
// with RowCodecUnsupported's reason when the codec cannot hold them.
RowType RowTypeOf(const ArrowSchema& schema);

}  // namespace sackli
