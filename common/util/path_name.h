// The last component of a path: reports name a module or a source file by
// it, and the attach command finds the interpreter's library by it.
#pragma once

#include <string_view>

namespace torchseal {

inline std::string_view basename_of(std::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

}  // namespace torchseal
