// Sorted, disjoint [lo, hi) address ranges (the loaded objects' executable
// segments) and the lookup both the unwinder and its rule table make in them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <utility>
#include <vector>

namespace torchseal::unwind {

using AddressRanges = std::vector<std::pair<uint64_t, uint64_t>>;

inline bool in_ranges(const AddressRanges &r, uint64_t ip) {
  auto it = std::upper_bound(r.begin(), r.end(), std::make_pair(ip, ~uint64_t{0}));
  return it != r.begin() && ip < std::prev(it)->second;
}

}  // namespace torchseal::unwind
