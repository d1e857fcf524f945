#include "bagz/format.h"

namespace sackli {

std::string LimitsPathFor(const std::string& records_path) {
  const size_t slash = records_path.find_last_of('/');
  if (slash == std::string::npos) return "limits." + records_path;
  return records_path.substr(0, slash + 1) + "limits." +
         records_path.substr(slash + 1);
}

std::string PartialFolderPrefix(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  const size_t name = slash == std::string::npos ? 0 : slash + 1;
  return path.substr(0, name) + "." + path.substr(name) + kPartialMarker;
}

bool HasZstdSuffix(const std::string& path) {
  static constexpr char kSuffix[] = ".bagz";
  constexpr size_t n = sizeof(kSuffix) - 1;
  return path.size() >= n && path.compare(path.size() - n, n, kSuffix) == 0;
}

std::optional<TailTrailer> ParseTailTrailer(uint64_t file_size,
                                            uint64_t last_u64) {
  if (file_size < kLimitBytes) return std::nullopt;
  if (last_u64 > file_size - kLimitBytes) return std::nullopt;
  const uint64_t limits_bytes = file_size - last_u64;
  if (limits_bytes % kLimitBytes != 0) return std::nullopt;
  return TailTrailer{last_u64, limits_bytes / kLimitBytes};
}

}  // namespace sackli
