#include "common/format/event_codec.h"

namespace torchseal::tseal {

namespace {
using namespace codec_detail;
}  // namespace

void encode_event(ByteWriter &out, CodecState &st, const Event &e) {
  uint8_t buf[kMaxEventBytes];
  out.bytes(buf, encode_event(buf, st, e));
}

size_t encode_event(uint8_t *dst, CodecState &st, const Event &e) {
  RawWriter w(dst);
  uint64_t dt = e.time_ns >= st.prev_time ? e.time_ns - st.prev_time : 0;
  uint8_t op = static_cast<uint8_t>(e.op) << 4;
  switch (e.op) {
    case Op::Alloc:
      encode_alloc(w, st, e, dt);
      break;
    case Op::Free:
      encode_free(w, st, e, dt);
      break;
    default: {
      // Low bits of the op byte: kMapHasStacks on a Map that names its call's stacks.
      const bool map_stacks = e.op == Op::Map && (e.stack || e.pystack);
      w.u8(op | (map_stacks ? kMapHasStacks : 0));
      w.varint(dt);
      w.varint(static_cast<uint16_t>(e.api));
      switch (e.op) {
        case Op::OomFail:
          w.varint(e.size);
          w.varint(e.stack);
          w.varint(e.pystack);
          w.svarint(e.device);
          break;
        case Op::InvalidFree:
          w.varint(e.addr);
          w.varint(e.stack);
          w.varint(e.pystack);
          break;
        case Op::Teardown:
          w.svarint(e.device);
          w.varint(e.context);
          break;
        case Op::Map:
        case Op::Unmap:
        case Op::Reserve:
        case Op::Unreserve:
          w.varint(e.addr);
          w.varint(e.size);
          w.varint(e.stream);  // the VMM handle for Map
          if (map_stacks) {
            w.varint(e.stack);
            w.varint(e.pystack);
          }
          break;
        case Op::Step:
        case Op::Mark:
        case Op::Dump:
          w.varint(e.size);  // step number / label string id / trigger
          break;
        default:
          break;
      }
    }
  }
  // What the decoder will reconstruct: a stamp that stepped back was
  // encoded as delta 0, so the base must not step back either.
  st.prev_time += dt;
  return static_cast<size_t>(w.end() - dst);
}

bool decode_event(ByteReader &r, CodecState &st, Event &e) {
  if (r.done()) return false;
  e = Event{};
  uint8_t b = r.u8();
  uint8_t opv = b >> 4, nib = b & 15;
  if (opv > static_cast<uint8_t>(kLastOp)) {
    // An unknown token: treat as corruption, never guess a length.
    r.u32();
    while (!r.done()) r.u8();
    return false;
  }
  e.op = static_cast<Op>(opv);
  e.time_ns = st.prev_time + r.varint();
  e.device = st.device;
  switch (e.op) {
    case Op::Alloc: {
      e.addr = st.prev_addr + static_cast<uint64_t>(r.svarint());
      e.size = r.varint();
      e.stack = static_cast<StackId>(r.varint());
      e.pystack = static_cast<PyStackId>(r.varint());
      if (nib & kAllocHasStream) e.stream = r.varint();
      if (nib & kAllocHasContext) e.context = static_cast<uint32_t>(r.varint());
      if (nib & kAllocDevice) st.device = static_cast<int16_t>(r.svarint());
      if (nib & kAllocApi) st.api = static_cast<ApiId>(r.varint());
      e.device = st.device;
      e.api = st.api;
      st.prev_addr = e.addr;
      remember(st, e.addr);
      break;
    }
    case Op::Free: {
      e.api = static_cast<ApiId>(r.varint());
      if (nib) {
        if (nib > kRecentAddrs) return false;
        e.addr = st.recent[nib - 1];
      } else {
        e.addr = st.prev_addr + static_cast<uint64_t>(r.svarint());
        st.prev_addr = e.addr;
      }
      break;
    }
    default: {
      e.api = static_cast<ApiId>(r.varint());
      switch (e.op) {
        case Op::OomFail:
          e.size = r.varint();
          e.stack = static_cast<StackId>(r.varint());
          e.pystack = static_cast<PyStackId>(r.varint());
          e.device = static_cast<int16_t>(r.svarint());
          break;
        case Op::InvalidFree:
          e.addr = r.varint();
          e.stack = static_cast<StackId>(r.varint());
          e.pystack = static_cast<PyStackId>(r.varint());
          break;
        case Op::Teardown:
          e.device = static_cast<int16_t>(r.svarint());
          e.context = static_cast<uint32_t>(r.varint());
          break;
        case Op::Map:
        case Op::Unmap:
        case Op::Reserve:
        case Op::Unreserve:
          e.addr = r.varint();
          e.size = r.varint();
          e.stream = r.varint();
          if (e.op == Op::Map && (nib & kMapHasStacks)) {
            e.stack = static_cast<StackId>(r.varint());
            e.pystack = static_cast<PyStackId>(r.varint());
          }
          break;
        case Op::Step:
        case Op::Mark:
        case Op::Dump:
          e.size = r.varint();
          break;
        default:
          break;
      }
    }
  }
  e.family = e.api < ApiId::Count ? api_info(e.api).family : Family::None;
  st.prev_time = e.time_ns;
  return r.ok();
}

}  // namespace torchseal::tseal
