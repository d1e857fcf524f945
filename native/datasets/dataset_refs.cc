#include "datasets/dataset_refs.h"

namespace sackli {
namespace {

// A cursor over one msgpack record: each Read* consumes one value, or
// returns false (and the record is refused) when the next value is not of
// that kind or runs past the end.
class MsgpackCursor {
 public:
  MsgpackCursor(const char* data, size_t n)
      : p_(reinterpret_cast<const unsigned char*>(data)), end_(p_ + n) {}

  bool at_end() const { return p_ == end_; }

  // An array header: its element count.
  bool ReadArray(uint64_t& count) {
    if (p_ == end_) return false;
    const unsigned char tag = *p_;
    if ((tag & 0xF0) == 0x90) {  // fixarray
      ++p_;
      count = tag & 0x0F;
      return true;
    }
    if (tag == 0xDC) return ReadBigEndian(1, 2, count);  // array 16
    if (tag == 0xDD) return ReadBigEndian(1, 4, count);  // array 32
    return false;
  }

  // A non-negative integer (signed encodings included, as msgpack reads
  // them the same).
  bool ReadUnsigned(uint64_t& value) {
    if (p_ == end_) return false;
    const unsigned char tag = *p_;
    if (tag <= 0x7F) {  // positive fixint
      ++p_;
      value = tag;
      return true;
    }
    switch (tag) {
      case 0xCC: return ReadBigEndian(1, 1, value);  // uint 8
      case 0xCD: return ReadBigEndian(1, 2, value);
      case 0xCE: return ReadBigEndian(1, 4, value);
      case 0xCF: return ReadBigEndian(1, 8, value);
      case 0xD0: return ReadSigned(1, value);  // int 8
      case 0xD1: return ReadSigned(2, value);
      case 0xD2: return ReadSigned(4, value);
      case 0xD3: return ReadSigned(8, value);
      default: return false;
    }
  }

 private:
  // `bytes` big-endian bytes after `skip` tag bytes.
  bool ReadBigEndian(size_t skip, size_t bytes, uint64_t& value) {
    if (static_cast<size_t>(end_ - p_) < skip + bytes) return false;
    p_ += skip;
    value = 0;
    for (size_t i = 0; i < bytes; ++i) value = (value << 8) | *p_++;
    return true;
  }

  bool ReadSigned(size_t bytes, uint64_t& value) {
    const unsigned char* tag = p_;
    if (!ReadBigEndian(1, bytes, value)) return false;
    const uint64_t sign = uint64_t{1} << (8 * bytes - 1);
    if ((value & sign) != 0) {  // negative: no ref is
      p_ = tag;
      return false;
    }
    return true;
  }

  const unsigned char* p_;
  const unsigned char* end_;
};

}  // namespace

bool ParseDatasetRefs(const char* data, size_t n, const std::vector<bool>& is_list,
                      DatasetRef* out) {
  MsgpackCursor cursor(data, n);
  uint64_t count = 0;
  if (!cursor.ReadArray(count) || count != is_list.size()) return false;
  for (size_t field = 0; field < is_list.size(); ++field) {
    DatasetRef& ref = out[field];
    if (!is_list[field]) {
      ref.length = 1;
      if (!cursor.ReadUnsigned(ref.start)) return false;
      continue;
    }
    uint64_t parts = 0;
    if (!cursor.ReadArray(parts)) return false;
    if (parts == 0) {
      ref.start = ref.length = 0;
    } else if (parts != 2 || !cursor.ReadUnsigned(ref.start) ||
               !cursor.ReadUnsigned(ref.length)) {
      return false;
    }
  }
  return cursor.at_end();
}

}  // namespace sackli
