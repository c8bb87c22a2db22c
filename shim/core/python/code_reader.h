// Reading one live code object without the GIL: its identity fingerprint
// (hot path), and on a cache miss its function name, file name and the line
// of a byte offset (line tables decoded here; PyCode_Addr2Line is not safe
// without the GIL on 3.11, so no version uses it).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <string>

#include "shim/core/python/python_runtime.h"
#include "shim/core/python/raw_read.h"
#include "shim/core/shard_lock.h"  // mix64

namespace torchseal::py {

// Strings longer than this are truncated (at a character boundary).
constexpr size_t kMaxNameBytes = 512;
constexpr size_t kMaxFileBytes = 4096;

// Identity of a code object beyond its address, which is reused after the
// object dies: the pointers to its name, qualname, filename and line table,
// its first line and its size. Read while the frame is on the stack (so the
// object is alive) and folded into one hash.
// Hot path (every frame of every event): plain xor/rotate/multiply-add, no
// full mixing; callers mix once per frame when they hash.
// `read`: DirectRead or GuardedRead (raw_read.h).
template <typename Read = DirectRead>
inline uint64_t code_fingerprint(const Layout &l, uintptr_t code, Read &&read = Read{}) {
  uint64_t h = code;
  h ^= std::rotl(static_cast<uint64_t>(read.ptr(code + l.co_filename)), 13);
  h ^= std::rotl(static_cast<uint64_t>(read.ptr(code + l.co_name)), 29);
  if (l.co_qualname != kAbsent)
    h ^=
        std::rotl(static_cast<uint64_t>(read.ptr(code + static_cast<uint32_t>(l.co_qualname))), 37);
  h ^= std::rotl(static_cast<uint64_t>(read.ptr(code + l.co_linetable)), 51);
  h += static_cast<uint64_t>(
           static_cast<uint32_t>(read.template get<int32_t>(code + l.co_firstlineno))) *
       0x9e3779b97f4a7c15ULL;
  h += read.template get<uint64_t>(code + l.co_identity_word) * 0xc2b2ae3d27d4eb4fULL;
  return h;
}

struct DecodedLocation {
  std::string function;  // co_qualname (3.11+) or co_name (3.10)
  std::string file;
  int line = 0;  // 0 when the offset has no line
};

// A frame whose bytecode copy could not be found (free-threaded builds
// where process_vm_readv is refused): reported without a line, never with a
// wrong one.
constexpr int64_t kOffsetUnknown = -2;

// `offset` is the byte offset of the current instruction in the bytecode,
// -1 for a frame that has not started (reported at co_firstlineno, as
// CPython does), or kOffsetUnknown. False if the object does not look like a
// code object.
bool decode_location(const Interp &in, uintptr_t code, int64_t offset, DecodedLocation &out);

// The line decoders, on a copy-free view of the table bytes. -1 = no line.
int line_from_pep626_table(const uint8_t *table, size_t len, int firstlineno, int64_t offset);
int line_from_location_table(const uint8_t *table, size_t len, int firstlineno, int64_t offset);

// UTF-8 of a str object, truncated to `cap` bytes; lone surrogates become
// U+FFFD. False if `obj` is not a ready exact str.
bool copy_unicode(const Interp &in, uintptr_t obj, size_t cap, std::string &out);
// The same for a str another thread may free meanwhile: every read guarded
// (about 1 us a character: only for results that are cached).
bool copy_unicode_guarded(const Interp &in, uintptr_t obj, size_t cap, std::string &out);

}  // namespace torchseal::py
