// The last component of a path: reports name a module or a source file by
// it, and the attach command finds the interpreter's library by it. And a
// path made absolute, for a process that works somewhere else (an attach
// target, the children of `run --fail-on-leak`).
#pragma once

#include <unistd.h>

#include <climits>
#include <string>
#include <string_view>

namespace torchseal {

inline std::string_view basename_of(std::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

// `path` against this process's working directory (unchanged when absolute,
// or when the directory cannot be read).
inline std::string absolute_path(const std::string &path) {
  if (path.empty() || path[0] == '/') return path;
  char cwd[PATH_MAX];
  if (!getcwd(cwd, sizeof cwd)) return path;
  return std::string(cwd) + "/" + path;
}

}  // namespace torchseal
