// Who keeps a live GPU block alive in a Python process (docs/holders.md,
// "Holders"): a referrer chain from a root (module global, frame local,
// class attribute, exception traceback) to the tensors, and what it holds.
// Shared by the holder scanner, the report and the hint rules.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace torchseal {

struct Holder {
  // Root first, one readable step each: "train_leaky() local 'predictions'
  // (list) at b.py:18", "[0..29]", "Tensor float32 (256, 1024)".
  std::vector<std::string> chain;
  uint64_t bytes = 0;
  uint64_t tensors = 0;
};

}  // namespace torchseal
