#include "common/format/crc32.h"
#include "common/util/fork_safe.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace torchseal::tseal {

namespace {
// Slicing by 8: eight tables, eight bytes a step.
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

// On the running state (pre- and post-inverted by the callers).
uint32_t update_portable(uint32_t c, const uint8_t *data, size_t n) {
  const auto &t = kCrc.t;
  for (; n >= 8; data += 8, n -= 8) {
    uint32_t one = load_le32(data) ^ c, two = load_le32(data + 4);
    c = t[7][one & 0xff] ^ t[6][(one >> 8) & 0xff] ^ t[5][(one >> 16) & 0xff] ^ t[4][one >> 24] ^
        t[3][two & 0xff] ^ t[2][(two >> 8) & 0xff] ^ t[1][(two >> 16) & 0xff] ^ t[0][two >> 24];
  }
  for (; n; --n) c = t[0][(c ^ *data++) & 0xff] ^ (c >> 8);
  return c;
}

#if defined(__x86_64__)
// Carry-less multiplication folding (Intel, "Fast CRC Computation for
// Generic Polynomials Using PCLMULQDQ", 2009), for the reflected polynomial:
// four 128-bit lanes folded 64 bytes at a time, then into one lane, then a
// Barrett reduction to 32 bits. Every byte of a history passes through the
// writer's checksum; the table loop was most of the writer thread's time
// (bench/RESULTS.md). The constants are x^k mod P for the fold distances
// (k1/k2: 4x128 bits, k3/k4: 128, k5: 64) and P and floor(x^64 / P) for the
// reduction, all bit-reflected.
#define TS_CLMUL __attribute__((target("pclmul,sse4.1")))
TS_CLMUL inline __m128i load16(const uint8_t *q) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i *>(q));
}
// a * x^(distance) folded onto b: the two 64-bit halves multiplied by their
// constants, then added (xor) to the next block.
TS_CLMUL inline __m128i fold16(__m128i a, __m128i k, __m128i b) {
  return _mm_xor_si128(
      _mm_xor_si128(_mm_clmulepi64_si128(a, k, 0x00), _mm_clmulepi64_si128(a, k, 0x11)), b);
}

// n: at least 64, a multiple of 16.
TS_CLMUL uint32_t update_clmul(uint32_t crc, const uint8_t *p, size_t n) {
  const __m128i k1k2 = _mm_set_epi64x(0x01c6e41596, 0x0154442bd4);
  const __m128i k3k4 = _mm_set_epi64x(0x00ccaa009e, 0x01751997d0);
  const __m128i k5 = _mm_set_epi64x(0, 0x0163cd6124);
  const __m128i poly = _mm_set_epi64x(0x01f7011641, 0x01db710641);
  const __m128i low32 = _mm_setr_epi32(~0, 0, ~0, 0);

  __m128i x1 = _mm_xor_si128(load16(p), _mm_cvtsi32_si128(static_cast<int>(crc)));
  __m128i x2 = load16(p + 16), x3 = load16(p + 32), x4 = load16(p + 48);
  p += 64;
  n -= 64;
  for (; n >= 64; p += 64, n -= 64) {
    x1 = fold16(x1, k1k2, load16(p));
    x2 = fold16(x2, k1k2, load16(p + 16));
    x3 = fold16(x3, k1k2, load16(p + 32));
    x4 = fold16(x4, k1k2, load16(p + 48));
  }
  x1 = fold16(x1, k3k4, x2);
  x1 = fold16(x1, k3k4, x3);
  x1 = fold16(x1, k3k4, x4);
  for (; n >= 16; p += 16, n -= 16) x1 = fold16(x1, k3k4, load16(p));

  // 128 bits to 64.
  __m128i x = _mm_xor_si128(_mm_srli_si128(x1, 8), _mm_clmulepi64_si128(x1, k3k4, 0x10));
  x = _mm_xor_si128(_mm_srli_si128(x, 4), _mm_clmulepi64_si128(_mm_and_si128(x, low32), k5, 0x00));
  // Barrett reduction: 64 bits to 32.
  __m128i t = _mm_clmulepi64_si128(_mm_and_si128(x, low32), poly, 0x10);
  t = _mm_clmulepi64_si128(_mm_and_si128(t, low32), poly, 0x00);
  return static_cast<uint32_t>(_mm_extract_epi32(_mm_xor_si128(x, t), 1));
}

bool have_clmul() {
  static constinit Resolved<int> yes;  // 1: no, 2: yes
  return yes.get([] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1") ? 2 : 1;
  }) == 2;
}
#undef TS_CLMUL
#endif
}  // namespace

uint32_t crc32(const uint8_t *data, size_t n) { return crc32_extend(0, data, n); }

uint32_t crc32_extend(uint32_t crc, const uint8_t *data, size_t n) {
  uint32_t c = crc ^ 0xFFFFFFFFu;
#if defined(__x86_64__)
  if (n >= 64 && have_clmul()) {
    size_t bulk = n & ~size_t(15);
    c = update_clmul(c, data, bulk);
    data += bulk;
    n -= bulk;
  }
#endif
  return update_portable(c, data, n) ^ 0xFFFFFFFFu;
}

uint32_t crc32_portable(const uint8_t *data, size_t n) {
  return update_portable(0xFFFFFFFFu, data, n) ^ 0xFFFFFFFFu;
}

}  // namespace torchseal::tseal
