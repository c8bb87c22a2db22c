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
  ByteWriter w(out);
  w.u8(static_cast<uint8_t>(type));
  w.u8(0);
  w.u8(0);
  w.u8(0);
  w.u32(static_cast<uint32_t>(payload.size()));
  w.u32(crc32(payload.data(), payload.size()));
  out.insert(out.end(), payload.begin(), payload.end());
}

void append_file_header(std::vector<uint8_t> &out) {
  out.insert(out.end(), kMagic, kMagic + sizeof kMagic);
  ByteWriter w(out);
  w.u32(kVersion);
  w.u32(0);
}

}  // namespace torchseal::tseal
