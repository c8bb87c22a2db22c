#include "report/analysis/shown_frames.h"

#include <cctype>

#include "common/util/path_name.h"
#include "report/analysis/library_held.h"

namespace torchseal {
namespace {

// Position just past "site-packages/" or "dist-packages/" as a whole path
// component, or npos.
size_t past_packages_dir(std::string_view file) {
  for (std::string_view dir : {"site-packages/", "dist-packages/"}) {
    for (size_t at = file.find(dir); at != std::string_view::npos; at = file.find(dir, at + 1)) {
      if (at == 0 || file[at - 1] == '/') return at + dir.size();
    }
  }
  return std::string_view::npos;
}

// A path component `python3.X` (or `python3.Xt`, free-threaded) directly
// under `lib` or `lib64`: an interpreter's standard library directory.
bool under_stdlib_dir(std::string_view file) {
  for (std::string_view lib : {"lib/python", "lib64/python"}) {
    for (size_t at = file.find(lib); at != std::string_view::npos; at = file.find(lib, at + 1)) {
      if (at != 0 && file[at - 1] != '/') continue;
      size_t i = at + lib.size();
      size_t digits = 0, dots = 0;
      while (i < file.size() &&
             (std::isdigit(static_cast<unsigned char>(file[i])) || file[i] == '.')) {
        (file[i] == '.' ? dots : digits) += 1;
        ++i;
      }
      if (i < file.size() && file[i] == 't') ++i;
      if (digits >= 2 && dots == 1 && i < file.size() && file[i] == '/') return true;
    }
  }
  return false;
}

// The interpreter executable (python, python3, python3.12, python3.13t):
// a statically linked CPython has its whole eval loop there.
bool is_interpreter_executable(std::string_view module) {
  std::string_view b = basename_of(module);
  if (!b.starts_with("python")) return false;
  for (char c : b.substr(6)) {
    if (!std::isdigit(static_cast<unsigned char>(c)) && c != '.' && c != 't' && c != 'd' &&
        c != 'm') {
      return false;
    }
  }
  return true;
}

// CPython's C API and internals: _Py*, Py_*, PyObject_Call, ...
bool is_cpython_name(std::string_view fn) {
  if (fn.starts_with("_Py")) return true;
  return fn.size() > 2 && fn.starts_with("Py") &&
         (std::isupper(static_cast<unsigned char>(fn[2])) || fn[2] == '_');
}

// The qualified name, past a template instantiation's return type
// ("void c10::function_ref<...>" -> "c10::function_ref<...>").
std::string_view qualified_name(std::string_view fn) {
  const size_t space = fn.find(' ');
  const size_t open = fn.find_first_of("<(");
  if (space != std::string_view::npos && (open == std::string_view::npos || space < open)) {
    return fn.substr(space + 1);
  }
  return fn;
}

bool is_framework_name(std::string_view fn) {
  std::string_view q = qualified_name(fn);
  for (std::string_view ns : {"pybind11::", "c10::", "at::", "torch::", "caffe2::", "THP"}) {
    if (fn.starts_with(ns) || q.starts_with(ns)) return true;
  }
  return false;
}

bool is_process_entry(std::string_view fn) {
  return fn == "main" || fn == "_start" || fn.starts_with("__libc_start");
}

}  // namespace

PyOrigin python_origin(std::string_view file) {
  if (file.empty() || file.starts_with("<frozen")) return PyOrigin::Stdlib;
  if (size_t pkg = past_packages_dir(file); pkg != std::string_view::npos) {
    return file.substr(pkg).starts_with("torch/") ? PyOrigin::Torch : PyOrigin::User;
  }
  return under_stdlib_dir(file) ? PyOrigin::Stdlib : PyOrigin::User;
}

bool is_installed_python(std::string_view file) {
  return file.empty() || file[0] == '<' || past_packages_dir(file) != std::string_view::npos ||
         python_origin(file) != PyOrigin::User;
}

bool is_interpreter_native(const NativeFrame &f) {
  if (is_process_entry(f.function)) return false;
  if (basename_of(f.module).starts_with("libpython")) return true;
  if (is_interpreter_executable(f.module)) return true;
  return is_cpython_name(f.function);
}

bool is_folded_native(const NativeFrame &f) {
  if (is_process_entry(f.function)) return false;
  return is_interpreter_native(f) || is_framework_module(f.module) || is_framework_name(f.function);
}

long user_python_index(const std::vector<PythonFrame> &py) {
  for (size_t i = 0; i < py.size(); ++i) {
    if (python_origin(py[i].file) == PyOrigin::User) return long(i);
  }
  return -1;
}

ShownStack shown_stack(const std::vector<NativeFrame> &frames, const std::vector<PythonFrame> &py) {
  ShownStack s;
  s.user = user_python_index(py);
  if (s.user >= 0) s.python.push_back(size_t(s.user));
  for (size_t i = 0; i < py.size(); ++i) {
    if (long(i) != s.user) s.python.push_back(i);
  }
  for (size_t i = 0; i < frames.size();) {
    size_t j = i;
    while (j < frames.size() && is_folded_native(frames[j])) ++j;
    // A lone framework frame takes no more room than its fold line: show it.
    if (j - i >= 2) {
      s.native.push_back({i, j - i, true});
      i = j;
    } else {
      s.native.push_back({i, 1, false});
      ++i;
    }
  }
  return s;
}

std::string folded_label(size_t count) {
  return std::to_string(count) + " interpreter/framework frame" + (count == 1 ? "" : "s") +
         " folded";
}

bool is_python_site(const Report &r, const std::vector<PythonFrame> &py) {
  return !r.process.python.empty() || !py.empty();
}

}  // namespace torchseal
