// What a person is shown first of a Python process's site (docs/report-format.md,
// "User frame"): the innermost Python frame outside torch's package and the
// standard library, then the other Python frames, then the native frames
// with the interpreter's and the frameworks' own frames folded into a count.
// The text and HTML reports both lay a site out with shown_stack(), so they
// agree; P.json keeps every frame.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "report/model/report_model.h"

namespace torchseal {

// Where a Python source file comes from, judged from its path alone (the
// report may be read on another machine than the one that ran the program):
//   Stdlib: under an interpreter's `lib/python3.X/` (or lib64) and not in a
//           site-packages/dist-packages below it, or a `<frozen ...>` module;
//   Torch:  under a `torch/` package directory in site-packages or
//           dist-packages;
//   User:   anything else (the user's code and other installed packages).
enum class PyOrigin { User, Torch, Stdlib };
PyOrigin python_origin(std::string_view file);

// Installed or interpreter-internal code (any site-packages/dist-packages
// file, the standard library, `<string>`-style pseudo files): not the user's
// source, so hints never scan it.
bool is_installed_python(std::string_view file);

// A native frame of the Python interpreter (libpython, its eval loop and C
// API, also when linked into the python executable) or of the framework
// stack between Python and the allocator (pybind11, c10::, at::, torch::,
// libtorch*, libc10*, torch's _C extension). The process entry (`main`,
// `_start`, libc's start-up) is not folded.
bool is_folded_native(const NativeFrame &f);
// The interpreter part of the above: where Python frames sit in a mixed stack.
bool is_interpreter_native(const NativeFrame &f);

// Index of the innermost user Python frame, or -1 when every Python frame is
// torch's or the standard library's (or there are none).
long user_python_index(const std::vector<PythonFrame> &py);

// One row of the native part: a frame, or a run of folded frames.
struct NativeRow {
  size_t first = 0;  // index into frames
  size_t count = 1;  // frames in the row; > 1 or folded only for a folded run
  bool folded = false;
};

struct ShownStack {
  std::vector<size_t> python;  // indexes into python_frames, in display order
  long user = -1;              // user_python_index(); python[0] when >= 0
  std::vector<NativeRow> native;
};

// The layout of one site in a Python process.
ShownStack shown_stack(const std::vector<NativeFrame> &frames, const std::vector<PythonFrame> &py);

// "37 interpreter/framework frames folded" (the one wording of a folded run).
std::string folded_label(size_t count);

// A Python process: the report says which interpreter ran it, or the site
// carries Python frames. Native programs keep the plain native layout.
bool is_python_site(const Report &r, const std::vector<PythonFrame> &py);

}  // namespace torchseal
