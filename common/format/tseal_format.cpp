#include "common/format/tseal_format.h"

namespace torchseal::tseal {

void append_chunk(std::vector<uint8_t> &out, Chunk type, const std::vector<uint8_t> &payload) {
  size_t at = out.size();
  out.resize(at + kChunkHeaderSize + payload.size());
  put_chunk(out.data() + at, type, payload.data(), payload.size());
}

void put_chunk_header(uint8_t *dst, Chunk type, const uint8_t *payload, size_t n) {
  RawWriter w(dst);
  w.u8(static_cast<uint8_t>(type));
  w.u8(0);
  w.u8(0);
  w.u8(0);
  w.u32(static_cast<uint32_t>(n));
  w.u32(crc32(payload, n));
}

size_t put_chunk(uint8_t *dst, Chunk type, const uint8_t *payload, size_t n) {
  put_chunk_header(dst, type, payload, n);
  if (n) memcpy(dst + kChunkHeaderSize, payload, n);
  return kChunkHeaderSize + n;
}

void append_file_header(std::vector<uint8_t> &out, uint32_t flags) {
  out.insert(out.end(), kMagic, kMagic + sizeof kMagic);
  ByteWriter w(out);
  w.u32(kVersion);
  w.u32(flags);
}

}  // namespace torchseal::tseal
