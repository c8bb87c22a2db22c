#include "common/format/tseal_format.h"

namespace torchseal::tseal {

namespace {
// Slicing by 8: eight tables, eight bytes a step. Every byte written to a
// history passes through here (the writer checksums each chunk), so the
// byte-at-a-time loop was most of the writer thread's own time.
struct Crc32Tables {
  uint32_t t[8][256];
  constexpr Crc32Tables() : t{} {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[0][i] = c;
    }
    for (int k = 1; k < 8; ++k)
      for (uint32_t i = 0; i < 256; ++i) t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xff];
  }
};
constexpr Crc32Tables kCrc;

inline uint32_t load_le32(const uint8_t *p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
}
}  // namespace

uint32_t crc32(const uint8_t *data, size_t n) {
  const auto &t = kCrc.t;
  uint32_t c = 0xFFFFFFFFu;
  for (; n >= 8; data += 8, n -= 8) {
    uint32_t one = load_le32(data) ^ c, two = load_le32(data + 4);
    c = t[7][one & 0xff] ^ t[6][(one >> 8) & 0xff] ^ t[5][(one >> 16) & 0xff] ^ t[4][one >> 24] ^
        t[3][two & 0xff] ^ t[2][(two >> 8) & 0xff] ^ t[1][(two >> 16) & 0xff] ^ t[0][two >> 24];
  }
  for (; n; --n) c = t[0][(c ^ *data++) & 0xff] ^ (c >> 8);
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
