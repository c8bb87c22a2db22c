#include "report/format/tseal_format.h"

namespace torchseal::tseal {

namespace {
struct Crc32Table {
  uint32_t t[256];
  constexpr Crc32Table() : t{} {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
  }
};
constexpr Crc32Table kCrc;
}  // namespace

uint32_t crc32(const uint8_t *data, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) c = kCrc.t[(c ^ data[i]) & 0xff] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

void append_chunk(std::vector<uint8_t> &out, Chunk type, const std::vector<uint8_t> &payload) {
  size_t at = out.size();
  out.resize(at + kChunkHeaderSize + payload.size());
  put_chunk(out.data() + at, type, payload.data(), payload.size());
}

size_t put_chunk(uint8_t *dst, Chunk type, const uint8_t *payload, size_t n) {
  RawWriter w(dst);
  w.u8(static_cast<uint8_t>(type));
  w.u8(0);
  w.u8(0);
  w.u8(0);
  uint32_t len = static_cast<uint32_t>(n), crc = crc32(payload, n);
  for (int i = 0; i < 4; ++i) w.u8(static_cast<uint8_t>(len >> (8 * i)));
  for (int i = 0; i < 4; ++i) w.u8(static_cast<uint8_t>(crc >> (8 * i)));
  if (n) memcpy(w.end(), payload, n);
  return kChunkHeaderSize + n;
}

void append_file_header(std::vector<uint8_t> &out, uint32_t flags) {
  out.insert(out.end(), kMagic, kMagic + sizeof kMagic);
  ByteWriter w(out);
  w.u32(kVersion);
  w.u32(flags);
}

}  // namespace torchseal::tseal
