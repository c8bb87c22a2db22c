// Byte offsets into CPython's thread states, frames, code objects and strings
// for each supported minor version (x86-64/aarch64 Linux), default (GIL) and
// free-threaded builds. The 3.11+ frame structs are internal to CPython. For
// 3.10-3.12 the offsets come from each version's headers
// (Include/internal/pycore_frame.h and friends). 3.13 and later publish
// _Py_DebugOffsets: 3.13's table is checked against it; free-threaded builds
// (3.13t on) and every build from 3.14 on are read from it, plus the few
// per-build facts it does not carry. A build that disagrees is refused, not
// misread.
#pragma once

#include <cstdint>
#include <string>

namespace torchseal::py {

// Interpreter-frame owners (3.11+), pycore_frame.h.
enum FrameOwner : uint8_t {
  kOwnedByThread = 0,
  kOwnedByGenerator = 1,
  kOwnedByFrameObject = 2,
  // 3.12+: entry frames, never user code. 3.12/3.13 call it
  // FRAME_OWNED_BY_CSTACK; 3.14 FRAME_OWNED_BY_INTERPRETER, with CSTACK = 4.
  kOwnedByEntry = 3,
};

constexpr int32_t kAbsent = -1;

// _PyCodeArray (cpython/code.h, free-threaded 3.14+), the thread-local
// bytecode copies: a Py_ssize_t count, then the entries. _Py_DebugOffsets
// does not describe it.
constexpr uint32_t kCodeArraySize = 0;
constexpr uint32_t kCodeArrayEntries = 8;

struct Layout {
  int minor;           // 10 and up
  bool free_threaded;  // _Py_DebugOffsets.free_threaded (3.13+)

  uint32_t ob_type;  // PyObject.ob_type

  // Thread state -> innermost frame. When cframe_current_frame is set (3.11,
  // 3.12) ts_frame is the _PyCFrame pointer and the frame is one hop further.
  uint32_t ts_frame;
  int32_t cframe_current_frame;

  // Frame: PyFrameObject on 3.10, _PyInterpreterFrame on 3.11+.
  uint32_t fr_code;      // f_code / f_executable
  uint32_t fr_previous;  // f_back / previous
  uint32_t fr_position;  // f_lasti (int, code units) on 3.10; instruction pointer on 3.11+
  int32_t fr_owner;      // uint8 owner; kAbsent on 3.10
  // Owners from kOwnedByEntry up to this one are entry frames; a larger
  // value means the pointer is not a frame.
  uint8_t fr_owner_last;
  // 3.14+: f_executable is a _PyStackRef, a PyObject* whose low bits are
  // tags (Py_TAG_BITS, internal/pycore_stackref.h); 0 before.
  uint8_t fr_code_tag_bits;
  // Free-threaded 3.14+: the int32 index of the thread-local bytecode copy
  // the frame runs, and the code object's _PyCodeArray of copies
  // (co_tlbc->entries[index]; entry 0 is co_code_adaptive). kAbsent in GIL
  // builds and 3.13t, where every frame runs co_code_adaptive.
  int32_t fr_tlbc_index;
  int32_t co_tlbc;

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
  bool str_has_ready_bit;     // 3.10/3.11: the bit above `ascii` must be set
  // Where `kind` starts in the state word; compact and ascii follow it (and
  // ready, 3.10/3.11). 2 after the 2-bit `interned`; 8 in free-threaded
  // 3.14+, whose `interned` is a whole byte (cpython/unicodeobject.h).
  uint8_t str_kind_shift;

  // Bytes (PyBytesObject).
  uint32_t bytes_size;
  uint32_t bytes_data;
};

// The layout of the interpreter with this PY_VERSION_HEX, whose _PyRuntime
// (where _Py_DebugOffsets is the first member; 0 if not exported) is at
// `py_runtime`. nullptr with a one-line reason in `why` when it cannot be
// read: older than 3.10, or _Py_DebugOffsets missing or naming a field that
// disagrees with what the reader needs. A free-threaded build is told by
// _Py_DebugOffsets.free_threaded, never by the version. A minor newer than
// the newest known one is read like the newest of its kind (GIL or
// free-threaded) when its debug offsets agree with that one's facts. The
// result lives as long as the process (other threads may hold it).
const Layout *resolve_layout(uint32_t version_hex, uintptr_t py_runtime, std::string &why);

}  // namespace torchseal::py
