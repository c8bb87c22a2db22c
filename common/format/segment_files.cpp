#include "common/format/segment_files.h"

#include <cinttypes>
#include <cstdio>

namespace torchseal {

std::string segment_path(const std::string &path, uint64_t seq) {
  char suffix[32];
  snprintf(suffix, sizeof suffix, ".%06" PRIu64, seq);
  return path + suffix;
}

std::string base_path(const std::string &path, uint64_t seq) {
  return segment_path(path, seq) + ".base";
}

}  // namespace torchseal
