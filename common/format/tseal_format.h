// The .tseal history file: constants and primitives shared by the shim's
// writer and the report library's reader (one definition of the format).
//
// Layout: a 16-byte file header, then chunks. Each chunk is
//   u8 type | u8 0 | u16 0 | u32 payload length | u32 crc32(payload) | payload
// so a truncated or corrupt tail is detected and everything before it is
// still trusted. Chunks are self-contained: event chunks restart their delta
// state, so the reader never needs anything from a damaged neighbour.
//
// Ordering: once per pass the writer seals every thread's buffer while
// holding all their locks at once (one cut across threads) and writes a PASS
// chunk before that pass's events. Every event in pass k was recorded before
// that cut and every event of pass k+1 after it, so passes are totally
// ordered (a free is never in an earlier pass than its allocation) and the
// reader only sorts (by timestamp) within one pass. Its memory is bounded by
// one pass plus the live state, whatever the file size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "common/format/crc32.h"

namespace torchseal::tseal {

inline constexpr char kMagic[8] = {'\x89', 'T', 'S', 'E', 'A', 'L', '\r', '\n'};
// 2: a capped history's checkpoints may be deltas from a base checkpoint,
// which version 1 readers would take as whole. Version 1 files still read.
inline constexpr uint32_t kVersion = 2;
inline constexpr uint32_t kOldestVersion = 1;
inline constexpr size_t kFileHeaderSize = 16;  // magic, u32 version, u32 flags
inline constexpr size_t kChunkHeaderSize = 12;
inline constexpr uint32_t kMaxChunkPayload = 64u << 20;  // a reader refuses larger chunks

enum class Chunk : uint8_t {
  Process = 1,   // process info (pid, argv, rank, host, times, backend, clock base)
  Modules = 2,   // module map: path, base, lo, hi, build-id
  Stacks = 3,    // newly interned native stacks
  PyStacks = 4,  // newly interned Python stacks
  Events = 5,    // one thread's encoded events
  Pass = 6,      // ordering boundary (see above)
  Symbols = 7,   // symbol table for every IP seen (clean exit)
  End = 8,       // end: end time, totals, exit-time flags
  Labels = 9,    // newly interned mark labels
  Verdict = 10,  // exit-time verdict of a Python process or of its OOMs (clean exit)
  // Segmented histories (checkpoint.h):
  Segment = 11,          // main file: index entry of one closed segment
  CheckpointBegin = 12,  // segment file: the replay state it starts from ...
  CheckpointPart = 13,   // ... in parts
  OomSnapshot = 14,      // main file: one OOM's live set by site, for checkpoints
};

// File header flags. A capped history is a main file (process, stacks,
// labels, modules, the segment index, end and verdict) and segment files
// P.tseal.000001, ... (a checkpoint, then passes of events).
inline constexpr uint32_t kFlagSegmented = 1;  // the main file of a segmented history
inline constexpr uint32_t kFlagSegment = 2;    // one segment file
inline constexpr uint32_t kFlagBase = 4;       // a base checkpoint file (P.tseal.000042.base)

// The highest chunk type this version writes; a reader skips chunks of a
// higher type whose checksum matches (docs/tseal-format.md, append-only rules).
inline constexpr uint8_t kLastChunk = static_cast<uint8_t>(Chunk::OomSnapshot);

// ---- little-endian fixed-width and LEB128 varints ----

class ByteWriter {
 public:
  explicit ByteWriter(std::vector<uint8_t> &out) : out_(out) {}
  void u8(uint8_t v) { out_.push_back(v); }
  void u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  void u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  void varint(uint64_t v) {
    while (v >= 0x80) {
      out_.push_back(static_cast<uint8_t>(v | 0x80));
      v >>= 7;
    }
    out_.push_back(static_cast<uint8_t>(v));
  }
  void svarint(int64_t v) {
    varint((static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63));
  }
  void bytes(const uint8_t *p, size_t n) { out_.insert(out_.end(), p, p + n); }
  void str(std::string_view s) {
    varint(s.size());
    out_.insert(out_.end(), s.begin(), s.end());
  }
  void f64(double d) {
    uint64_t bits;
    memcpy(&bits, &d, sizeof bits);
    u64(bits);
  }

