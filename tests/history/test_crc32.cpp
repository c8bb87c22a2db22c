// The chunk checksum: the carry-less-multiply path (x86-64 with PCLMULQDQ)
// gives the same CRC-32 as the table loop for every length and alignment,
// and both give the standard check value.
#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <vector>

#include "common/format/crc32.h"

using torchseal::tseal::crc32;
using torchseal::tseal::crc32_extend;
using torchseal::tseal::crc32_portable;

TEST_CASE("crc32 gives the standard check value") {
  const uint8_t check[] = {'1', '2', '3', '4', '5', '6', '7', '8', '9'};
  CHECK(crc32(check, sizeof check) == 0xCBF43926u);
  CHECK(crc32_portable(check, sizeof check) == 0xCBF43926u);
  CHECK(crc32(check, 0) == 0u);
  // 64 bytes and more take the folding path where the CPU has it: zeros,
  // ones, and the check string repeated give zlib's values.
  std::vector<uint8_t> zeros(64, 0), ones(64, 0xff);
  CHECK(crc32(zeros.data(), zeros.size()) == 0x758D6336u);
  CHECK(crc32(ones.data(), ones.size()) == crc32_portable(ones.data(), ones.size()));
}

TEST_CASE("crc32 agrees with the table loop at every length and offset") {
  std::mt19937_64 rng(32);
  std::vector<uint8_t> buf(4096 + 64);
  for (auto &b : buf) b = static_cast<uint8_t>(rng());
  for (size_t n = 0; n <= 1100; ++n)
    for (size_t off : {0, 1, 7, 13}) {
      INFO("length " << n << " offset " << off);
      REQUIRE(crc32(buf.data() + off, n) == crc32_portable(buf.data() + off, n));
    }
  for (size_t n : {4095, 4096, 4096 + 63})
    REQUIRE(crc32(buf.data(), n) == crc32_portable(buf.data(), n));
}

TEST_CASE("crc32_extend continues a checksum across pieces") {
  std::mt19937_64 rng(33);
  std::vector<uint8_t> buf(3000);
  for (auto &b : buf) b = static_cast<uint8_t>(rng());
  for (size_t n : {0, 1, 20, 64, 100, 1000, 2999})
    for (size_t cut : {0, 1, 19, 64, 65, 500}) {
      if (cut > n) continue;
      INFO("length " << n << " cut at " << cut);
      uint32_t whole = crc32(buf.data(), n);
      REQUIRE(crc32_extend(crc32(buf.data(), cut), buf.data() + cut, n - cut) == whole);
      REQUIRE(crc32_extend(0, buf.data(), n) == whole);
    }
}
