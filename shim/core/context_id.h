// Contexts are named in live records by a small stable id, so a teardown can
// find its allocations without holding CUcontext pointers.
#pragma once

#include <cstdint>

#include "shim/core/shard_lock.h"

namespace torchseal {

inline uint32_t context_id_of(const void *ctx) {
  return ctx ? static_cast<uint32_t>(mix64(reinterpret_cast<uint64_t>(ctx)) | 1) : 0;
}

}  // namespace torchseal
