// A streaming writer for the subset of Python's pickle format that PyTorch's
// memory_viz (MemoryViz.js, a hand-written JavaScript unpickler) accepts, so
// `torchseal export --memory-viz` needs no Python at run time.
//
// Only these opcodes are ever written: PROTO, STOP, MARK, EMPTY_DICT,
// EMPTY_LIST, APPENDS, SETITEMS, SETITEM, NONE, NEWTRUE, NEWFALSE, BININT,
// BININT1, BININT2, LONG1, BINFLOAT, SHORT_BINUNICODE, BINUNICODE, BINPUT,
// LONG_BINPUT, BINGET, LONG_BINGET. The stream is protocol 4 without FRAME
// opcodes (framing is optional in protocol 4 and both unpicklers accept an
// unframed stream); the memo is only ever addressed with explicit
// BINPUT/BINGET indices, never MEMOIZE (the browser mishandles a mix).
//
// Nothing is built in memory: opcodes go through a small buffer straight to
// a FILE*, so a 1M-event export costs the same memory as a 10-event one.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace torchseal {

// `s` with every invalid UTF-8 sequence (bad lead byte, truncated sequence,
// overlong form, surrogate, > U+10FFFF) replaced by U+FFFD. Pickled strings
// and JSON strings must be valid UTF-8; file names and symbols from a foreign
// binary need not be.
std::string sanitize_utf8(std::string_view s);

class PickleWriter {
 public:
  // `out` is not owned; nothing is written to it before the first flush().
  explicit PickleWriter(FILE *out);
  ~PickleWriter();
  PickleWriter(const PickleWriter &) = delete;
  PickleWriter &operator=(const PickleWriter &) = delete;

  void proto(uint8_t version);  // PROTO (the writer only emits protocol-4 opcodes: use 4)
  void stop();                  // STOP
  void mark();                  // MARK
  void empty_dict();            // EMPTY_DICT
  void empty_list();            // EMPTY_LIST
  void appends();               // APPENDS
  void setitems();              // SETITEMS
  void setitem();               // SETITEM
  void none();                  // NONE
  void boolean(bool v);         // NEWTRUE / NEWFALSE
  // Smallest of BININT1, BININT2, BININT, LONG1. LONG1 is signed two's
  // complement, little-endian, minimal length.
  void integer(int64_t v);
  void integer(uint64_t v);
  void integer(int v) { integer(static_cast<int64_t>(v)); }
  void floating(double v);  // BINFLOAT (big-endian IEEE 754)
  // SHORT_BINUNICODE / BINUNICODE of sanitize_utf8(s).
  void string(std::string_view s);
  // Memo: PUT stores the top of the stack at `index`; GET pushes it again.
  // BINPUT/BINGET for indices < 256, LONG_BINPUT/LONG_BINGET otherwise.
  void put(uint32_t index);
  void get(uint32_t index);

  // Appends bytes that are already a valid opcode sequence (a spooled list
  // body), then keeps writing after them.
  void raw(const void *data, size_t n);

  // Writes out the buffer; false (and ok() false) if any write failed.
  bool flush();
  bool ok() const { return ok_; }
  uint64_t bytes_written() const { return total_; }

 private:
  void byte(uint8_t b) {
    if (buf_.size() >= kBufSize) flush();
    buf_.push_back(b);
    ++total_;
  }
  void le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) byte(static_cast<uint8_t>(v >> (8 * i)));
  }
  void long1(const uint8_t *le_bytes, int n);
  // The opcode pair with a 1-byte argument (short_op, arg < 256) or a 4-byte one.
  void short_or_long(uint8_t short_op, uint8_t long_op, uint32_t arg);

  static constexpr size_t kBufSize = 1 << 16;
  FILE *out_;
  std::vector<uint8_t> buf_;
  uint64_t total_ = 0;
  bool ok_ = true;
};

// Writes one list's items in APPENDS batches of at most kBatch items: the JS
// unpickler pushes an APPENDS batch with one spread call, and a batch of
// 200k items overflows the browser's call stack.
//
//   w.empty_list();  ListBatcher b(w);
//   for (...) { b.item(); <write one item>; }
//   b.finish();
class ListBatcher {
 public:
  static constexpr size_t kBatch = 1000;
  explicit ListBatcher(PickleWriter &w) : w_(w) {}
  // Call before writing each item.
  void item() {
    if (n_ == kBatch) {
      w_.appends();
      n_ = 0;
    }
    if (n_ == 0) w_.mark();
    ++n_;
    ++count_;
  }
  // Closes the open batch (no-op for an empty list).
  void finish() {
    if (n_) w_.appends();
    n_ = 0;
  }
  uint64_t count() const { return count_; }

 private:
  PickleWriter &w_;
  size_t n_ = 0;
  uint64_t count_ = 0;
};

}  // namespace torchseal
