#include "report/render/pickle_writer.h"

#include <cstring>

namespace torchseal {
namespace {

// Opcode bytes (CPython Lib/pickle.py).
constexpr uint8_t kProto = 0x80, kStop = '.', kMark = '(', kEmptyDict = '}', kEmptyList = ']',
                  kAppends = 'e', kSetitems = 'u', kSetitem = 's', kNone = 'N', kNewTrue = 0x88,
                  kNewFalse = 0x89, kBinint = 'J', kBinint1 = 'K', kBinint2 = 'M', kLong1 = 0x8a,
                  kBinfloat = 'G', kShortBinunicode = 0x8c, kBinunicode = 'X', kBinput = 'q',
                  kLongBinput = 'r', kBinget = 'h', kLongBinget = 'j';

// Length of the valid UTF-8 sequence at s[i], or 0 if it is not one.
size_t utf8_seq_len(std::string_view s, size_t i) {
  auto at = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  uint8_t c = at(i);
  if (c < 0x80) return 1;
  size_t n;
  uint32_t min, cp;
  if ((c & 0xe0) == 0xc0) {
    n = 2, min = 0x80, cp = c & 0x1f;
  } else if ((c & 0xf0) == 0xe0) {
    n = 3, min = 0x800, cp = c & 0x0f;
  } else if ((c & 0xf8) == 0xf0) {
    n = 4, min = 0x10000, cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((at(i + k) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (at(i + k) & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

}  // namespace

std::string sanitize_utf8(std::string_view s) {
  // Fast path: almost every symbol and path is plain ASCII / valid UTF-8.
  size_t i = 0;
  while (i < s.size()) {
    size_t n = utf8_seq_len(s, i);
    if (!n) break;
    i += n;
  }
  if (i == s.size()) return std::string(s);
  std::string out(s.substr(0, i));
  while (i < s.size()) {
    size_t n = utf8_seq_len(s, i);
    if (n) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out += "\xef\xbf\xbd";  // U+FFFD, one per bad byte (as Python's errors="replace")
      ++i;
    }
  }
  return out;
}

PickleWriter::PickleWriter(FILE *out) : out_(out) { buf_.reserve(kBufSize); }

PickleWriter::~PickleWriter() { flush(); }

void PickleWriter::proto(uint8_t version) {
  byte(kProto);
  byte(version);
}
void PickleWriter::stop() { byte(kStop); }
void PickleWriter::mark() { byte(kMark); }
void PickleWriter::empty_dict() { byte(kEmptyDict); }
void PickleWriter::empty_list() { byte(kEmptyList); }
void PickleWriter::appends() { byte(kAppends); }
void PickleWriter::setitems() { byte(kSetitems); }
void PickleWriter::setitem() { byte(kSetitem); }
void PickleWriter::none() { byte(kNone); }
void PickleWriter::boolean(bool v) { byte(v ? kNewTrue : kNewFalse); }

void PickleWriter::long1(const uint8_t *b, int n) {
  byte(kLong1);
  byte(static_cast<uint8_t>(n));
  for (int i = 0; i < n; ++i) byte(b[i]);
}

void PickleWriter::integer(int64_t v) {
  if (v >= 0 && v < 0x100) {
    byte(kBinint1);
    le(static_cast<uint64_t>(v), 1);
  } else if (v >= 0 && v < 0x10000) {
    byte(kBinint2);
    le(static_cast<uint64_t>(v), 2);
  } else if (v >= INT32_MIN && v <= INT32_MAX) {
    byte(kBinint);
    le(static_cast<uint64_t>(static_cast<uint32_t>(static_cast<int32_t>(v))), 4);
  } else {
    // Minimal two's complement: drop high bytes that only repeat the sign.
    uint8_t b[8];
    auto u = static_cast<uint64_t>(v);
    for (int i = 0; i < 8; ++i) b[i] = static_cast<uint8_t>(u >> (8 * i));
    int n = 8;
    uint8_t fill = v < 0 ? 0xff : 0x00;
    while (n > 1 && b[n - 1] == fill && ((b[n - 2] & 0x80) == (fill & 0x80))) --n;
    long1(b, n);
  }
}

void PickleWriter::integer(uint64_t v) {
  if (v <= static_cast<uint64_t>(INT64_MAX)) {
    integer(static_cast<int64_t>(v));
    return;
  }
  // Top bit set: a ninth 0x00 byte keeps the value positive.
  uint8_t b[9];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<uint8_t>(v >> (8 * i));
  b[8] = 0;
  long1(b, 9);
}

void PickleWriter::floating(double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  byte(kBinfloat);
  for (int i = 7; i >= 0; --i) byte(static_cast<uint8_t>(bits >> (8 * i)));
}

void PickleWriter::string(std::string_view s) {
  std::string clean = sanitize_utf8(s);
  // BINUNICODE8 is not accepted by the browser; 4 GiB strings never occur.
  if (clean.size() > UINT32_MAX) clean.resize(UINT32_MAX);
  short_or_long(kShortBinunicode, kBinunicode, uint32_t(clean.size()));
  raw(clean.data(), clean.size());
}

void PickleWriter::put(uint32_t index) { short_or_long(kBinput, kLongBinput, index); }

void PickleWriter::get(uint32_t index) { short_or_long(kBinget, kLongBinget, index); }

void PickleWriter::short_or_long(uint8_t short_op, uint8_t long_op, uint32_t arg) {
  if (arg < 0x100) {
    byte(short_op);
    le(arg, 1);
  } else {
    byte(long_op);
    le(arg, 4);
  }
}

void PickleWriter::raw(const void *data, size_t n) {
  const auto *p = static_cast<const uint8_t *>(data);
  if (buf_.size() + n > kBufSize) {
    flush();
    if (n >= kBufSize) {
      if (ok_ && std::fwrite(p, 1, n, out_) != n) ok_ = false;
      total_ += n;
      return;
    }
  }
  buf_.insert(buf_.end(), p, p + n);
  total_ += n;
}

bool PickleWriter::flush() {
  if (!buf_.empty()) {
    if (ok_ && std::fwrite(buf_.data(), 1, buf_.size(), out_) != buf_.size()) ok_ = false;
    buf_.clear();
  }
  return ok_;
}

}  // namespace torchseal
