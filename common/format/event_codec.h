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

// The two events of nearly every pair, inline where the shim encodes on its
// hot path (an out-of-line call with its register saves was a fifth of an
// event's encoding); any other op goes to encode_event.
namespace codec_detail {
inline constexpr uint8_t kAllocHasStream = 1, kAllocHasContext = 2, kAllocDevice = 4, kAllocApi = 8;
inline constexpr uint8_t kMapHasStacks = 1;  // files before it never set the bit

inline void remember(CodecState &st, uint64_t addr) {
  st.recent[st.recent_pos] = addr;
  st.recent_pos = static_cast<uint8_t>(st.recent_pos + 1 == kRecentAddrs ? 0 : st.recent_pos + 1);
}

// Newest first: a free usually follows its allocation closely. Any slot
// holding the address decodes the same, so the first match is as good.
inline int find_recent(const CodecState &st, uint64_t addr) {
  if (!addr) return -1;
  int i = st.recent_pos;
  for (int k = 0; k < kRecentAddrs; ++k) {
    i = i ? i - 1 : kRecentAddrs - 1;
    if (st.recent[i] == addr) return i;
  }
  return -1;
}

__attribute__((always_inline)) inline void encode_alloc(RawWriter &w, CodecState &st,
                                                        const Event &e, uint64_t dt) {
  uint8_t flags = 0;
  if (e.stream) flags |= kAllocHasStream;
  if (e.context) flags |= kAllocHasContext;
  if (e.device != st.device) flags |= kAllocDevice;
  if (e.api != st.api) flags |= kAllocApi;
  w.u8(static_cast<uint8_t>(static_cast<uint8_t>(Op::Alloc) << 4) | flags);
  w.varint(dt);
  w.svarint(static_cast<int64_t>(e.addr - st.prev_addr));
  w.varint(e.size);
  w.varint(e.stack);
  w.varint(e.pystack);
  if (flags & kAllocHasStream) w.varint(e.stream);
  if (flags & kAllocHasContext) w.varint(e.context);
  if (flags & kAllocDevice) w.svarint(e.device);
  if (flags & kAllocApi) w.varint(static_cast<uint16_t>(e.api));
  st.prev_addr = e.addr;
  st.device = e.device;
  st.api = e.api;
  remember(st, e.addr);
}

__attribute__((always_inline)) inline void encode_free(RawWriter &w, CodecState &st, const Event &e,
                                                       uint64_t dt) {
  int slot = find_recent(st, e.addr);
  // The op byte's low bits: the recent slot + 1, 0 for an explicit address.
  w.u8(static_cast<uint8_t>(static_cast<uint8_t>(Op::Free) << 4) | static_cast<uint8_t>(slot + 1));
  w.varint(dt);
  w.varint(static_cast<uint16_t>(e.api));
  if (slot < 0) {
    w.svarint(static_cast<int64_t>(e.addr - st.prev_addr));
    st.prev_addr = e.addr;
  }
}
}  // namespace codec_detail

// An Alloc or a Free (the caller checked), inline.
__attribute__((always_inline)) inline size_t encode_pair_event(uint8_t *dst, CodecState &st,
                                                               const Event &e) {
  RawWriter w(dst);
  uint64_t dt = e.time_ns >= st.prev_time ? e.time_ns - st.prev_time : 0;
  if (e.op == Op::Alloc)
    codec_detail::encode_alloc(w, st, e, dt);
  else
    codec_detail::encode_free(w, st, e, dt);
  st.prev_time += dt;  // as encode_event: the decoder's base never steps back
  return static_cast<size_t>(w.end() - dst);
}

__attribute__((always_inline)) inline bool is_pair_event(const Event &e) {
  return e.op == Op::Alloc || e.op == Op::Free;
}

__attribute__((always_inline)) inline size_t encode_event_hot(uint8_t *dst, CodecState &st,
                                                              const Event &e) {
  return is_pair_event(e) ? encode_pair_event(dst, st, e) : encode_event(dst, st, e);
}

// Decodes the next event; false at the end of the payload or on corruption
// (then r.ok() is false).
bool decode_event(ByteReader &r, CodecState &st, Event &e);

}  // namespace torchseal::tseal
