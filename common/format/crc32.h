// CRC-32 (IEEE 802.3, zlib's: reflected 0x04C11DB7) of a history chunk's
// payload, as tseal_format.h's chunk header stores it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace torchseal::tseal {

uint32_t crc32(const uint8_t *data, size_t n);

// The CRC-32 of what `crc` covered followed by `data` (zlib's crc32(crc,
// ...)): a payload checksummed in the pieces it lies in.
uint32_t crc32_extend(uint32_t crc, const uint8_t *data, size_t n);

// The portable slicing-by-8 loop alone, whatever the CPU (tests compare the
// two).
uint32_t crc32_portable(const uint8_t *data, size_t n);

}  // namespace torchseal::tseal
