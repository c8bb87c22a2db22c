// Byte offsets into CPython's thread states, frames, code objects and strings
// for each supported minor version (x86-64/aarch64 Linux, default GIL build).
// The 3.11+ frame structs are internal to CPython, so these come from the
// version's headers (Include/internal/pycore_frame.h and friends); 3.13 and
// later publish _Py_DebugOffsets, which validate_debug_offsets() checks our
// table against, so a mismatching build is refused instead of misread.
#pragma once

#include <cstdint>
#include <string>

namespace torchseal::py {

// Interpreter-frame owners (3.11+), pycore_frame.h.
enum FrameOwner : uint8_t {
  kOwnedByThread = 0,
  kOwnedByGenerator = 1,
  kOwnedByFrameObject = 2,
  kOwnedByCStack = 3,  // 3.12+: entry trampolines, never user code
};

constexpr int32_t kAbsent = -1;

struct Layout {
  int minor;  // 10..13

  // Thread state -> innermost frame. When cframe_current_frame is set (3.11,
  // 3.12) ts_frame is the _PyCFrame pointer and the frame is one hop further.
  uint32_t ts_frame;
  int32_t cframe_current_frame;

  // Frame: PyFrameObject on 3.10, _PyInterpreterFrame on 3.11+.
  uint32_t fr_code;      // f_code / f_executable
  uint32_t fr_previous;  // f_back / previous
  uint32_t fr_position;  // f_lasti (int, code units) on 3.10; instruction pointer on 3.11+
  int32_t fr_owner;      // uint8 owner; kAbsent on 3.10

  // Code object.
  uint32_t co_firstlineno;  // int
  uint32_t co_filename;
  uint32_t co_name;
  int32_t co_qualname;        // kAbsent on 3.10 (co_name is reported)
  uint32_t co_linetable;      // bytes: PEP 626 table (3.10) or location table (3.11+)
  int32_t co_firsttraceable;  // int; kAbsent on 3.10
  int32_t co_code_adaptive;   // inline bytecode; kAbsent on 3.10
  // A word that changes when a code object's address is reused for different
  // bytecode: ob_size (code units) on 3.11+, the co_code pointer on 3.10.
  uint32_t co_identity_word;
  bool co_identity_is_size;  // co_identity_word holds a code-unit count

  // Strings (PyASCIIObject / PyCompactUnicodeObject).
  uint32_t str_length;
  uint32_t str_state;
  uint32_t str_ascii_data;    // sizeof(PyASCIIObject)
  uint32_t str_compact_data;  // sizeof(PyCompactUnicodeObject); data.any for non-compact
  bool str_has_ready_bit;     // 3.10/3.11: bit 7 of state must be set

  // Bytes (PyBytesObject).
  uint32_t bytes_size;
  uint32_t bytes_data;
};

// The table for a PY_VERSION_HEX, or nullptr when the minor version is not
// supported (older than 3.10, or newer than 3.13).
const Layout *layout_for_version(uint32_t version_hex);

// 3.13+: compares `layout` with the interpreter's own _Py_DebugOffsets (the
// first member of _PyRuntime). False, with a reason in `why`, when the cookie
// or version is wrong, the build is free-threaded, or any offset differs.
bool validate_debug_offsets(uintptr_t py_runtime, uint32_t version_hex, const Layout &layout,
                            std::string &why);

}  // namespace torchseal::py
