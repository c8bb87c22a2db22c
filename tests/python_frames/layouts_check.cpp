// resolve_layout() on synthetic _Py_DebugOffsets: the shapes a real
// interpreter cannot show here. A minor newer than the newest known one is
// read when its debug offsets agree with the reader's facts and refused,
// naming the field, when they do not; a free-threaded build is told by its
// free_threaded flag and read with that build's facts. Values are 3.15.2's
// (Include/internal/pycore_debug_offsets.h, x86-64), with and without
// Py_GIL_DISABLED.
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
  // The same struct from a free-threaded build: 32-byte object headers,
  // thread-local bytecode.
  Fake &free_threaded() {
    put(16, 1);
    put(352, 78), put(368, 72);              // interpreter_frame.owner, .tlbc_index
    put(376, 240);                           // code_object.size
    put(384, 128), put(392, 136), put(400, 144), put(408, 152);  // filename .. linetable
    put(416, 84), put(448, 232), put(456, 224);  // firstlineno, co_code_adaptive, co_tlbc
    put(464, 32), put(472, 24);              // pyobject.size, .ob_type
    put(560, 32);                            // tuple_object.ob_size
    put(688, 56), put(696, 32), put(704, 48);  // bytes_object.size, .ob_size, .ob_sval
    put(712, 72), put(720, 48), put(728, 32);  // unicode_object.size, .state, .length
    put(736, 56), put(744, 72);              // .asciiobject_size, .compactunicodeobject_size
    return *this;
  }
};

constexpr uint32_t kV315 = 0x030f02f0, kV316 = 0x031000f0, kV313 = 0x030d00f0;

// 3.13t's _Py_DebugOffsets (the 3.13.0 headers with Py_GIL_DISABLED): 3.13's
// shape, no thread-local bytecode.
struct Fake313t : Fake {
  Fake313t() : Fake(kV313) {
    std::memset(bytes + 16, 0, sizeof bytes - 16);
    put(16, 1);
    put(152, 320), put(184, 72);             // thread_state.size, .current_frame
    put(224, 80), put(232, 8), put(240, 0), put(248, 56), put(264, 70);  // interpreter_frame
    put(272, 232);                           // code_object.size
    put(280, 128), put(288, 136), put(296, 144), put(304, 152);  // filename .. linetable
    put(312, 84), put(344, 216);             // firstlineno, co_code_adaptive
    put(352, 32), put(360, 24);              // pyobject.size, .ob_type
    put(416, 32);                            // tuple_object.ob_size
    put(512, 56), put(520, 32), put(528, 48);  // bytes_object.size, .ob_size, .ob_sval
    put(536, 72), put(544, 48), put(552, 32), put(560, 56);  // unicode_object
  }
};

// resolve_layout must refuse `f`, naming why.
void expect_refused(const Fake &f, uint32_t version_hex, const std::string &want,
                    const std::string &what) {
  std::string why;
  const Layout *l = resolve_layout(version_hex, f.addr(), why);
  expect(!l && why == want, what + ": " + why);
}

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

  Fake ft(kV315);
  ft.free_threaded();
  l = resolve_layout(kV315, ft.addr(), why);
  expect(l && l->free_threaded && l->ob_type == 24 && l->fr_owner == 78 &&
             l->fr_tlbc_index == 72 && l->co_tlbc == 224 && l->co_firsttraceable == 208 &&
             l->co_identity_word == 32 && l->str_kind_shift == 8 && l->str_compact_data == 72 &&
             l->fr_code_tag_bits == 3,
         "3.15t from its debug offsets plus free-threaded facts" + (l ? "" : " (" + why + ")"));
  l = resolve_layout(kV315, f315.addr(), why);
  expect(l && !l->free_threaded && l->fr_tlbc_index == -1 && l->co_tlbc == -1 &&
             l->str_kind_shift == 2,
         "the GIL build of the same minor reads no thread-local bytecode");

  Fake313t ft313;
  l = resolve_layout(kV313, ft313.addr(), why);
  expect(l && l->free_threaded && l->ob_type == 24 && l->co_firsttraceable == 200 &&
             l->fr_owner == 70 && l->fr_owner_last == 3 && l->fr_code_tag_bits == 0 &&
             l->fr_tlbc_index == -1 && l->str_kind_shift == 2 && l->str_ascii_data == 56 &&
             l->str_compact_data == 72,
         "3.13t from its debug offsets plus facts, not 3.13's table" + (l ? "" : " (" + why + ")"));

  Fake ft316(kV316);
  ft316.free_threaded();
  l = resolve_layout(kV316, ft316.addr(), why);
  expect(l && l->free_threaded && l->co_code_adaptive == 232 && l->fr_tlbc_index == 72,
         "a newer free-threaded minor that agrees is read with free-threaded facts" +
             (l ? "" : " (" + why + ")"));

  // Debug offsets the reader must refuse, naming why.
  const struct {
    const char *what;
    uint32_t version_hex;  // Py_Version, which the fake must match
    bool newer;            // the fake is kV316's
    void (*change)(Fake &);
    const char *why;
  } refused[] = {
      {"a newer minor that moved co_code_adaptive", kV316, true,
       [](Fake &f) { f.put(448, 216); }, "offset mismatch: code_object.co_code_adaptive"},
      {"a field outside its struct", kV316, true, [](Fake &f) { f.put(384, 4000); },
       "offset out of range: code_object.filename"},
      {"a free-threaded build without co_tlbc", kV315, false,
       [](Fake &f) { f.free_threaded().put(456, 0); }, "offset missing: code_object.co_tlbc"},
      {"a build flagged free-threaded with GIL offsets", kV315, false, [](Fake &f) { f.put(16, 1); },
       "offset mismatch: code_object.co_code_adaptive"},
      {"a version mismatch", 0x030f03f0, false, [](Fake &) {},
       "_Py_DebugOffsets version differs from Py_Version"},
      {"no cookie", kV315, false, [](Fake &f) { f.bytes[0] = 'y'; }, "_Py_DebugOffsets not found"},
  };
  for (const auto &r : refused) {
    Fake f(r.newer ? kV316 : kV315);
    r.change(f);
    expect_refused(f, r.version_hex, r.why, std::string(r.what) + " is refused");
  }
  return failures ? 1 : 0;
}
