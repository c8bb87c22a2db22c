// resolve_layout() on synthetic _Py_DebugOffsets: the shapes a real
// interpreter cannot show here. A minor newer than the newest known one is
// read when its debug offsets agree with the reader's facts and refused,
// naming the field, when they do not; free-threaded builds are refused.
// Values are 3.15.2's (Include/internal/pycore_debug_offsets.h, x86-64).
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "shim/core/python/cpython_layouts.h"

namespace {

using torchseal::py::Layout;
using torchseal::py::resolve_layout;

int failures = 0;

void expect(bool ok, const std::string &what) {
  std::printf("%s: %s\n", ok ? "ok" : "FAIL", what.c_str());
  if (!ok) ++failures;
}

// A 3.15 _Py_DebugOffsets, by byte offset of each field in that minor's struct.
struct Fake {
  alignas(8) unsigned char bytes[1024] = {};
  void put(size_t off, uint64_t v) { std::memcpy(bytes + off, &v, 8); }
  Fake(uint32_t version_hex) {
    std::memcpy(bytes, "xdebugpy", 8);
    put(8, version_hex);
    put(176, 320);                           // thread_state.size
    put(208, 88);                            // thread_state.current_frame
    put(312, 80);                            // interpreter_frame.size
    put(320, 8);                             // .previous
    put(328, 0);                             // .executable
    put(336, 56);                            // .instr_ptr
    put(352, 74);                            // .owner
    put(376, 216);                           // code_object.size
    put(384, 112);                           // .filename
    put(392, 120);                           // .name
    put(400, 128);                           // .qualname
    put(408, 136);                           // .linetable
    put(416, 68);                            // .firstlineno
    put(448, 208);                           // .co_code_adaptive
    put(464, 16), put(472, 8);               // pyobject.size, .ob_type
    put(560, 16);                            // tuple_object.ob_size
    put(688, 40), put(696, 16), put(704, 32);  // bytes_object.size, .ob_size, .ob_sval
    put(712, 56), put(720, 32), put(728, 16);  // unicode_object.size, .state, .length
    put(736, 40), put(744, 56);              // .asciiobject_size, .compactunicodeobject_size
  }
  uintptr_t addr() const { return reinterpret_cast<uintptr_t>(bytes); }
};

constexpr uint32_t kV315 = 0x030f02f0, kV316 = 0x031000f0;

}  // namespace

int main() {
  std::string why;
  Fake f315(kV315);
  const Layout *l = resolve_layout(kV315, f315.addr(), why);
  expect(l && l->fr_owner == 74 && l->fr_owner_last == 3 && l->fr_code_tag_bits == 3 &&
             l->co_firsttraceable == 192 && l->str_compact_data == 56,
         "3.15 from its debug offsets plus facts" + (l ? "" : " (" + why + ")"));

  Fake f316(kV316);
  l = resolve_layout(kV316, f316.addr(), why);
  expect(l && l->minor == 16 && l->co_code_adaptive == 208,
         "a newer minor that agrees is read" + (l ? "" : " (" + why + ")"));

  Fake moved(kV316);
  moved.put(448, 216);
  l = resolve_layout(kV316, moved.addr(), why);
  expect(!l && why == "offset mismatch: code_object.co_code_adaptive",
         "a newer minor that moved co_code_adaptive is refused: " + why);

  Fake wild(kV316);
  wild.put(384, 4000);
  l = resolve_layout(kV316, wild.addr(), why);
  expect(!l && why == "offset out of range: code_object.filename",
         "a field outside its struct is refused: " + why);

  Fake ft(kV315);
  ft.put(16, 1);
  l = resolve_layout(kV315, ft.addr(), why);
  expect(!l && why == "free-threaded build", "a free-threaded build is refused: " + why);

  Fake other(kV315);
  l = resolve_layout(0x030f03f0, other.addr(), why);
  expect(!l && why == "_Py_DebugOffsets version differs from Py_Version",
         "a version mismatch is refused: " + why);

  Fake nocookie(kV315);
  nocookie.bytes[0] = 'y';
  l = resolve_layout(kV315, nocookie.addr(), why);
  expect(!l && why == "_Py_DebugOffsets not found", "no cookie, no layout: " + why);
  return failures ? 1 : 0;
}
