// The names of a capped history's files (docs/tseal-format.md, "Capped
// histories"): the writer in the shim makes them, the reader opens them.
#pragma once

#include <cstdint>
#include <string>

namespace torchseal {

// The file of segment `seq` of the history at `path` (P.tseal.000042).
std::string segment_path(const std::string &path, uint64_t seq);
// The file of base checkpoint `seq` (taken where segment `seq` begins).
std::string base_path(const std::string &path, uint64_t seq);

}  // namespace torchseal
