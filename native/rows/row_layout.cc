#include "rows/row_layout.h"

#include <cstdlib>
#include <cstring>
#include <string_view>

#include "bagz/errors.h"

namespace sackli {
namespace {

// Thrown inside this file only: the reason a type is unsupported.
struct Unsupported {
  std::string reason;
};

std::string_view NameOf(const ArrowSchema& schema) {
  return schema.name != nullptr ? schema.name : "";
}

// Whether the schema's metadata names an extension type. Metadata is an
// int32 count, then per entry an int32 key length, key, int32 value length,
// value (native-endian, per the C data interface).
bool HasExtensionName(const char* metadata) {
  if (metadata == nullptr) return false;
  int32_t count;
  std::memcpy(&count, metadata, 4);
  const char* p = metadata + 4;
  for (int32_t i = 0; i < count; ++i) {
    int32_t key_size;
    std::memcpy(&key_size, p, 4);
    std::string_view key(p + 4, static_cast<size_t>(key_size));
    p += 4 + key_size;
    int32_t value_size;
    std::memcpy(&value_size, p, 4);
    p += 4 + value_size;
    if (key == "ARROW:extension:name") return true;
  }
  return false;
}

// The number after `prefix` in `format` (e.g. "w:16" -> 16), positive.
uint32_t NumberAfter(std::string_view format, size_t prefix) {
  const std::string digits(format.substr(prefix));
  char* end = nullptr;
  const unsigned long value = std::strtoul(digits.c_str(), &end, 10);
  if (digits.empty() || *end != '\0' || value == 0 || value > (1u << 30)) {
    throw Unsupported{"type '" + std::string(format) + "' has a bad size"};
  }
  return static_cast<uint32_t>(value);
}

// Decimal "d:P,S" (128 bits) or "d:P,S,BITS".
uint32_t DecimalWidth(std::string_view format) {
  const size_t first = format.find(',');
  const size_t second = first == std::string_view::npos ? first : format.find(',', first + 1);
  if (second == std::string_view::npos) return 16;
  const uint32_t bits = NumberAfter(format, second + 1);
  if (bits != 32 && bits != 64 && bits != 128 && bits != 256) {
    throw Unsupported{"decimal format '" + std::string(format) + "' has a bad width"};
  }
  return bits / 8;
}

RowType Fixed(uint32_t width) {
  RowType type;
  type.kind = RowKind::kFixed;
  type.width = width;
  return type;
}

// Width of the fixed-size temporal formats ("tdD", "tss:UTC", ...), or 0.
uint32_t TemporalWidth(std::string_view f) {
  if (f == "tdD" || f == "tts" || f == "ttm" || f == "tiM") return 4;
  if (f == "tdm" || f == "ttu" || f == "ttn" || f == "tiD") return 8;
  if (f == "tin") return 16;
  if (f.size() >= 4 && (f.substr(0, 2) == "ts") && f[3] == ':' &&
      std::strchr("smun", f[2]) != nullptr) {
    return 8;  // timestamp, the zone (if any) is the schema's business
  }
  if (f.size() == 3 && f.substr(0, 2) == "tD" && std::strchr("smun", f[2]) != nullptr) {
    return 8;  // duration
  }
  return 0;
}

void LayOutStruct(RowType& type) {
  const size_t n = type.children.size();
  type.bitmap_bytes = static_cast<uint32_t>((n + 7) / 8);
  type.slots.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const RowType& child = type.children[i];
    if (child.is_fixed()) {
      type.slots[i] = type.fixed_bytes;
      type.fixed_bytes += child.fixed_width();
    } else {
      type.slots[i] = type.variable_count++;
    }
  }
}

RowType Parse(const ArrowSchema& schema, const std::string& where);

RowType ParseChildren(RowKind kind, const ArrowSchema& schema, const std::string& where) {
  RowType type;
  type.kind = kind;
  if (schema.n_children < 0 || (schema.n_children > 0 && schema.children == nullptr)) {
    throw Unsupported{"column '" + where + "': malformed schema"};
  }
  for (int64_t i = 0; i < schema.n_children; ++i) {
    const ArrowSchema* child = schema.children[i];
    if (child == nullptr) throw Unsupported{"column '" + where + "': malformed schema"};
    type.children.push_back(Parse(*child, where + "." + std::string(NameOf(*child))));
  }
  return type;
}

RowType Parse(const ArrowSchema& schema, const std::string& where) {
  if (schema.format == nullptr) throw Unsupported{"column '" + where + "': malformed schema"};
  const std::string_view f = schema.format;
  const auto unsupported = [&](const char* what) {
    return Unsupported{"column '" + where + "': " + what + " '" + std::string(f) +
                       "' is not supported by the row codec"};
  };
  if (schema.dictionary != nullptr) throw unsupported("dictionary type");
  if (HasExtensionName(schema.metadata)) throw unsupported("extension type");
  if (f.size() == 1) {
    switch (f[0]) {
      case 'n': return RowType{};
      case 'b': { RowType t; t.kind = RowKind::kBool; return t; }
      case 'c': case 'C': return Fixed(1);
      case 's': case 'S': case 'e': return Fixed(2);
      case 'i': case 'I': case 'f': return Fixed(4);
      case 'l': case 'L': case 'g': return Fixed(8);
      case 'z': case 'u': case 'Z': case 'U': {
        RowType t;
        t.kind = (f[0] == 'z' || f[0] == 'u') ? RowKind::kBinary : RowKind::kLargeBinary;
        t.utf8 = f[0] == 'u' || f[0] == 'U';
        return t;
      }
      default: break;
    }
  }
  if (f.substr(0, 2) == "w:") return Fixed(NumberAfter(f, 2));
  if (f.substr(0, 2) == "d:") return Fixed(DecimalWidth(f));
  if (const uint32_t width = TemporalWidth(f); width != 0) return Fixed(width);
  if (f == "+l" || f == "+L" || f.substr(0, 3) == "+w:") {
    RowType type = ParseChildren(
        f == "+l" ? RowKind::kList : f == "+L" ? RowKind::kLargeList : RowKind::kFixedList,
        schema, where);
    if (type.children.size() != 1) {
      throw Unsupported{"column '" + where + "': a list without one child"};
    }
    if (type.kind == RowKind::kFixedList) type.width = NumberAfter(f, 3);
    return type;
  }
  if (f == "+s") {
    RowType type = ParseChildren(RowKind::kStruct, schema, where);
    LayOutStruct(type);
    return type;
  }
  if (f == "+m") throw unsupported("map type");
  if (f.substr(0, 2) == "+u") throw unsupported("union type");
  throw unsupported("type");
}

RowType ParseTop(const ArrowSchema& schema) {
  if (schema.format == nullptr || std::string_view(schema.format) != "+s") {
    throw Unsupported{"the schema is not a struct of columns"};
  }
  RowType type;
  type.kind = RowKind::kStruct;
  if (schema.n_children < 0 || (schema.n_children > 0 && schema.children == nullptr)) {
    throw Unsupported{"malformed schema"};
  }
  for (int64_t i = 0; i < schema.n_children; ++i) {
    const ArrowSchema* child = schema.children[i];
    if (child == nullptr) throw Unsupported{"malformed schema"};
    type.children.push_back(Parse(*child, std::string(NameOf(*child))));
  }
  LayOutStruct(type);
  return type;
}

}  // namespace

std::string RowCodecUnsupported(const ArrowSchema& schema) {
  try {
    ParseTop(schema);
    return {};
  } catch (const Unsupported& error) {
    return error.reason;
  }
}

RowType RowTypeOf(const ArrowSchema& schema) {
  try {
    return ParseTop(schema);
  } catch (const Unsupported& error) {
    ThrowInvalidArgument(error.reason);
  }
}

}  // namespace sackli