 private:
  std::vector<uint8_t> &out_;
};

// Writes through a raw pointer into room the caller reserved: no allocation
// (the crash path) and no per-byte capacity check (the event hot path: a
// push_back per byte was half of the encoder's cost, bench/RESULTS.md).
class RawWriter {
 public:
  explicit RawWriter(uint8_t *p) : p_(p) {}
  void u8(uint8_t v) { *p_++ = v; }
  void u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) *p_++ = static_cast<uint8_t>(v >> (8 * i));
  }
  void u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) *p_++ = static_cast<uint8_t>(v >> (8 * i));
  }
  void f64(double d) {
    uint64_t bits;
    memcpy(&bits, &d, sizeof bits);
    u64(bits);
  }
  // An event's fields are mostly one or two bytes (time deltas, sizes,
  // stack ids): those take no loop (the hot path's encoder runs here).
  void varint(uint64_t v) {
    if (v < 0x80) {
      *p_++ = static_cast<uint8_t>(v);
      return;
    }
    if (v < 0x4000) {
      p_[0] = static_cast<uint8_t>(v | 0x80);
      p_[1] = static_cast<uint8_t>(v >> 7);
      p_ += 2;
      return;
    }
    while (v >= 0x80) {
      *p_++ = static_cast<uint8_t>(v | 0x80);
      v >>= 7;
    }
    *p_++ = static_cast<uint8_t>(v);
  }
  void svarint(int64_t v) {
    varint((static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63));
  }
  uint8_t *end() const { return p_; }

 private:
  uint8_t *p_;
};

// Bounds-checked reader: any overrun sets ok() false and yields zeros, so a
// corrupt payload can never read outside its buffer.
class ByteReader {
 public:
  ByteReader(const uint8_t *p, size_t n) : p_(p), end_(p + n) {}
  bool ok() const { return ok_; }
  bool done() const { return p_ >= end_; }
  size_t remaining() const { return static_cast<size_t>(end_ - p_); }
  uint8_t u8() {
    if (p_ >= end_) return fail();
    return *p_++;
  }
  uint32_t u32() {
    if (remaining() < 4) return fail();
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(p_[i]) << (8 * i);
    p_ += 4;
    return v;
  }
  uint64_t u64() {
    if (remaining() < 8) return fail();
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p_[i]) << (8 * i);
    p_ += 8;
    return v;
  }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ >= end_) return fail();
      uint8_t b = *p_++;
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    return fail();
  }
  int64_t svarint() {
    uint64_t u = varint();
    return static_cast<int64_t>(u >> 1) ^ -static_cast<int64_t>(u & 1);
  }
  std::string str(size_t max_len = 1 << 20) {
    uint64_t n = varint();
    if (!ok_ || n > remaining() || n > max_len) {
      fail();
      return {};
    }
    std::string s(reinterpret_cast<const char *>(p_), n);
    p_ += n;
    return s;
  }
  double f64() {
    uint64_t bits = u64();
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
  }

 private:
  uint8_t fail() {
    ok_ = false;
    p_ = end_;
    return 0;
  }
  const uint8_t *p_;
  const uint8_t *end_;
  bool ok_ = true;
};

// Appends a complete chunk (header + payload) to `out`.
void append_chunk(std::vector<uint8_t> &out, Chunk type, const std::vector<uint8_t> &payload);
void append_file_header(std::vector<uint8_t> &out, uint32_t flags = 0);
// The same into raw memory with room for kChunkHeaderSize + n, for paths
// that must not allocate. Returns the bytes written.
size_t put_chunk(uint8_t *dst, Chunk type, const uint8_t *payload, size_t n);
// Only the header (type, length, checksum) of a payload that already sits
// where it goes, kChunkHeaderSize bytes on from dst.
void put_chunk_header(uint8_t *dst, Chunk type, const uint8_t *payload, size_t n);

}  // namespace torchseal::tseal
