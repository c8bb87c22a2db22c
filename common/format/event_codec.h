// Compact encoding of allocator events inside one Events chunk (memray's
// record-writer ideas: one-byte tokens, delta varints, and a small cache of
// recent allocation addresses so most frees cost 3-4 bytes).
#pragma once

#include <cstdint>

#include "common/format/tseal_format.h"
#include "common/model/event.h"

namespace torchseal::tseal {

inline constexpr int kRecentAddrs = 15;

// Delta state of one chunk. Reset at every chunk start so chunks decode alone.
struct CodecState {
  uint64_t prev_time = 0;
  uint64_t prev_addr = 0;
  uint64_t recent[kRecentAddrs] = {};
  uint8_t recent_pos = 0;
  int16_t device = -1;
  ApiId api = ApiId::Unknown;

  void reset(uint64_t base_time) {
    *this = CodecState{};
    prev_time = base_time;
  }
};

// Appends one event. Times must not decrease within a chunk (one thread).
void encode_event(ByteWriter &w, CodecState &st, const Event &e);

// The same into raw memory with room for kMaxEventBytes; returns the bytes
// written. The largest event is a tag and at most ten varints.
inline constexpr size_t kMaxEventBytes = 1 + 10 * 10;
size_t encode_event(uint8_t *dst, CodecState &st, const Event &e);

// Decodes the next event; false at the end of the payload or on corruption
// (then r.ok() is false).
bool decode_event(ByteReader &r, CodecState &st, Event &e);

}  // namespace torchseal::tseal
