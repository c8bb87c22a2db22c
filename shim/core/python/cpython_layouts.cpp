#include "shim/core/python/cpython_layouts.h"

#include <cstddef>
#include <cstring>
#include <iterator>

#include "shim/core/python/raw_read.h"

namespace torchseal::py {
namespace {

// Values checked against the 3.10.13, 3.11.7, 3.12.1 and 3.13.0 headers.
// Within a minor version the layout of these fields is ABI-frozen in practice
// (3.11.7's table reads Debian's 3.11.2 correctly), so one row per minor.
constexpr Layout kLayouts[] = {
    // 3.10: tstate->frame is a PyFrameObject*; f_lasti counts code units.
    {.minor = 10,
     .free_threaded = false,
     .ob_type = 8,
     .ts_frame = 24,
     .cframe_current_frame = kAbsent,
     .fr_code = 32,
     .fr_previous = 24,
     .fr_position = 96,
     .fr_owner = kAbsent,
     .fr_owner_last = kOwnedByEntry,
     .fr_code_tag_bits = 0,
     .fr_tlbc_index = kAbsent,
     .co_tlbc = kAbsent,
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
     .str_kind_shift = 2,
     .bytes_size = 16,
     .bytes_data = 32},
    // 3.11: tstate->cframe->current_frame; prev_instr is the last executed unit.
    {.minor = 11,
     .free_threaded = false,
     .ob_type = 8,
     .ts_frame = 56,
     .cframe_current_frame = 8,
     .fr_code = 32,
     .fr_previous = 48,
     .fr_position = 56,
     .fr_owner = 69,
     .fr_owner_last = kOwnedByEntry,
     .fr_code_tag_bits = 0,
     .fr_tlbc_index = kAbsent,
     .co_tlbc = kAbsent,
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
     .str_kind_shift = 2,
     .bytes_size = 16,
     .bytes_data = 32},
    // 3.12: cframe->current_frame moved to offset 0; no wstr in strings.
    {.minor = 12,
     .free_threaded = false,
     .ob_type = 8,
     .ts_frame = 56,
     .cframe_current_frame = 0,
     .fr_code = 0,
     .fr_previous = 8,
     .fr_position = 56,
     .fr_owner = 70,
     .fr_owner_last = kOwnedByEntry,
     .fr_code_tag_bits = 0,
     .fr_tlbc_index = kAbsent,
     .co_tlbc = kAbsent,
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
     .str_kind_shift = 2,
     .bytes_size = 16,
     .bytes_data = 32},
    // 3.13: no cframe; f_executable may hold None for entry frames.
    {.minor = 13,
     .free_threaded = false,
     .ob_type = 8,
     .ts_frame = 72,
     .cframe_current_frame = kAbsent,
     .fr_code = 0,
     .fr_previous = 8,
     .fr_position = 56,
     .fr_owner = 70,
     .fr_owner_last = kOwnedByEntry,
     .fr_code_tag_bits = 0,
     .fr_tlbc_index = kAbsent,
     .co_tlbc = kAbsent,
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
     .str_kind_shift = 2,
     .bytes_size = 16,
     .bytes_data = 32},
};

// Mirrors of _Py_DebugOffsets (internal/pycore_debug_offsets.h from 3.14,
// pycore_runtime.h in 3.13), whose shape changes every minor, up to the last
// section the reader uses. Every member is a uint64_t, so a mirror has no
// padding and its layout is the interpreter's. Each section starts with the
// size of the struct it describes; sections that kept their shape across
// minors are shared.
namespace dbg {
struct Head {
  char cookie[8];
  uint64_t version, free_threaded;
  uint64_t runtime_size, finalizing, interpreters_head;  // the runtime_state section
};
struct Interp313 {
  uint64_t size, id, next, threads_head, gc, imports_modules, sysdict, builtins, ceval_gil,
      gil_runtime_state, gil_runtime_state_enabled, gil_runtime_state_locked,
      gil_runtime_state_holder;
};
// 3.14: thread lists and the code and thread-local-bytecode generations.
struct Interp314 {
  uint64_t size, id, next, threads_head, threads_main, gc, imports_modules, sysdict, builtins,
      ceval_gil, gil_runtime_state, gil_runtime_state_enabled, gil_runtime_state_locked,
      gil_runtime_state_holder, code_object_generation, tlbc_generation;
};
struct Thread313 {
  uint64_t size, prev, next, interp, current_frame, thread_id, native_thread_id, datastack_chunk,
      status;
};
struct Thread315 {
  uint64_t size, prev, next, interp, current_frame, base_frame, last_profiled_frame,
      last_profiled_frame_seq, thread_id, native_thread_id, datastack_chunk, status, holds_gil,
      gil_requested, current_exception, exc_state;
};
struct Frame313 {
  uint64_t size, previous, executable, instr_ptr, localsplus, owner;
};
struct Frame314 {
  uint64_t size, previous, executable, instr_ptr, localsplus, owner, stackpointer, tlbc_index;
};
struct Code313 {
  uint64_t size, filename, name, qualname, linetable, firstlineno, argcount, localsplusnames,
      localspluskinds, co_code_adaptive;
};
struct Code314 : Code313 {
  uint64_t co_tlbc;
};
struct Object {
  uint64_t size, ob_type;
};
struct Type313 {
  uint64_t size, tp_name, tp_repr, tp_flags;
};
struct Type315 : Type313 {
  uint64_t tp_basicsize, tp_dictoffset;
};
struct Three {  // tuple, list, dict, long and bytes: size and two fields
  uint64_t size, first, second;
};
struct Two {  // float, heap type: size and one field
  uint64_t size, first;
};
struct Set {
  uint64_t size, used, table, mask;
};
struct Objects313 {
  Three tuple_object, list_object, dict_object;
  Two float_object;
  Three long_object, bytes_object;
};
struct Objects314 {
  Three tuple_object, list_object;
  Set set_object;
  Three dict_object;
  Two float_object;
  Three long_object, bytes_object;
};
struct Unicode313 {
  uint64_t size, state, length, asciiobject_size;
};
struct Unicode315 : Unicode313 {
  uint64_t compactunicodeobject_size;
};
}  // namespace dbg

struct DebugOffsets313 {
  dbg::Head head;
  dbg::Interp313 interpreter_state;
  dbg::Thread313 thread_state;
  dbg::Frame313 interpreter_frame;
  dbg::Code313 code_object;
  dbg::Object pyobject;
  dbg::Type313 type_object;
  dbg::Objects313 objects;
  dbg::Unicode313 unicode_object;
};
static_assert(offsetof(DebugOffsets313, thread_state) == 152);
static_assert(offsetof(DebugOffsets313, code_object) == 272);
static_assert(offsetof(DebugOffsets313, unicode_object) == 536);
static_assert(sizeof(DebugOffsets313) == 568);  // 584 with the gc section

// 3.14: the stack pointer, thread-local bytecode (tlbc_index, co_tlbc), sets.
struct DebugOffsets314 {
  dbg::Head head;
  dbg::Interp314 interpreter_state;
  dbg::Thread313 thread_state;
  dbg::Frame314 interpreter_frame;
  dbg::Code314 code_object;
  dbg::Object pyobject;
  dbg::Type313 type_object;
  dbg::Objects314 objects;
  dbg::Unicode313 unicode_object;
};
static_assert(offsetof(DebugOffsets314, thread_state) == 176);
static_assert(offsetof(DebugOffsets314, interpreter_frame) == 248);
static_assert(offsetof(DebugOffsets314, code_object) == 312);
static_assert(sizeof(DebugOffsets314) == 648);  // 760 with the sections after unicode

// 3.15: more thread-state fields, the exception state, two type-object
// fields, heap types, and compactunicodeobject_size.
struct DebugOffsets315 {
  dbg::Head head;
  dbg::Interp314 interpreter_state;
  dbg::Thread315 thread_state;
  uint64_t err_stackitem_exc_value;
  dbg::Frame314 interpreter_frame;
  dbg::Code314 code_object;
  dbg::Object pyobject;
  dbg::Type315 type_object;
  dbg::Two heap_type_object;
  dbg::Objects314 objects;
  dbg::Unicode315 unicode_object;
};
static_assert(offsetof(DebugOffsets315, thread_state) == 176);
static_assert(offsetof(DebugOffsets315, interpreter_frame) == 312);
static_assert(offsetof(DebugOffsets315, code_object) == 376);
static_assert(sizeof(DebugOffsets315) == 752);  // 888 with the sections after unicode

// The fields the reader uses, whatever the minor's mirror.
struct DebugView {
  uint64_t version, free_threaded;
  uint64_t ts_size, current_frame;
  uint64_t frame_size, previous, executable, instr_ptr, owner;
  uint64_t tlbc_index;  // 0 before 3.14 and in GIL builds
  uint64_t code_size, filename, name, qualname, linetable, firstlineno, co_code_adaptive;
  uint64_t co_tlbc;  // 0 before 3.14 and in GIL builds
  uint64_t object_size, ob_type;
  uint64_t var_ob_size;  // where every PyVarObject keeps ob_size (the tuple's)
  uint64_t bytes_size, bytes_ob_size, bytes_sval;
  uint64_t str_size, str_state, str_length, str_ascii_size;
  uint64_t str_compact_size;  // 0 before 3.15
};

template <typename M>
DebugView view_of(uintptr_t py_runtime) {
  M d;
  std::memcpy(&d, reinterpret_cast<const void *>(py_runtime), sizeof d);
  DebugView v{};
  v.version = d.head.version;
  v.free_threaded = d.head.free_threaded;
  v.ts_size = d.thread_state.size;
  v.current_frame = d.thread_state.current_frame;
  v.frame_size = d.interpreter_frame.size;
  v.previous = d.interpreter_frame.previous;
  v.executable = d.interpreter_frame.executable;
  v.instr_ptr = d.interpreter_frame.instr_ptr;
  v.owner = d.interpreter_frame.owner;
  if constexpr (requires { d.interpreter_frame.tlbc_index; })
    v.tlbc_index = d.interpreter_frame.tlbc_index;
  v.code_size = d.code_object.size;
  v.filename = d.code_object.filename;
  v.name = d.code_object.name;
  v.qualname = d.code_object.qualname;
  v.linetable = d.code_object.linetable;
  v.firstlineno = d.code_object.firstlineno;
  v.co_code_adaptive = d.code_object.co_code_adaptive;
  if constexpr (requires { d.code_object.co_tlbc; }) v.co_tlbc = d.code_object.co_tlbc;
  v.object_size = d.pyobject.size;
  v.ob_type = d.pyobject.ob_type;
  v.var_ob_size = d.objects.tuple_object.second;  // ob_item, ob_size
  v.bytes_size = d.objects.bytes_object.size;
  v.bytes_ob_size = d.objects.bytes_object.first;  // ob_size, ob_sval
  v.bytes_sval = d.objects.bytes_object.second;
  v.str_size = d.unicode_object.size;
  v.str_state = d.unicode_object.state;
  v.str_length = d.unicode_object.length;
  v.str_ascii_size = d.unicode_object.asciiobject_size;
  if constexpr (requires { d.unicode_object.compactunicodeobject_size; })
    v.str_compact_size = d.unicode_object.compactunicodeobject_size;
  return v;
}

// What _Py_DebugOffsets does not carry, per minor and build (3.14+, and the
// free-threaded builds from 3.13t), from that version's headers compiled with
// and without Py_GIL_DISABLED (3.13.0, 3.14.7, 3.15.2).
struct MinorFacts {
  int minor;
  bool free_threaded;
  DebugView (*view)(uintptr_t py_runtime);
  // _co_firsttraceable (cpython/code.h) is not published. It sits just before
  // co_code_adaptive, so it holds only where co_code_adaptive is where it was
  // measured: that offset is the fact's anchor.
  uint32_t co_code_adaptive;
  uint32_t co_firsttraceable;
  uint8_t owner_last;     // FRAME_OWNED_BY_CSTACK = 4 (3.14); 3.15 ends at INTERPRETER = 3
  uint8_t tag_bits;       // Py_TAG_BITS (internal/pycore_stackref.h)
  uint32_t ascii_size;    // anchor of compact_size below
  uint32_t compact_size;  // sizeof(PyCompactUnicodeObject); 0 = published (3.15+)
  // The state bits (cpython/unicodeobject.h): interned, then kind (3 bits),
  // compact, ascii. `interned` is 2 bits, but a whole byte in free-threaded
  // 3.14+ (raw state of a compact ASCII string 0x1900, not 0x64).
  uint8_t str_kind_shift;
  // Free-threaded 3.14+ runs per-thread bytecode copies: co_tlbc and
  // tlbc_index must be published (nonzero).
  bool tlbc;
};

// Free-threaded builds: a 32-byte object header (every object offset 16
// further on) and, from 3.14, co_tlbc just before co_code_adaptive. Their
// Py_TAG_BITS is 1 on 3.14t (deferred references), 3 on 3.15t.
constexpr MinorFacts kFacts[] = {
    {.minor = 13,
     .free_threaded = true,
     .view = view_of<DebugOffsets313>,
     .co_code_adaptive = 216,
     .co_firsttraceable = 200,
     .owner_last = 3,
     .tag_bits = 0,
     .ascii_size = 56,
     .compact_size = 72,
     .str_kind_shift = 2,
     .tlbc = false},
    {.minor = 14,
     .free_threaded = false,
     .view = view_of<DebugOffsets314>,
     .co_code_adaptive = 208,
     .co_firsttraceable = 192,
     .owner_last = 4,
     .tag_bits = 3,
     .ascii_size = 40,
     .compact_size = 56,
     .str_kind_shift = 2,
     .tlbc = false},
    {.minor = 14,
     .free_threaded = true,
     .view = view_of<DebugOffsets314>,
     .co_code_adaptive = 232,
     .co_firsttraceable = 208,
     .owner_last = 4,
     .tag_bits = 1,
     .ascii_size = 56,
     .compact_size = 72,
     .str_kind_shift = 8,
     .tlbc = true},
    {.minor = 15,
     .free_threaded = false,
     .view = view_of<DebugOffsets315>,
     .co_code_adaptive = 208,
     .co_firsttraceable = 192,
     .owner_last = 3,
     .tag_bits = 3,
     .ascii_size = 40,
     .compact_size = 0,
     .str_kind_shift = 2,
     .tlbc = false},
    {.minor = 15,
     .free_threaded = true,
     .view = view_of<DebugOffsets315>,
     .co_code_adaptive = 232,
     .co_firsttraceable = 208,
     .owner_last = 3,
     .tag_bits = 3,
     .ascii_size = 56,
     .compact_size = 0,
     .str_kind_shift = 8,
     .tlbc = true},
};

bool check_version(const DebugView &d, uint32_t version_hex, std::string &why) {
  // The whole hex: Py_Version and the runtime's own copy come from one build.
  if (d.version == version_hex) return true;
  why = "_Py_DebugOffsets version differs from Py_Version";
  return false;
}

struct Named {
  uint64_t value;
  const char *name;
};

bool same(const Named &theirs, uint64_t ours, std::string &why) {
  if (theirs.value == ours) return true;
  why = std::string("offset mismatch: ") + theirs.name;
  return false;
}

// A field must lie inside the struct the same section describes: read
// through the wrong mirror, or from a build that moved it, it rarely does.
bool inside(const Named &field, uint64_t width, uint64_t struct_size, std::string &why) {
  if (field.value + width <= struct_size && struct_size < (uint64_t{1} << 20)) return true;
  why = std::string("offset out of range: ") + field.name;
  return false;
}

// Debug offsets plus facts -> a layout, or false naming the field that
// disagrees. Only 3.13's flat thread state (current_frame) is expected.
bool layout_from_view(const DebugView &d, const MinorFacts &f, int minor, Layout &l,
                      std::string &why) {
  const Named checks[] = {
      {d.current_frame, "thread_state.current_frame"},
      {d.previous, "interpreter_frame.previous"},
      {d.executable, "interpreter_frame.executable"},
      {d.instr_ptr, "interpreter_frame.instr_ptr"},
      {d.owner, "interpreter_frame.owner"},
      {d.filename, "code_object.filename"},
      {d.name, "code_object.name"},
      {d.qualname, "code_object.qualname"},
      {d.linetable, "code_object.linetable"},
      {d.firstlineno, "code_object.firstlineno"},
      {d.ob_type, "pyobject.ob_type"},
      {d.bytes_ob_size, "bytes_object.ob_size"},
      {d.str_state, "unicode_object.state"},
      {d.str_length, "unicode_object.length"},
  };
  const uint64_t sizes[] = {d.ts_size,     d.frame_size, d.frame_size, d.frame_size, d.frame_size,
                            d.code_size,   d.code_size,  d.code_size,  d.code_size,  d.code_size,
                            d.object_size, d.bytes_size, d.str_size,   d.str_size};
  const uint64_t widths[] = {8, 8, 8, 8, 1, 8, 8, 8, 8, 4, 8, 8, 4, 8};
  for (size_t i = 0; i < std::size(checks); ++i)
    if (!inside(checks[i], widths[i], sizes[i], why)) return false;
  if (!same({d.co_code_adaptive, "code_object.co_code_adaptive"}, f.co_code_adaptive, why))
    return false;
  if (f.compact_size &&
      !same({d.str_ascii_size, "unicode_object.asciiobject_size"}, f.ascii_size, why))
    return false;
  // Code objects are PyVarObjects: their size word is where the tuple's and
  // the bytes object's are.
  if (!inside({d.bytes_sval, "bytes_object.ob_sval"}, 1, d.bytes_size, why) ||
      !same({d.var_ob_size, "tuple_object.ob_size"}, d.bytes_ob_size, why))
    return false;
  // Offset 0 of a frame is f_executable and of a code object its header: a
  // zero here means the build has no thread-local bytecode.
  if (f.tlbc) {
    if (!d.co_tlbc || !d.tlbc_index) {
      why = !d.co_tlbc ? "offset missing: code_object.co_tlbc"
                       : "offset missing: interpreter_frame.tlbc_index";
      return false;
    }
    if (!inside({d.tlbc_index, "interpreter_frame.tlbc_index"}, 4, d.frame_size, why) ||
        !inside({d.co_tlbc, "code_object.co_tlbc"}, 8, d.code_size, why))
      return false;
  }

  l = Layout{};
  l.minor = minor;
  l.free_threaded = f.free_threaded;
  l.ob_type = static_cast<uint32_t>(d.ob_type);
  l.ts_frame = static_cast<uint32_t>(d.current_frame);
  l.cframe_current_frame = kAbsent;
  l.fr_code = static_cast<uint32_t>(d.executable);
  l.fr_previous = static_cast<uint32_t>(d.previous);
  l.fr_position = static_cast<uint32_t>(d.instr_ptr);
  l.fr_owner = static_cast<int32_t>(d.owner);
  l.fr_owner_last = f.owner_last;
  l.fr_code_tag_bits = f.tag_bits;
  l.fr_tlbc_index = f.tlbc ? static_cast<int32_t>(d.tlbc_index) : kAbsent;
  l.co_tlbc = f.tlbc ? static_cast<int32_t>(d.co_tlbc) : kAbsent;
  l.co_firstlineno = static_cast<uint32_t>(d.firstlineno);
  l.co_filename = static_cast<uint32_t>(d.filename);
  l.co_name = static_cast<uint32_t>(d.name);
  l.co_qualname = static_cast<int32_t>(d.qualname);
  l.co_linetable = static_cast<uint32_t>(d.linetable);
  l.co_firsttraceable = static_cast<int32_t>(f.co_firsttraceable);
  l.co_code_adaptive = static_cast<int32_t>(d.co_code_adaptive);
  l.co_identity_word = static_cast<uint32_t>(d.var_ob_size);
  l.co_identity_is_size = true;
  l.str_length = static_cast<uint32_t>(d.str_length);
  l.str_state = static_cast<uint32_t>(d.str_state);
  l.str_ascii_data = static_cast<uint32_t>(d.str_ascii_size);
  l.str_compact_data = static_cast<uint32_t>(f.compact_size ? f.compact_size : d.str_compact_size);
  l.str_has_ready_bit = false;
  l.str_kind_shift = f.str_kind_shift;
  l.bytes_size = static_cast<uint32_t>(d.bytes_ob_size);
  l.bytes_data = static_cast<uint32_t>(d.bytes_sval);
  return true;
}

// 3.13: the table row must equal what the interpreter publishes.
bool table_matches(const DebugView &d, const Layout &l, std::string &why) {
  const struct {
    Named theirs;
    int64_t ours;
  } checks[] = {
      {{d.current_frame, "thread_state.current_frame"}, l.ts_frame},
      {{d.previous, "interpreter_frame.previous"}, l.fr_previous},
      {{d.executable, "interpreter_frame.executable"}, l.fr_code},
      {{d.instr_ptr, "interpreter_frame.instr_ptr"}, l.fr_position},
      {{d.owner, "interpreter_frame.owner"}, l.fr_owner},
      {{d.filename, "code_object.filename"}, l.co_filename},
      {{d.name, "code_object.name"}, l.co_name},
      {{d.qualname, "code_object.qualname"}, l.co_qualname},
      {{d.linetable, "code_object.linetable"}, l.co_linetable},
      {{d.firstlineno, "code_object.firstlineno"}, l.co_firstlineno},
      {{d.co_code_adaptive, "code_object.co_code_adaptive"}, l.co_code_adaptive},
      {{d.ob_type, "pyobject.ob_type"}, l.ob_type},
      {{d.bytes_ob_size, "bytes_object.ob_size"}, l.bytes_size},
      {{d.bytes_sval, "bytes_object.ob_sval"}, l.bytes_data},
      {{d.str_length, "unicode_object.length"}, l.str_length},
      {{d.str_state, "unicode_object.state"}, l.str_state},
      {{d.str_ascii_size, "unicode_object.asciiobject_size"}, l.str_ascii_data},
  };
  for (const auto &c : checks)
    if (c.ours < 0 || !same(c.theirs, static_cast<uint64_t>(c.ours), why)) return false;
  return true;
}

}  // namespace

const Layout *resolve_layout(uint32_t version_hex, uintptr_t py_runtime, std::string &why) {
  int minor = static_cast<int>((version_hex >> 16) & 0xff);
  if ((version_hex >> 24) != 3 || minor < 10) {
    why = "version not supported";
    return nullptr;
  }
  const Layout *row = nullptr;
  for (const Layout &l : kLayouts)
    if (l.minor == minor) row = &l;
  if (row && minor < 13) return row;  // no _Py_DebugOffsets before 3.13

  if (!plausible(py_runtime) ||
      std::memcmp(reinterpret_cast<const void *>(py_runtime), "xdebugpy", 8) != 0) {
    why = "_Py_DebugOffsets not found";
    return nullptr;
  }
  // Every minor's mirror starts with the same head: the build's kind is
  // read before choosing one.
  dbg::Head head;
  std::memcpy(&head, reinterpret_cast<const void *>(py_runtime), sizeof head);
  const bool free_threaded = head.free_threaded != 0;
  if (row && !free_threaded) {
    DebugView d = view_of<DebugOffsets313>(py_runtime);
    return check_version(d, version_hex, why) && table_matches(d, *row, why) ? row : nullptr;
  }
  // A newer minor than the newest known one is read with the newest facts
  // and mirror of its kind; the checks in layout_from_view refuse it if they
  // disagree.
  const MinorFacts *facts = nullptr;
  for (const MinorFacts &f : kFacts)  // ordered by minor
    if (f.free_threaded == free_threaded && f.minor <= minor) facts = &f;
  if (!facts) {
    why = "version not supported";
    return nullptr;
  }
  DebugView d = facts->view(py_runtime);
  Layout l;
  if (!check_version(d, version_hex, why) || !layout_from_view(d, *facts, minor, l, why))
    return nullptr;
  // Never freed: the capture path on every thread reads it for the life of
  // the process. One per successful probe.
  return new Layout(l);
}

}  // namespace torchseal::py
