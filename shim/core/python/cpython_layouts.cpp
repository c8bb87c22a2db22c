#include "shim/core/python/cpython_layouts.h"

#include <cstddef>
#include <cstring>

#include "shim/core/python/raw_read.h"

namespace torchseal::py {
namespace {

// Values checked against the 3.10.13, 3.11.7, 3.12.1 and 3.13.0 headers.
// Within a minor version the layout of these fields is ABI-frozen in practice
// (3.11.7's table reads Debian's 3.11.2 correctly), so one row per minor.
constexpr Layout kLayouts[] = {
    // 3.10: tstate->frame is a PyFrameObject*; f_lasti counts code units.
    {.minor = 10,
     .ts_frame = 24,
     .cframe_current_frame = kAbsent,
     .fr_code = 32,
     .fr_previous = 24,
     .fr_position = 96,
     .fr_owner = kAbsent,
     .co_firstlineno = 40,
     .co_filename = 104,
     .co_name = 112,
     .co_qualname = kAbsent,
     .co_linetable = 120,
     .co_firsttraceable = kAbsent,
     .co_code_adaptive = kAbsent,
     .co_identity_word = 48,
     .co_identity_is_size = false,
     .str_length = 16,
     .str_state = 32,
     .str_ascii_data = 48,
     .str_compact_data = 72,
     .str_has_ready_bit = true,
     .bytes_size = 16,
     .bytes_data = 32},
    // 3.11: tstate->cframe->current_frame; prev_instr is the last executed unit.
    {.minor = 11,
     .ts_frame = 56,
     .cframe_current_frame = 8,
     .fr_code = 32,
     .fr_previous = 48,
     .fr_position = 56,
     .fr_owner = 69,
     .co_firstlineno = 72,
     .co_filename = 112,
     .co_name = 120,
     .co_qualname = 128,
     .co_linetable = 136,
     .co_firsttraceable = 168,
     .co_code_adaptive = 184,
     .co_identity_word = 16,
     .co_identity_is_size = true,
     .str_length = 16,
     .str_state = 32,
     .str_ascii_data = 48,
     .str_compact_data = 72,
     .str_has_ready_bit = true,
     .bytes_size = 16,
     .bytes_data = 32},
    // 3.12: cframe->current_frame moved to offset 0; no wstr in strings.
    {.minor = 12,
     .ts_frame = 56,
     .cframe_current_frame = 0,
     .fr_code = 0,
     .fr_previous = 8,
     .fr_position = 56,
     .fr_owner = 70,
     .co_firstlineno = 68,
     .co_filename = 112,
     .co_name = 120,
     .co_qualname = 128,
     .co_linetable = 136,
     .co_firsttraceable = 176,
     .co_code_adaptive = 192,
     .co_identity_word = 16,
     .co_identity_is_size = true,
     .str_length = 16,
     .str_state = 32,
     .str_ascii_data = 40,
     .str_compact_data = 56,
     .str_has_ready_bit = false,
     .bytes_size = 16,
     .bytes_data = 32},
    // 3.13: no cframe; f_executable may hold None for entry frames.
    {.minor = 13,
     .ts_frame = 72,
     .cframe_current_frame = kAbsent,
     .fr_code = 0,
     .fr_previous = 8,
     .fr_position = 56,
     .fr_owner = 70,
     .co_firstlineno = 68,
     .co_filename = 112,
     .co_name = 120,
     .co_qualname = 128,
     .co_linetable = 136,
     .co_firsttraceable = 184,
     .co_code_adaptive = 200,
     .co_identity_word = 16,
     .co_identity_is_size = true,
     .str_length = 16,
     .str_state = 32,
     .str_ascii_data = 40,
     .str_compact_data = 56,
     .str_has_ready_bit = false,
     .bytes_size = 16,
     .bytes_data = 32},
};

// Mirror of the parts of 3.13's _Py_DebugOffsets (internal/pycore_runtime.h)
// that we use. Every member is a uint64_t, so the mirror has no padding and
// its layout is the interpreter's.
struct DebugOffsets313 {
  char cookie[8];
  uint64_t version;
  uint64_t free_threaded;
  struct {
    uint64_t size, finalizing, interpreters_head;
  } runtime_state;
  struct {
    uint64_t size, id, next, threads_head, gc, imports_modules, sysdict, builtins, ceval_gil,
        gil_runtime_state, gil_runtime_state_enabled, gil_runtime_state_locked,
        gil_runtime_state_holder;
  } interpreter_state;
  struct {
    uint64_t size, prev, next, interp, current_frame, thread_id, native_thread_id, datastack_chunk,
        status;
  } thread_state;
  struct {
    uint64_t size, previous, executable, instr_ptr, localsplus, owner;
  } interpreter_frame;
  struct {
    uint64_t size, filename, name, qualname, linetable, firstlineno, argcount, localsplusnames,
        localspluskinds, co_code_adaptive;
  } code_object;
  struct {
    uint64_t size, ob_type;
  } pyobject;
  struct {
    uint64_t size, tp_name, tp_repr, tp_flags;
  } type_object;
  struct {
    uint64_t size, ob_item, ob_size;
  } tuple_object;
  struct {
    uint64_t size, ob_item, ob_size;
  } list_object;
  struct {
    uint64_t size, ma_keys, ma_values;
  } dict_object;
  struct {
    uint64_t size, ob_fval;
  } float_object;
  struct {
    uint64_t size, lv_tag, ob_digit;
  } long_object;
  struct {
    uint64_t size, ob_size, ob_sval;
  } bytes_object;
  struct {
    uint64_t size, state, length, asciiobject_size;
  } unicode_object;
};
static_assert(offsetof(DebugOffsets313, thread_state) == 152);
static_assert(offsetof(DebugOffsets313, code_object) == 272);
static_assert(offsetof(DebugOffsets313, unicode_object) == 536);

}  // namespace

const Layout *layout_for_version(uint32_t version_hex) {
  if ((version_hex >> 24) != 3) return nullptr;
  int minor = static_cast<int>((version_hex >> 16) & 0xff);
  for (const Layout &l : kLayouts)
    if (l.minor == minor) return &l;
  return nullptr;
}

bool validate_debug_offsets(uintptr_t py_runtime, uint32_t version_hex, const Layout &l,
                            std::string &why) {
  if (!plausible(py_runtime)) {
    why = "_PyRuntime not found";
    return false;
  }
  DebugOffsets313 d;
  std::memcpy(&d, reinterpret_cast<const void *>(py_runtime), sizeof d);
  if (std::memcmp(d.cookie, "xdebugpy", 8) != 0) {
    why = "_Py_DebugOffsets cookie missing";
    return false;
  }
  // Major.minor must agree; the micro version may differ from Py_Version only
  // if something is very wrong, so compare the whole hex.
  if (d.version != version_hex) {
    why = "_Py_DebugOffsets version differs from Py_Version";
    return false;
  }
  if (d.free_threaded) {
    why = "free-threaded build";
    return false;
  }
  struct Check {
    uint64_t theirs;
    int64_t ours;
    const char *name;
  } checks[] = {
      {d.thread_state.current_frame, l.ts_frame, "thread_state.current_frame"},
      {d.interpreter_frame.previous, l.fr_previous, "interpreter_frame.previous"},
      {d.interpreter_frame.executable, l.fr_code, "interpreter_frame.executable"},
      {d.interpreter_frame.instr_ptr, l.fr_position, "interpreter_frame.instr_ptr"},
      {d.interpreter_frame.owner, l.fr_owner, "interpreter_frame.owner"},
      {d.code_object.filename, l.co_filename, "code_object.filename"},
      {d.code_object.name, l.co_name, "code_object.name"},
      {d.code_object.qualname, l.co_qualname, "code_object.qualname"},
      {d.code_object.linetable, l.co_linetable, "code_object.linetable"},
      {d.code_object.firstlineno, l.co_firstlineno, "code_object.firstlineno"},
      {d.code_object.co_code_adaptive, l.co_code_adaptive, "code_object.co_code_adaptive"},
      {d.pyobject.ob_type, 8, "pyobject.ob_type"},
      {d.bytes_object.ob_size, l.bytes_size, "bytes_object.ob_size"},
      {d.bytes_object.ob_sval, l.bytes_data, "bytes_object.ob_sval"},
      {d.unicode_object.length, l.str_length, "unicode_object.length"},
      {d.unicode_object.state, l.str_state, "unicode_object.state"},
      {d.unicode_object.asciiobject_size, l.str_ascii_data, "unicode_object.asciiobject_size"},
  };
  // A table row claiming a cframe hop cannot be checked against 3.13's flat
  // thread state: treat it as a mismatch too.
  if (l.cframe_current_frame != kAbsent) {
    why = "layout has a cframe indirection";
    return false;
  }
  for (const Check &c : checks) {
    if (c.ours < 0 || c.theirs != static_cast<uint64_t>(c.ours)) {
      why = std::string("offset mismatch: ") + c.name;
      return false;
    }
  }
  return true;
}

}  // namespace torchseal::py
