#include "shim/core/python/code_reader.h"

#include <algorithm>
#include <cstring>

namespace torchseal::py {
namespace {

// Sanity caps on sizes read from objects: a torn or garbage read must not
// send a loop across the address space.
constexpr int64_t kMaxStringChars = int64_t{1} << 24;
constexpr int64_t kMaxTableBytes = int64_t{1} << 26;

void put_utf8(uint32_t cp, std::string &out) {
  if ((cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff) cp = 0xfffd;
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xc0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xe0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else {
    out.push_back(static_cast<char>(0xf0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  }
}

// The bytes of a bytes object, or false.
bool bytes_view(const Interp &in, uintptr_t obj, const uint8_t *&data, size_t &len) {
  if (!plausible(obj) || rd_ptr(obj + in.layout->ob_type) != in.bytes_type) return false;
  int64_t n = rd<int64_t>(obj + in.layout->bytes_size);
  if (n < 0 || n > kMaxTableBytes) return false;
  data = reinterpret_cast<const uint8_t *>(obj + in.layout->bytes_data);
  len = static_cast<size_t>(n);
  return true;
}

// Location-table varints: 6-bit chunks, little-endian, 0x40 = more follows.
uint32_t read_varint(const uint8_t *&p, const uint8_t *end) {
  uint32_t val = 0;
  unsigned shift = 0;
  while (p < end) {
    uint8_t b = *p++;
    if (shift < 32) val |= static_cast<uint32_t>(b & 63) << shift;
    shift += 6;
    if (!(b & 64)) break;
  }
  return val;
}

int32_t read_signed_varint(const uint8_t *&p, const uint8_t *end) {
  uint32_t u = read_varint(p, end);
  return (u & 1) ? -static_cast<int32_t>(u >> 1) : static_cast<int32_t>(u >> 1);
}

}  // namespace

// 3.10 (PEP 626): (uint8 byte delta, int8 line delta) pairs; -128 = no line.
int line_from_pep626_table(const uint8_t *t, size_t len, int firstlineno, int64_t offset) {
  if (offset < 0) return firstlineno;
  int64_t end = 0;
  int line = firstlineno;
  for (size_t i = 0; i + 1 < len; i += 2) {
    int64_t start = end;
    end += t[i];
    int8_t ldelta;
    std::memcpy(&ldelta, &t[i + 1], 1);
    int cur = -1;
    if (ldelta != -128) {
      line += ldelta;
      cur = line;
    }
    if (start <= offset && offset < end) return cur;
  }
  return -1;
}

// 3.11+ location table (Objects/locations.md): each entry starts with a byte
// with bit 7 set; code = (b >> 3) & 15 says how the line changes, and the
// entry covers (b & 7) + 1 code units of 2 bytes.
int line_from_location_table(const uint8_t *t, size_t len, int firstlineno, int64_t offset) {
  if (offset < 0) return firstlineno;
  const uint8_t *p = t, *end = t + len;
  int64_t addr = 0;
  int line = firstlineno;
  while (p < end) {
    uint8_t b = *p++;
    if (!(b & 0x80)) return -1;  // not at an entry start: corrupt
    int code = (b >> 3) & 15;
    int64_t next = addr + 2 * ((b & 7) + 1);
    int delta = 0;
    if (code == 13 || code == 14) {
      const uint8_t *q = p;
      delta = read_signed_varint(q, end);
    } else if (code >= 10 && code <= 12) {
      delta = code - 10;
    }
    line += delta;
    if (addr <= offset && offset < next) return code == 15 ? -1 : line;
    addr = next;
    while (p < end && !(*p & 0x80)) ++p;  // skip the entry's column data
  }
  return -1;
}

namespace {

template <typename Read>
bool copy_unicode_with(const Interp &in, uintptr_t obj, size_t cap, std::string &out, Read &read) {
  out.clear();
  const Layout &l = *in.layout;
  if (!plausible(obj) || read.ptr(obj + l.ob_type) != in.unicode_type) return false;
  int64_t n = read.template get<int64_t>(obj + l.str_length);
  if (n < 0 || n > kMaxStringChars) return false;
  // Only the named bits: those above `ascii`/`ready` are padding and were
  // seen holding garbage, and `interned` below them may be rewritten by
  // another thread meanwhile (free-threaded builds intern without a lock).
  uint32_t state = read.template get<uint32_t>(obj + l.str_state) >> l.str_kind_shift;
  unsigned kind = state & 7;
  bool compact = (state >> 3) & 1, ascii = (state >> 4) & 1;
  if (l.str_has_ready_bit && !((state >> 5) & 1)) return false;
  if (kind != 1 && kind != 2 && kind != 4) return false;
  uintptr_t data = compact ? obj + (ascii ? l.str_ascii_data : l.str_compact_data)
                           : read.ptr(obj + l.str_compact_data);
  if (!data) return false;
  out.reserve(std::min<size_t>(static_cast<size_t>(n), cap));
  for (int64_t i = 0; i < n; ++i) {
    uint32_t cp = kind == 1   ? read.template get<uint8_t>(data + i)
                  : kind == 2 ? read.template get<uint16_t>(data + 2 * i)
                              : read.template get<uint32_t>(data + 4 * i);
    if (out.size() + 4 > cap) {
      // Truncate at a character boundary, leaving room for none of a partial one.
      size_t need = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
      if (out.size() + need > cap) break;
    }
    if (read.failed()) return false;
    put_utf8(cp, out);
  }
  return !read.failed();
}

}  // namespace

bool copy_unicode(const Interp &in, uintptr_t obj, size_t cap, std::string &out) {
  DirectRead read;
  return copy_unicode_with(in, obj, cap, out, read);
}

bool copy_unicode_guarded(const Interp &in, uintptr_t obj, size_t cap, std::string &out) {
  GuardedRead read;
  return copy_unicode_with(in, obj, cap, out, read);
}

bool decode_location(const Interp &in, uintptr_t code, int64_t offset, DecodedLocation &out) {
  const Layout &l = *in.layout;
  if (!plausible(code) || rd_ptr(code + in.layout->ob_type) != in.code_type) return false;
  uintptr_t name =
      rd_ptr(code + (l.co_qualname != kAbsent ? static_cast<uint32_t>(l.co_qualname) : l.co_name));
  if (!copy_unicode(in, name, kMaxNameBytes, out.function)) out.function = "<unknown>";
  if (!copy_unicode(in, rd_ptr(code + l.co_filename), kMaxFileBytes, out.file))
    out.file = "<unknown>";
  int first = rd<int32_t>(code + l.co_firstlineno);
  const uint8_t *table;
  size_t len;
  int line = -1;
  if (offset != kOffsetUnknown && bytes_view(in, rd_ptr(code + l.co_linetable), table, len)) {
    line = l.minor == 10 ? line_from_pep626_table(table, len, first, offset)
                         : line_from_location_table(table, len, first, offset);
  }
  out.line = line < 0 ? 0 : line;
  return true;
}

}  // namespace torchseal::py
